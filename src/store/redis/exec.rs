//! Running scripts and commands on either kind of connection: the shared connection to one Redis, or
//! the cluster connection, which routes each command to the node serving its first key's slot.

use std::sync::atomic::Ordering;

use redis::{Cmd, ErrorKind, RedisError, ServerErrorKind, Value};

use super::cluster::ClusterConnection;
use super::conn::Pool;
use super::keys::TopicKeys;
use super::scripts::Script;
use super::RedisStore;
use crate::error::{Error, Result};

/// Where commands go.
pub(super) enum Conns {
    /// One Redis: one shared multiplexed connection for every command (and a pool of dedicated
    /// connections for what must not share it).
    Single(Pool),
    /// A Redis Cluster: one cluster connection (multiplexed, one connection per node, following MOVED
    /// and ASK), cloned per command.
    Cluster(ClusterConnection),
}

impl Conns {
    /// Sends `cmd`; the outer error is a failure to get a connection, the inner one the command's.
    async fn send(
        &self,
        context: &'static str,
        cmd: &Cmd,
    ) -> Result<std::result::Result<Value, RedisError>> {
        match self {
            Conns::Single(pool) => {
                let (mut conn, n) = pool.shared(context).await?;
                let result = cmd.query_async::<Value>(&mut conn).await;
                if let Err(e) = &result {
                    pool.failed_shared(n, e);
                }
                Ok(result)
            }
            #[cfg(feature = "cluster")]
            Conns::Cluster(conn) => Ok(cmd.query_async::<Value>(&mut conn.clone()).await),
            #[cfg(not(feature = "cluster"))]
            Conns::Cluster(conn) => match *conn {},
        }
    }

    /// Sends `cmd` to the master of `key`'s slot (on one Redis, the shared connection); the errors as
    /// [`send`](Self::send)'s.
    async fn send_to_node_of(
        &self,
        context: &'static str,
        cmd: &Cmd,
        key: Option<&str>,
    ) -> Result<std::result::Result<Value, RedisError>> {
        match self {
            Conns::Single(_) => self.send(context, cmd).await,
            Conns::Cluster(conn) => Ok(super::cluster::send_to_node_of(conn, cmd, key).await),
        }
    }
}

impl RedisStore {
    /// Runs `script` on the keys of one topic (one hash tag, so one slot and one node) with the arguments
    /// `args` writes: see [`eval_with`](Self::eval_with). `args` may be called more than once.
    pub(super) async fn eval(
        &self,
        context: &'static str,
        script: &Script,
        keys: &TopicKeys,
        args: impl Fn(&mut Cmd),
    ) -> Result<Value> {
        self.eval_with(context, script, &keys.0, args).await
    }

