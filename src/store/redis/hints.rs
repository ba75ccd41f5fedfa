//! Wake-up hints over pub/sub.
//!
//! Scripts publish `"<due ms> <topic>"` on the namespace's channel when a job becomes due earlier than
//! its topic's earliest. A background task, started on the first [`Hints::subscribe`], owns a dedicated
//! pub/sub connection, forwards messages as [`Hint::Topic`], reconnects with backoff forever after an
//! error, and sends [`Hint::All`] after every (re)subscribe, since messages may have been missed while
//! it was away. It stops when the store is dropped.
//!
//! On a Redis Cluster a PUBLISH reaches the subscribers of every node, so one subscription on any node
//! hears every hint of the namespace. The listener subscribes on one seed node and, when that node fails,
//! moves to the next seed.

use std::sync::Mutex;
use std::time::Duration;

use futures_util::StreamExt;
use redis::Client;
use tokio::sync::{broadcast, watch};

use crate::store::Hint;

/// How many hints a slow receiver may fall behind before it sees `Lagged` (treat that as `Hint::All`).
const CAPACITY: usize = 1024;
/// How often the pub/sub connection is pinged, to notice a dead peer.
const PING_EVERY: Duration = Duration::from_secs(15);
/// Pauses between reconnects: short, so that hints are back within half a second of Redis answering
/// again (a refused connect costs next to nothing).
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_millis(500);

/// The hint channel of one store.
pub(super) struct Hints {
    tx: broadcast::Sender<Hint>,
    /// Where to subscribe, tried in turn (one on a single Redis, the seeds on a cluster).
    clients: Vec<Client>,
    channel: String,
    timeout: Duration,
    /// Dropping it stops the task; `None` until the task starts.
    stop: Mutex<Option<watch::Sender<()>>>,
}

impl Hints {
    pub(super) fn new(clients: Vec<Client>, channel: String, timeout: Duration) -> Self {
        let (tx, _) = broadcast::channel(CAPACITY);
        Hints {
            tx,
            clients,
            channel,
            timeout,
            stop: Mutex::new(None),
        }
    }

    /// A receiver of hints; starts the listener on the first call made inside a Tokio runtime.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Hint> {
        let rx = self.tx.subscribe();
        let mut stop = self.stop.lock().unwrap_or_else(|e| e.into_inner());
        if stop.is_none() {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    let (stop_tx, stop_rx) = watch::channel(());
                    let listener = Listener {
                        tx: self.tx.clone(),
                        clients: self.clients.clone(),
                        channel: self.channel.clone(),
                        timeout: self.timeout,
                    };
                    handle.spawn(listener.run(stop_rx));
                    *stop = Some(stop_tx);
                }
                Err(_) => tracing::warn!(
                    "postpone: hints() was called outside a Tokio runtime; wake-up hints will start on a \
                     later call made inside one"
                ),
            }
        }
        rx
    }
}

struct Listener {
    tx: broadcast::Sender<Hint>,
    clients: Vec<Client>,
    channel: String,
    timeout: Duration,
}

impl Listener {
    async fn run(self, mut stop: watch::Receiver<()>) {
        let mut backoff = BACKOFF_MIN;
        for turn in 0.. {
            let client = &self.clients[turn % self.clients.len()];
            let mut subscribed = false;
            let result = tokio::select! {
                _ = stop.changed() => return,
                r = self.session(client, &mut subscribed) => r,
            };
            if subscribed {
                backoff = BACKOFF_MIN;
            }
            tracing::debug!(error = %result.err().map_or_else(|| "closed".into(), |e| e.to_string()),
                channel = %self.channel, "postpone: hint subscription lost; reconnecting");
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// One connection's life: subscribe, announce `Hint::All`, forward messages until it fails.
    async fn session(
        &self,
        client: &Client,
        subscribed: &mut bool,
    ) -> Result<(), redis::RedisError> {
        let pubsub = tokio::time::timeout(self.timeout, client.get_async_pubsub())
            .await
            .map_err(|_| timed_out("connecting for hints"))??;
        let (mut sink, mut stream) = pubsub.split();
        tokio::time::timeout(self.timeout, sink.subscribe(&self.channel))
            .await
            .map_err(|_| timed_out("subscribing for hints"))??;
        *subscribed = true;
        let _ = self.tx.send(Hint::All);
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                msg = stream.next() => {
                    let Some(msg) = msg else { return Ok(()) };
                    match parse(msg.get_payload_bytes()) {
                        Some(hint) => { let _ = self.tx.send(hint); }
                        None => tracing::debug!(channel = %self.channel, "postpone: ignoring a malformed hint"),
                    }
                }
                _ = ping.tick() => {
                    tokio::time::timeout(self.timeout, sink.ping::<redis::Value>())
                        .await
                        .map_err(|_| timed_out("pinging the hint connection"))??;
                }
            }
        }
    }
}

fn timed_out(what: &'static str) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

/// `"<due ms> <topic>"` as a hint.
fn parse(payload: &[u8]) -> Option<Hint> {
    let text = std::str::from_utf8(payload).ok()?;
    let (due, topic) = text.split_once(' ')?;
    Some(Hint::Topic {
        topic: topic.to_owned(),
        due_at_ms: due.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_payloads() {
        assert_eq!(
            parse(b"1732240000123 orders.close"),
            Some(Hint::Topic {
                topic: "orders.close".into(),
                due_at_ms: 1_732_240_000_123
            })
        );
        assert_eq!(parse(b"nope"), None);
        assert_eq!(parse(b"x orders"), None);
    }
}
