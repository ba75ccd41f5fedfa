//! Running scripts and commands on either kind of connection: the shared connection to one Redis, or
//! the cluster connection, which routes each command to the node serving its first key's slot.

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
}

impl RedisStore {
    /// Runs `script` on the keys of one topic (one hash tag, so one slot and one node) with the arguments
    /// `args` writes. EVALSHA first; on NOSCRIPT (a restarted or failed-over node, a SCRIPT FLUSH) the
    /// same call as EVAL, which also caches the script on that node. `args` may be called twice.
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
    pub(super) async fn eval_with(
        &self,
        context: &'static str,
        script: &Script,
        keys: &[String],
        args: impl Fn(&mut Cmd),
    ) -> Result<Value> {
        // Room for a single job's arguments up front (batches grow it a few times, not once per argument).
        let key_bytes: usize = keys.iter().map(String::len).sum();
        let call = |by_source: bool| {
            let mut cmd = Cmd::with_capacity(keys.len() + 16, key_bytes + 512);
            if by_source {
                cmd.arg("EVAL").arg(&script.source);
            } else {
                cmd.arg("EVALSHA").arg(&script.sha1);
            }
            cmd.arg(keys.len()).arg(keys);
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
        match self.inner.conns.send(context, &call(false)).await? {
            Ok(v) => Ok(v),
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                tracing::debug!(
                    context,
                    "postpone: script not cached on the node; sending it"
                );
                self.inner
                    .conns
                    .send(context, &call(true))
                    .await?
                    .map_err(failed)
            }
            Err(e) => Err(failed(e)),
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