    /// [`eval`](Self::eval) with only the first keys of a topic, for a script that touches only those.
    ///
    /// FCALL of the script's function library first (its prelude made once, when Redis loaded it; see
    /// scripts.rs); when the node has not loaded it (a new, restarted or failed-over node without it),
    /// FUNCTION LOAD on that node and the FCALL again. A Redis without functions
    /// (before 7.0, or FCALL renamed away or denied by its ACL) gets EVALSHA from then on; a load that
    /// fails (a full Redis refuses FUNCTION LOAD) runs that call with EVALSHA.
    pub(super) async fn eval_with(
        &self,
        context: &'static str,
        script: &Script,
        keys: &[String],
        args: impl Fn(&mut Cmd),
    ) -> Result<Value> {
        // Room for a single job's arguments up front (batches grow it a few times, not once per argument).
        let key_bytes: usize = keys.iter().map(String::len).sum();
        let call = |verb: &str, name: &str| {
            let mut cmd = Cmd::with_capacity(keys.len() + 16, key_bytes + 512);
            cmd.arg(verb).arg(name).arg(keys.len()).arg(keys);
            args(&mut cmd);
            cmd
        };
        // On a cluster, a call for a master known to be down fails at once.
        let health = self.inner.health.as_ref().zip(keys.first());
        if let Some((health, key)) = health {
            health.check(context, key)?;
        }
        let failed = |e: RedisError| {
            if let Some((health, key)) = health {
                health.failed(key, &e);
            }
            Error::backend(context, e)
        };
        if self.inner.functions.load(Ordering::Relaxed) {
            let fcall = call("FCALL", &script.function);
            match self.inner.conns.send(context, &fcall).await? {
                Ok(v) => return Ok(v),
                Err(e) if no_functions(&e) => self.without_functions(&e),
                Err(e) if function_missing(&e) => {
                    let mut load = redis::cmd("FUNCTION");
                    load.arg("LOAD").arg("REPLACE").arg(&script.library);
                    let key = keys.first().map(String::as_str);
                    match self
                        .inner
                        .conns
                        .send_to_node_of(context, &load, key)
                        .await?
                    {
                        Ok(_) => match self.inner.conns.send(context, &fcall).await? {
                            Ok(v) => return Ok(v),
                            // Deleted again before the call (FUNCTION FLUSH): by script this once.
                            Err(e) if function_missing(&e) => {}
                            Err(e) => return Err(failed(e)),
                        },
                        Err(e) if no_functions(&e) => self.without_functions(&e),
                        Err(e) => tracing::debug!(
                            context,
                            error = %e,
                            "postpone: the node did not load the function library; this call by script"
                        ),
                    }
                }
                Err(e) => return Err(failed(e)),
            }
        }
        match self
            .inner
            .conns
            .send(context, &call("EVALSHA", &script.sha1))
            .await?
        {
            Ok(v) => Ok(v),
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                tracing::debug!(
                    context,
                    "postpone: script not cached on the node; sending it"
                );
                self.inner
                    .conns
                    .send(context, &call("EVAL", &script.source))
                    .await?
                    .map_err(failed)
            }
            Err(e) => Err(failed(e)),
        }
    }

    /// Runs scripts with EVALSHA from now on: Redis answered `e` to FCALL or FUNCTION LOAD.
    fn without_functions(&self, e: &RedisError) {
        if self.inner.functions.swap(false, Ordering::Relaxed) {
            tracing::info!(
                error = %e,
                "postpone: this Redis runs no functions (before 7.0, or FCALL renamed or denied); \
                 running scripts with EVALSHA"
            );
        }
    }

    /// Runs one plain command (routed by its key on a cluster; TIME goes to any node).
    pub(super) async fn command<T: redis::FromRedisValue>(
        &self,
        context: &'static str,
        cmd: &Cmd,
    ) -> Result<T> {
        let value = self
            .inner
            .conns
            .send(context, cmd)
            .await?
            .map_err(|e| Error::backend(context, e))?;
        T::from_redis_value(value).map_err(|e| Error::backend(context, e))
    }
}

/// Whether `e` says the node has no such function (not loaded there yet, or deleted).
fn function_missing(e: &RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ResponseError)
        && e.detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// Whether `e` says the server runs no functions for us: FCALL or FUNCTION (any of its subcommands) is
/// an unknown command (Redis before 7.0, or renamed away) or one the user's ACL denies. Only a refusal
/// that names the command itself: an error from inside a function that ran (which may have written
/// before it) is the call's error, never a reason to run the call again by script.
pub(super) fn no_functions(e: &RedisError) -> bool {
    let names_it = |d: &str| {
        let d = d.to_ascii_lowercase();
        d.contains("'fcall'") || d.contains("'function'") || d.contains("'function|")
    };
    match e.kind() {
        ErrorKind::Server(ServerErrorKind::NoPerm) => e.detail().is_some_and(names_it),
        ErrorKind::Server(ServerErrorKind::ResponseError) => e.detail().is_some_and(|d| {
            (d.starts_with("unknown command") || d.starts_with("unknown subcommand")) && names_it(d)
        }),
        _ => false,
    }
}
