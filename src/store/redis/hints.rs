//! Wake-up hints and waiters' announcements over pub/sub.
//!
//! Scripts publish `"<due ms> <topic>"` on the namespace's wake channel when a job becomes due earlier
//! than its topic's earliest, and how a waited job ended on its `ended` channel (see outcomes.lua). For
//! each channel a background task, started on the first [`Channel::subscribe`], owns a dedicated pub/sub
//! connection, forwards messages (a [`Hint::Topic`], an [`Announcement`]), reconnects with backoff
//! forever after an error, and sends its resync message ([`Hint::All`], [`Announcement::Resync`]) after
//! every (re)subscribe, since messages may have been missed while it was away. It stops when the store
//! is dropped. A store has at most one connection per channel, whoever listens.
//!
//! On a Redis Cluster a PUBLISH reaches the subscribers of every node, so one subscription on any node
//! hears every hint of the namespace. The listener subscribes on one seed node and, when that node fails,
//! moves to the next seed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::Client;
use tokio::sync::{broadcast, watch};

use crate::store::{parse_announcement, Announcement, Hint};

/// A message of a channel: how to read one, and what to send after every (re)subscribe.
pub(super) trait Message: Clone + Send + Sync + std::fmt::Debug + 'static {
    /// Sent after every (re)subscribe: messages may have been missed.
    const RESYNC: Self;
    /// What the channel is for, in logs.
    const WHAT: &'static str;
    /// How many messages a slow receiver may fall behind before it sees `Lagged` (and acts as on the
    /// resync message).
    const CAPACITY: usize;
    /// A payload as a message; `None` when malformed.
    fn parse(payload: &[u8]) -> Option<Self>;
}

impl Message for Hint {
    const RESYNC: Self = Hint::All;
    const WHAT: &'static str = "hints";
    const CAPACITY: usize = 1024;
    fn parse(payload: &[u8]) -> Option<Self> {
        parse(payload)
    }
}

impl Message for Announcement {
    const RESYNC: Self = Announcement::Resync;
    const WHAT: &'static str = "announcements";
    /// A burst of ends (a thousand jobs waited for, finishing at once) must not make every waiter look
    /// its job up again.
    const CAPACITY: usize = 16 * 1024;
    fn parse(payload: &[u8]) -> Option<Self> {
        parse_announcement(payload)
    }
}

/// How often the pub/sub connection is pinged, to notice a dead peer.
const PING_EVERY: Duration = Duration::from_secs(15);
/// Pauses between reconnects: short, so that hints are back within half a second of Redis answering
/// again (a refused connect costs next to nothing).
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_millis(500);

/// One channel of one store.
pub(super) struct Channel<M: Message> {
    tx: broadcast::Sender<M>,
    /// Where to subscribe, tried in turn (one on a single Redis, the seeds on a cluster).
    clients: Vec<Client>,
    channel: String,
    timeout: Duration,
    /// Dropping it stops the task; `None` until the task starts.
    stop: Mutex<Option<watch::Sender<()>>>,
    /// Whether the task is subscribed now (set before it sends its resync message).
    listening: Arc<AtomicBool>,
}

impl<M: Message> Channel<M> {
    pub(super) fn new(clients: Vec<Client>, channel: String, timeout: Duration) -> Self {
        let (tx, _) = broadcast::channel(M::CAPACITY);
        Channel {
            tx,
            clients,
            channel,
            timeout,
            stop: Mutex::new(None),
            listening: Arc::default(),
        }
    }

    /// A receiver of the channel's messages; starts the listener on the first call made inside a Tokio
    /// runtime. A receiver made while the listener is subscribed gets the resync message at once (so
    /// every receiver hears that the channel listens).
    pub(super) fn subscribe(&self) -> broadcast::Receiver<M> {
        let rx = self.tx.subscribe();
        let mut stop = self.stop.lock().unwrap_or_else(|e| e.into_inner());
        if self.listening.load(Ordering::Acquire) {
            let _ = self.tx.send(M::RESYNC);
        }
        if stop.is_none() {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    let (stop_tx, stop_rx) = watch::channel(());
                    let listener = Listener {
                        listening: self.listening.clone(),
                        tx: self.tx.clone(),
                        clients: self.clients.clone(),
                        channel: self.channel.clone(),
                        timeout: self.timeout,
                    };
                    handle.spawn(listener.run(stop_rx));
                    *stop = Some(stop_tx);
                }
                Err(_) => tracing::warn!(
                    what = M::WHAT,
                    "postpone: a pub/sub channel was first listened to outside a Tokio runtime; it \
                     will start on a later call made inside one"
                ),
            }
        }
        rx
    }
}

struct Listener<M: Message> {
    listening: Arc<AtomicBool>,
    tx: broadcast::Sender<M>,
    clients: Vec<Client>,
    channel: String,
    timeout: Duration,
}

impl<M: Message> Listener<M> {
    async fn run(self, mut stop: watch::Receiver<()>) {
        let mut backoff = BACKOFF_MIN;
        for turn in 0.. {
            let client = &self.clients[turn % self.clients.len()];
            let mut subscribed = false;
            let result = tokio::select! {
                _ = stop.changed() => return,
                r = self.session(client, &mut subscribed) => r,
            };
            self.listening.store(false, Ordering::Release);
            if subscribed {
                backoff = BACKOFF_MIN;
            }
            tracing::debug!(error = %result.err().map_or_else(|| "closed".into(), |e| e.to_string()),
                channel = %self.channel, what = M::WHAT, "postpone: subscription lost; reconnecting");
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// One connection's life: subscribe, send the resync message, forward messages until it fails.
    async fn session(
        &self,
        client: &Client,
        subscribed: &mut bool,
    ) -> Result<(), redis::RedisError> {
        let pubsub = tokio::time::timeout(self.timeout, client.get_async_pubsub())
            .await
            .map_err(|_| timed_out("connecting for pub/sub"))??;
        let (mut sink, mut stream) = pubsub.split();
        tokio::time::timeout(self.timeout, sink.subscribe(&self.channel))
            .await
            .map_err(|_| timed_out("subscribing"))??;
        *subscribed = true;
        self.listening.store(true, Ordering::Release);
        let _ = self.tx.send(M::RESYNC);
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                msg = stream.next() => {
                    let Some(msg) = msg else { return Ok(()) };
                    match M::parse(msg.get_payload_bytes()) {
                        Some(m) => { let _ = self.tx.send(m); }
                        None => tracing::debug!(channel = %self.channel, what = M::WHAT, "postpone: ignoring a malformed message"),
                    }
                }
                _ = ping.tick() => {
                    tokio::time::timeout(self.timeout, sink.ping::<redis::Value>())
                        .await
                        .map_err(|_| timed_out("pinging the pub/sub connection"))??;
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
