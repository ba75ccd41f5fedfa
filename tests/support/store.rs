//! Helpers for tests of the Redis store.

use std::cell::RefCell;
use std::time::Duration;

use postpone::store::redis::RedisStore;
use postpone::store::{ClaimRequest, Due, Hint, NewJob};

use super::redis_server::RedisServer;
use super::wait::eventually_within;

pub const T: &str = "orders.close";

pub async fn store(server: &RedisServer, ns: &str) -> RedisStore {
    RedisStore::connect(&server.url(), ns)
        .await
        .expect("connect")
}

pub fn job(id: &str, due: Due) -> NewJob {
    NewJob::new(
        id.into(),
        super::batches::record(&format!("record of {id}")),
        due,
        false,
    )
}

pub fn claim(max: usize) -> ClaimRequest {
    ClaimRequest::new(max, 30_000, 100, 3)
}

/// Retries `op` until it succeeds (the store recovers by itself), for at most 20 s. Every error on the
/// way must be transient; each new one is printed, so a timeout shows what kept failing.
pub async fn until_ok<T, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = postpone::Result<T>>,
{
    let last = RefCell::new(String::new());
    eventually_within(Duration::from_secs(20), what, || {
        let attempt = op();
        let last = &last;
        async move {
            match attempt.await {
                Ok(v) => Some(v),
                Err(e) => {
                    assert!(e.is_transient(), "{what}: not a transient error: {e}");
                    let e = e.to_string();
                    if *last.borrow() != e {
                        eprintln!("{what}: transient error, retrying: {e}");
                        *last.borrow_mut() = e;
                    }
                    None
                }
            }
        }
    })
    .await
}

pub async fn next(rx: &mut tokio::sync::broadcast::Receiver<Hint>) -> Hint {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("a hint within 20 s")
        .unwrap()
}

/// A tracing writer that keeps what was logged.
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Calls per command in INFO commandstats (scripts' inner calls included), but the test's own (INFO,
/// CONFIG).
pub fn calls_by_command(server: &RedisServer) -> std::collections::BTreeMap<String, u64> {
    let info: String =
        redis::FromRedisValue::from_redis_value(server.cli(&["INFO", "commandstats"]).unwrap())
            .unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            (name != "info" && !name.starts_with("config")).then(|| (name.to_owned(), calls))
        })
        .collect()
}

/// Every call in INFO commandstats (scripts' inner calls included), but the test's own.
pub fn commands(server: &RedisServer) -> u64 {
    calls_by_command(server).values().sum()
}
