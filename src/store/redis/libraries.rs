//! postpone's function libraries on the servers ([`Ops::script_libraries`](crate::ops::Ops::script_libraries)
//! and its prune): each script is a library `postpone_<SHA-1>` (scripts.rs), loaded by a server at its
//! first call there, so libraries of builds no longer deployed stay until deleted.

use std::collections::HashSet;

use redis::aio::ConnectionLike;
use redis::{RedisError, Value};

use super::conn;
use super::exec::{no_functions, Conns};
use super::scripts::SCRIPTS;
use super::RedisStore;
use crate::error::{Error, Result};
use crate::store::ScriptLibraries;

/// What every library of postpone's is named with.
const PREFIX: &str = "postpone_";

impl RedisStore {
    /// [`OpsStore::script_libraries`](crate::store::OpsStore::script_libraries): each server's
    /// libraries, those of other builds deleted first when `prune`.
    pub(super) async fn libraries(&self, prune: bool) -> Result<ScriptLibraries> {
        const CONTEXT: &str = "reading the function libraries (FUNCTION LIST, INFO memory)";
        let mut all = ScriptLibraries::default();
        match &self.inner.conns {
            Conns::Single(pool) => {
                let mut conn = pool.get(CONTEXT).await?;
                let found = node_libraries(&mut conn.inner, prune)
                    .await
                    .map_err(|e| Error::backend(CONTEXT, e))?;
                add(&mut all, found);
            }
            #[cfg(feature = "cluster")]
            Conns::Cluster(conn) => {
                for mut node in super::cluster::master_conns(conn)
                    .await
                    .map_err(|e| Error::backend(CONTEXT, e))?
                {
                    let found = node_libraries(&mut node, prune)
                        .await
                        .map_err(|e| Error::backend(CONTEXT, e))?;
                    add(&mut all, found);
                }
            }
            #[cfg(not(feature = "cluster"))]
            Conns::Cluster(conn) => match *conn {},
        }
        Ok(all)
    }
}

fn add(all: &mut ScriptLibraries, node: ScriptLibraries) {
    all.servers += 1;
    all.current += node.current;
    all.others += node.others;
    all.deleted += node.deleted;
    all.without_functions += node.without_functions;
    all.memory_bytes += node.memory_bytes;
}

/// The function names of this build's scripts.
fn this_build() -> HashSet<&'static str> {
    SCRIPTS
        .all()
        .into_iter()
        .map(|(_, script)| script.function.as_str())
        .collect()
}

/// One server's libraries (its counts as a [`ScriptLibraries`] of one server, `servers` left 0);
/// other builds' deleted first when `prune`.
pub(super) async fn node_libraries(
    conn: &mut (impl ConnectionLike + Send),
    prune: bool,
) -> Result<ScriptLibraries, RedisError> {
    let mut found = ScriptLibraries::default();
    let listed: Value = match redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg(format!("{PREFIX}*"))
        .query_async(conn)
        .await
    {
        Ok(v) => v,
        Err(e) if no_functions(&e) => {
            found.without_functions = 1;
            return Ok(found);
        }
        Err(e) => return Err(e),
    };
    let ours = this_build();
    // LIBRARYNAME is a glob pattern (a `[` or `?` could not be in these names).
    let mut others = Vec::new();
    for name in library_names(listed) {
        if ours.contains(name.as_str()) {
            found.current += 1;
        } else if name.starts_with(PREFIX) {
            others.push(name);
        }
    }
    found.others = others.len();
    if prune {
        for name in &others {
            let deleted: Result<(), RedisError> = redis::cmd("FUNCTION")
                .arg("DELETE")
                .arg(name)
                .query_async(conn)
                .await;
            match deleted {
                Ok(()) => found.deleted += 1,
                // Deleted meanwhile (another prune): gone all the same.
                Err(e) if e.detail().is_some_and(|d| d.contains("not exist")) => {}
                Err(e) => return Err(e),
            }
        }
        found.others -= found.deleted;
    }
    let info: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    for field in ["used_memory_vm_functions", "used_memory_functions"] {
        found.memory_bytes += conn::info_field(&info, field)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(found)
}

/// The `library_name` of each library in a FUNCTION LIST reply (RESP2 arrays of pairs, or RESP3
/// maps).
fn library_names(listed: Value) -> Vec<String> {
    let Value::Array(libraries) = listed else {
        return Vec::new();
    };
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    libraries
        .into_iter()
        .filter_map(|library| {
            let pairs: Vec<(Value, Value)> = match library {
                Value::Map(pairs) => pairs,
                Value::Array(flat) => {
                    let mut it = flat.into_iter();
                    std::iter::from_fn(|| Some((it.next()?, it.next()?))).collect()
                }
                _ => return None,
            };
            pairs
                .iter()
                .find(|(k, _)| text(k).as_deref() == Some("library_name"))
                .and_then(|(_, v)| text(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn library_names_are_read_from_resp2_and_resp3_replies() {
        let resp2 = Value::Array(vec![Value::Array(vec![
            bulk("library_name"),
            bulk("postpone_abc"),
            bulk("engine"),
            bulk("LUA"),
        ])]);
        let resp3 = Value::Array(vec![Value::Map(vec![
            (bulk("engine"), bulk("LUA")),
            (bulk("library_name"), bulk("mine")),
        ])]);
        assert_eq!(library_names(resp2), ["postpone_abc"]);
        assert_eq!(library_names(resp3), ["mine"]);
        assert!(library_names(Value::Nil).is_empty());
    }

    #[test]
    fn this_build_names_every_script_once() {
        assert_eq!(this_build().len(), SCRIPTS.all().len());
        assert!(this_build().iter().all(|n| n.starts_with(PREFIX)));
    }
}
