//! The shared connection to one Redis: one multiplexed connection carries every command, pipelined, so
//! no caller ever waits for a free connection however many call at once.
//!
//! Reconnecting:
//! - a command that fails at the transport level (dropped, reset, timed out) retires the connection it
//!   ran on, and the next call opens a new one;
//! - one connect runs at a time: every call that arrives meanwhile waits for that connect and gets its
//!   outcome, so a failed connect fails them all at once (nobody waits out a timeout for a connect that
//!   already failed), and the next call tries again at once (no backoff, no pool to time out on);
//! - a watchdog holds one more, idle connection and notices at once when its socket closes (Redis was
//!   restarted, killed or dropped its clients): it retires the shared connection then, so that the first
//!   call after Redis is back opens a new connection instead of failing on the dead one.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};
use tokio::sync::{oneshot, Notify};

/// The first and the longest pause between two watchdog connects while Redis is away. The shared
/// connection does not wait for the watchdog: a call always connects at once.
const WATCH_BACKOFF_MIN: Duration = Duration::from_millis(50);
const WATCH_BACKOFF_MAX: Duration = Duration::from_millis(500);

/// A connect's outcome, shared by every caller that waited for it.
type Connected = Result<(MultiplexedConnection, u64), ConnectError>;

/// The shared connection of one store.
pub(super) struct Mux {
    inner: Arc<Inner>,
    /// Dropping it stops the watchdog.
    _stop: Option<oneshot::Sender<()>>,
}

struct Inner {
    client: Client,
    config: AsyncConnectionConfig,
    /// `host:port`, for errors.
    addr: String,
    slot: Mutex<Slot>,
    /// Wakes the watchdog when a connect succeeds (Redis is back).
    connected: Arc<Notify>,
}

enum Slot {
    /// A live connection, and its number.
    Ready(MultiplexedConnection, u64),
    /// A connect under way (every caller awaits the same one).
    Connecting(u64, Shared<BoxFuture<'static, Connected>>),
    /// None: the next call connects. Holds the next connection's number.
    Closed(u64),
}

impl Mux {
    /// Starts with `first`, an open connection; spawns the watchdog on the current Tokio runtime.
    pub(super) fn new(
        client: Client,
        config: AsyncConnectionConfig,
        connect_timeout: Duration,
        addr: String,
        first: MultiplexedConnection,
    ) -> Self {
        let inner = Arc::new(Inner {
            client: client.clone(),
            config,
            addr,
            slot: Mutex::new(Slot::Ready(first, 0)),
            connected: Arc::new(Notify::new()),
        });
        let stop = tokio::runtime::Handle::try_current().ok().map(|rt| {
            let (stop, stopped) = oneshot::channel();
            let watchdog = Watchdog {
                mux: Arc::downgrade(&inner),
                client,
                connect_timeout,
                connected: inner.connected.clone(),
            };
            rt.spawn(watchdog.run(stopped));
            stop
        });
        Mux { inner, _stop: stop }
    }

    /// The live connection and its number, connecting first when there is none (or joining the
    /// connect under way).
    pub(super) async fn get(&self) -> Connected {
        let connect = {
            let mut slot = self.inner.lock();
            match &*slot {
                Slot::Ready(conn, n) => return Ok((conn.clone(), *n)),
                Slot::Connecting(_, connect) => connect.clone(),
                Slot::Closed(n) => {
                    let n = *n;
                    let connect = Inner::connect(&self.inner, n);
                    *slot = Slot::Connecting(n, connect.clone());
                    connect
                }
            }
        };
        connect.await
    }

    /// Records that a command failed on connection `n`: a transport failure retires it.
    pub(super) fn failed(&self, n: u64, e: &RedisError) {
        if e.is_io_error() || e.is_unrecoverable_error() {
            tracing::debug!(addr = %self.inner.addr, error = %e, "postpone: Redis connection failed; the next call reconnects");
            self.inner.retire(Some(n));
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Retires connection `n` (any live connection when `None`).
    fn retire(&self, n: Option<u64>) {
        let mut slot = self.lock();
        if let Slot::Ready(_, live) = &*slot {
            if n.is_none_or(|n| n == *live) {
                *slot = Slot::Closed(live + 1);
            }
        }
    }

    /// Connect number `n`: when it ends, it fills the slot (if the slot still waits for it).
    fn connect(this: &Arc<Self>, n: u64) -> Shared<BoxFuture<'static, Connected>> {
        let client = this.client.clone();
        let config = this.config.clone();
        let addr = this.addr.clone();
        let mux = Arc::downgrade(this);
        async move {
            let result = client
                .get_multiplexed_async_connection_with_config(&config)
                .await;
            let Some(mux) = mux.upgrade() else {
                return Err(ConnectError::new(addr, Arc::new(closed())));
            };
            let mut slot = mux.lock();
            let ours = matches!(&*slot, Slot::Connecting(m, _) if *m == n);
            match result {
                Ok(conn) => {
                    if ours {
                        *slot = Slot::Ready(conn.clone(), n);
                    }
                    drop(slot);
                    mux.connected.notify_one();
                    Ok((conn, n))
                }
                Err(e) => {
                    if ours {
                        *slot = Slot::Closed(n + 1);
                    }
                    tracing::debug!(%addr, error = %e, "postpone: connecting to Redis failed");
                    Err(ConnectError::new(addr, Arc::new(e)))
                }
            }
        }
        .boxed()
        .shared()
    }
}

fn closed() -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "the store was dropped",
    ))
}

/// Holds an idle connection to notice when Redis goes away.
struct Watchdog {
    mux: Weak<Inner>,
    client: Client,
    connect_timeout: Duration,
    connected: Arc<Notify>,
}

impl Watchdog {
    async fn run(self, mut stop: oneshot::Receiver<()>) {
        let mut backoff = WATCH_BACKOFF_MIN;
        loop {
            let connect =
                tokio::time::timeout(self.connect_timeout, self.client.get_async_pubsub());
            let pubsub = tokio::select! {
                _ = &mut stop => return,
                r = connect => r,
            };
            if let Ok(Ok(pubsub)) = pubsub {
                backoff = WATCH_BACKOFF_MIN;
                // Subscribed to nothing: no message ever comes, and the stream ends when the
                // connection closes. The sink is kept: dropping it would close the connection.
                let (_sink, mut stream) = pubsub.split();
                tokio::select! {
                    _ = &mut stop => return,
                    _ = stream.next() => {}
                }
                let Some(mux) = self.mux.upgrade() else {
                    return;
                };
                tracing::debug!(addr = %mux.addr, "postpone: a Redis connection closed; retiring the shared connection");
                mux.retire(None);
            }
            if self.mux.strong_count() == 0 {
                return;
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(backoff) => {}
                _ = self.connected.notified() => {}
            }
            backoff = (backoff * 2).min(WATCH_BACKOFF_MAX);
        }
    }
}

/// A failed connect, as every caller that waited for it sees it.
#[derive(Clone)]
pub(super) struct ConnectError {
    addr: String,
    source: Arc<RedisError>,
}

impl ConnectError {
    fn new(addr: String, source: Arc<RedisError>) -> Self {
        ConnectError { addr, source }
    }
}

impl fmt::Debug for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectError")
            .field("addr", &self.addr)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not connect to Redis at {}", self.addr)
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.source.as_ref())
    }
}
