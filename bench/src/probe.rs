//! A plain Redis connection beside the library's: FLUSHALL, INFO (cpu, memory, commandstats), TIME.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;

use crate::BoxResult;

/// Commands the harness itself sends while it measures, left out of command counts.
const OWN_COMMANDS: [&str; 1] = ["info"];

/// Commands a client sends that run scripts: the calls they make inside are not sent by the client.
const SCRIPT_COMMANDS: [&str; 6] = [
    "fcall",
    "fcall_ro",
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
];

/// A side connection to the benchmark's Redis.
pub(crate) struct Probe {
    conn: MultiplexedConnection,
}

/// Command counts from `INFO commandstats`.
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandStats(BTreeMap<String, u64>, BTreeMap<String, u64>);

impl CommandStats {
    /// Commands clients sent from `before` to `self` (scripts count once; the harness's INFO is
    /// left out), and calls made inside scripts.
    pub(crate) fn since(&self, before: &CommandStats) -> (u64, u64, BTreeMap<String, u64>) {
        let (mut sent, mut inner) = (0, 0);
        let mut delta = BTreeMap::new();
        for (name, calls) in &self.0 {
            let d = calls - before.0.get(name).copied().unwrap_or(0);
            if d == 0 || OWN_COMMANDS.contains(&name.as_str()) {
                continue;
            }
            delta.insert(name.clone(), d);
            sent += d;
        }
        // Inside a script, `redis.call` counts in commandstats too; the client sent only the FCALL.
        // Scripts make their inner calls to data commands only, which no client here sends directly.
        for (name, d) in &delta {
            if !SCRIPT_COMMANDS.contains(&name.as_str()) && !client_command(name) {
                inner += d;
            }
        }
        (sent - inner, inner, delta)
    }

    /// Per command with calls since `before`: calls, and Redis time in them (us), as one line.
    pub(crate) fn time_since(&self, before: &CommandStats) -> String {
        let mut out = Vec::new();
        for (name, calls) in &self.0 {
            let d = calls - before.0.get(name).copied().unwrap_or(0);
            if d == 0 || OWN_COMMANDS.contains(&name.as_str()) {
                continue;
            }
            let us =
                self.1.get(name).copied().unwrap_or(0) - before.1.get(name).copied().unwrap_or(0);
            out.push(format!("{name} {d}x {:.1}ms", us as f64 / 1000.0));
        }
        out.join(", ")
    }
}

/// Commands the library (or the hint listener) sends itself, outside scripts.
fn client_command(name: &str) -> bool {
    matches!(
        name,
        "ping"
            | "subscribe"
            | "client|setinfo"
            | "client|setname"
            | "hello"
            | "config|get"
            | "select"
            | "function|load"
    )
}

