//! Live figures by server-sent events: every topic's counts and the number of live workers. One poller
//! per dashboard reads them once a second while anyone is watching, and every open page gets them
//! through a `watch` channel when they change: ten open tabs cost what one does. A page that opens
//! gets the last figures at once and has them read again at once (they may be nearly a second old:
//! a job's page opened just after a worker started showed "Workers 0" beside a job leased to it). The
//! script puts them into the elements marked `data-live`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use postpone::ops::Ops;
use serde::Serialize;
use tokio::sync::{watch, Notify};

/// How often the figures are read.
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Serialize, PartialEq)]
struct Figures {
    workers: usize,
    topics: BTreeMap<String, TopicFigures>,
}

#[derive(Debug, Serialize, PartialEq)]
struct TopicFigures {
    scheduled: u64,
    ready: u64,
    active: u64,
    waiting: u64,
    dead: u64,
    done: u64,
    processed: u64,
    failed: u64,
    paused: bool,
}

/// What the pages are sent: an event's name and its data.
type Message = Option<(&'static str, Arc<str>)>;

/// The dashboard's one poller and its channel.
#[derive(Debug)]
pub(crate) struct Live {
    tx: watch::Sender<Message>,
    polling: AtomicBool,
    /// Wakes the poller for a read now (a page just opened).
    read_now: Notify,
}

impl Live {
    pub(crate) fn new() -> Self {
        Live {
            tx: watch::channel(None).0,
            polling: AtomicBool::new(false),
            read_now: Notify::new(),
        }
    }
}

async fn read(ops: &Ops) -> postpone::Result<Figures> {
    let (topics, workers) = tokio::join!(ops.topics(), ops.workers());
    Ok(Figures {
        workers: workers?.len(),
        topics: topics?
            .into_iter()
            .map(|t| {
                let c = t.counts;
                let f = TopicFigures {
                    scheduled: c.scheduled,
                    ready: c.ready,
                    active: c.active,
                    waiting: c.waiting,
                    dead: c.dead,
                    done: c.done,
                    processed: c.processed,
                    failed: c.failed,
                    paused: c.paused,
                };
                (t.name, f)
            })
            .collect(),
    })
}

/// Reads the figures every [`EVERY`] while anyone watches, and publishes them when they change.
async fn poll(shared: crate::State) {
    let live = &shared.live;
    loop {
        if live.tx.receiver_count() == 0 {
            live.polling.store(false, Ordering::SeqCst);
            // Someone may have subscribed since the count, seeing the poller still running.
            if live.tx.receiver_count() == 0 || live.polling.swap(true, Ordering::SeqCst) {
                return;
            }
        }
        let message: (&'static str, Arc<str>) = match read(&shared.ops).await {
            Ok(figures) => (
                "figures",
                serde_json::to_string(&figures).unwrap_or_default().into(),
            ),
            Err(e) => ("error", e.report().to_string().into()),
        };
        live.tx.send_if_modified(|current| {
            let changed = current.as_ref() != Some(&message);
            if changed {
                *current = Some(message);
            }
            changed
        });
        // Until the next read: a second, or a page that opens.
        let _ = tokio::time::timeout(EVERY, live.read_now.notified()).await;
    }
}

/// `events`: a `figures` event at once (when known) and whenever they change; an `error` event when the
/// store cannot be read (the stream goes on).
pub(crate) async fn events(
    State(shared): State<crate::State>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut rx = shared.live.tx.subscribe();
    rx.mark_changed(); // the last figures, if there are any yet
    if shared.live.polling.swap(true, Ordering::SeqCst) {
        // And fresh ones: the poller reads at once (a permit is kept if it is reading now).
        shared.live.read_now.notify_one();
    } else {
        tokio::spawn(poll(shared.clone()));
    }
    let stream = stream::unfold(rx, |mut rx| async move {
        loop {
            rx.changed().await.ok()?;
            let message = rx.borrow_and_update().clone();
            if let Some((name, data)) = message {
                return Some((Ok(Event::default().event(name).data(&*data)), rx));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