/// A connection with a long response timeout: FLUSHALL of a million jobs takes about a second, more
/// than redis-rs's default of 500 ms.
pub(crate) async fn connection(url: &str) -> BoxResult<MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_response_timeout(Some(std::time::Duration::from_secs(60)));
    // Without `CLIENT SETINFO`, which Redis before 7.2 counts in `INFO errorstats` (as the store does).
    let info = redis::IntoConnectionInfo::into_connection_info(url)?;
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    Ok(redis::Client::open(info.set_redis_settings(settings))?
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

impl Probe {
    pub(crate) async fn connect(url: &str) -> BoxResult<Self> {
        Ok(Probe {
            conn: connection(url).await?,
        })
    }

    async fn info(&mut self, section: &str) -> BoxResult<String> {
        Ok(redis::cmd("INFO")
            .arg(section)
            .query_async(&mut self.conn)
            .await?)
    }

    fn field<'a>(info: &'a str, name: &str) -> BoxResult<&'a str> {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
            .ok_or_else(|| format!("no {name} in INFO").into())
    }

    /// Checks that the Redis at `url` holds no key, or with `flush` deletes them all: a run deletes
    /// everything, so it never takes a Redis that holds someone's data unless told to.
    pub(crate) async fn empty(&mut self, url: &str, flush: bool) -> BoxResult<()> {
        let keyspace = self.info("keyspace").await?;
        let dbs: Vec<&str> = keyspace
            .lines()
            .filter(|l| l.starts_with("db"))
            .map(str::trim)
            .collect();
        if !dbs.is_empty() && !flush {
            return Err(format!(
                "the Redis at {url} holds keys ({}); postpone-bench deletes everything in the Redis it \
                 is given (FLUSHALL): give it one of its own (--redis redis://127.0.0.1:6400), or pass \
                 --flush to delete them",
                dbs.join(", ")
            )
            .into());
        }
        self.flushall().await
    }

    /// Deletes everything (the benchmark's Redis is its own: see [`empty`](Self::empty)).
    pub(crate) async fn flushall(&mut self) -> BoxResult<()> {
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut self.conn)
            .await?;
        Ok(())
    }

    /// `redis_version`.
    pub(crate) async fn version(&mut self) -> BoxResult<String> {
        let info = self.info("server").await?;
        Ok(Self::field(&info, "redis_version")?.to_owned())
    }

    /// Redis CPU so far, user + system, in seconds (main thread and its helpers).
    pub(crate) async fn cpu_s(&mut self) -> BoxResult<f64> {
        let info = self.info("cpu").await?;
        Ok(Self::field(&info, "used_cpu_user")?.parse::<f64>()?
            + Self::field(&info, "used_cpu_sys")?.parse::<f64>()?)
    }

    /// Microseconds per PING, `n` in a row, each awaited (the round trip a single enqueue cannot beat).
    pub(crate) async fn ping_us(&mut self, n: u32) -> BoxResult<f64> {
        let start = std::time::Instant::now();
        for _ in 0..n {
            redis::cmd("PING").query_async::<()>(&mut self.conn).await?;
        }
        Ok(start.elapsed().as_secs_f64() * 1e6 / f64::from(n))
    }

    /// The Redis clock (`TIME`), microseconds since the epoch.
    pub(crate) async fn time_us(&mut self) -> BoxResult<i64> {
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut self.conn).await?;
        Ok(secs * 1_000_000 + micros)
    }

    /// `used_memory`, bytes.
    pub(crate) async fn used_memory(&mut self) -> BoxResult<i64> {
        let info = self.info("memory").await?;
        Ok(Self::field(&info, "used_memory")?.parse()?)
    }

    /// `ZCARD key`.
    pub(crate) async fn zcard(&mut self, key: &str) -> BoxResult<u64> {
        Ok(redis::cmd("ZCARD")
            .arg(key)
            .query_async(&mut self.conn)
            .await?)
    }

    /// Clients subscribed to `channel` (`PUBSUB NUMSUB`).
    pub(crate) async fn subscribers(&mut self, channel: &str) -> BoxResult<u64> {
        let (_, n): (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut self.conn)
            .await?;
        Ok(n)
    }

    /// `INFO commandstats`, calls per command.
    pub(crate) async fn command_stats(&mut self) -> BoxResult<CommandStats> {
        let info = self.info("commandstats").await?;
        let (mut out, mut usec) = (BTreeMap::new(), BTreeMap::new());
        for line in info.lines() {
            let Some((name, rest)) = line
                .strip_prefix("cmdstat_")
                .and_then(|l| l.split_once(':'))
            else {
                continue;
            };
            let calls = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .ok_or("commandstats line without calls=")?;
            let us = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("usec="))
                .ok_or("commandstats line without usec=")?;
            out.insert(name.to_owned(), calls.parse()?);
            usec.insert(name.to_owned(), us.parse()?);
        }
        Ok(CommandStats(out, usec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(pairs: &[(&str, u64)]) -> CommandStats {
        let calls = pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
        CommandStats(calls, BTreeMap::new())
    }

    #[test]
    fn sent_commands_leave_out_script_internals_and_the_harness() {
        let before = stats(&[("evalsha", 10), ("info", 3), ("zrange", 40)]);
        let after = stats(&[("evalsha", 12), ("info", 9), ("zrange", 48), ("ping", 1)]);
        let (sent, inner, _) = after.since(&before);
        assert_eq!((sent, inner), (3, 8));
    }
}
