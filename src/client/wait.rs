//! Waiting for a job's outcome: [`Client::wait`] and [`Client::waiter`].
//!
//! One hub per client (shared by its clones) listens to the store's announcements, through one
//! subscription whatever the number of waiters, and routes each to the waiters of its job. A waiter
//! registers with the hub first, then looks its job up in the store, which registers it there in the same
//! atomic step ([`JobStore::outcome`](crate::store::JobStore::outcome)): a job that ends after the lookup
//! is announced to a waiter already listening, and one that ended before is found by the lookup (when
//! its type keeps finished jobs, or it died). When announcements may have been lost (the store's
//! subscription was re-established, say after a Redis restart), every waiter looks its job up again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;

use super::Client;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::partition::{partition_of, store_topic};
use crate::store::{Announcement, Ended, Lookup, Progress, Store, Watch};
use crate::time::millis;
use crate::validate::validate_id;

/// How a job ended, or where it is, as a waiter learns it ([`Client::wait`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum JobOutcome<T> {
    /// Its handler succeeded and returned this (`()` for a job type without an
    /// [`Output`](Job::Output)).
    Succeeded(T),
    /// It died (its retries ran out, or it failed for good): in the dead letters.
    Dead {
        /// Why.
        reason: String,
    },
    /// It was cancelled.
    Cancelled,
    /// Still scheduled or running when the wait ended, with the progress its handler last reported.
    Pending {
        /// Its progress, if reported.
        progress: Option<Progress>,
    },
    /// No such job: never enqueued, or finished (succeeded or cancelled) and not kept (see
    /// [`Job::keep`]).
    Unknown,
}

impl<T> JobOutcome<T> {
    /// Whether the job ended (succeeded, died or was cancelled).
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            JobOutcome::Succeeded(_) | JobOutcome::Dead { .. } | JobOutcome::Cancelled
        )
    }
}

/// What a waiter hears from the hub.
#[derive(Debug)]
enum Heard {
    Ended(Ended),
    Progress(Progress),
}

/// The waiters of one client.
#[derive(Debug, Default)]
pub(crate) struct Waiters {
    hub: Mutex<Option<Arc<Hub>>>,
}

/// Waiters by (store topic, id): each with its number and its channel.
type Waiting = HashMap<(String, String), Vec<(u64, mpsc::UnboundedSender<Heard>)>>;

#[derive(Debug)]
struct Hub {
    /// Waiters by (store topic, id), each with its number.
    waiting: Mutex<Waiting>,
    next: AtomicU64,
    /// Bumped at every resync: waiters then look their job up again. 0 until the hub listens.
    resyncs: watch::Sender<u64>,
}

impl Waiters {
    /// The client's hub, started on first use (inside a Tokio runtime).
    fn hub(&self, store: &Arc<dyn Store>) -> Result<Arc<Hub>> {
        let mut hub = self.hub.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hub) = hub.as_ref() {
            return Ok(hub.clone());
        }
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::InvalidConfig {
            reason: "waiting for a job needs a Tokio runtime: call `wait` or `waiter` inside one"
                .into(),
        })?;
        let new = Arc::new(Hub {
            waiting: Mutex::default(),
            next: AtomicU64::new(0),
            resyncs: watch::channel(0).0,
        });
        runtime.spawn(dispatch(Arc::downgrade(&new), store.announcements()));
        *hub = Some(new.clone());
        Ok(new)
    }
}

/// Routes announcements to waiters until the hub is dropped (with its client).
async fn dispatch(hub: std::sync::Weak<Hub>, mut rx: broadcast::Receiver<Announcement>) {
    loop {
        let heard = rx.recv().await;
        let Some(hub) = hub.upgrade() else { return };
        match heard {
            Ok(Announcement::Ended { topic, id, ended }) => {
                let gone = hub.lock().remove(&(topic, id));
                for (_, tx) in gone.into_iter().flatten() {
                    let _ = tx.send(Heard::Ended(ended.clone()));
                }
            }
            Ok(Announcement::Progress {
                topic,
                id,
                progress,
            }) => {
                if let Some(waiters) = hub.lock().get(&(topic, id)) {
                    for (_, tx) in waiters {
                        let _ = tx.send(Heard::Progress(progress.clone()));
                    }
                }
            }
            Ok(Announcement::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => {
                hub.resyncs.send_modify(|n| *n += 1);
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One registered waiter; unregisters when dropped.
struct Registration {
    hub: Arc<Hub>,
    key: (String, String),
    number: u64,
    rx: mpsc::UnboundedReceiver<Heard>,
}

impl Registration {
    fn new(hub: Arc<Hub>, topic: String, id: String) -> Self {
        let number = hub.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        let key = (topic, id);
        hub.lock()
            .entry(key.clone())
            .or_default()
            .push((number, tx));
        Registration {
            hub,
            key,
            number,
            rx,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut waiting = self.hub.lock();
        if let Some(list) = waiting.get_mut(&self.key) {
            list.retain(|(n, _)| *n != self.number);
            if list.is_empty() {
                waiting.remove(&self.key);
            }
        }
    }
}

/// A caller waiting for one job: its progress as the handler reports it, then its outcome. Made by
/// [`Client::waiter`]; [`Client::wait`] is the same without the progress.
pub struct Waiter<J: Job> {
    client: Client,
    topic: String,
    id: String,
    registration: Registration,
    /// The last progress heard or read.
    progress: Option<Progress>,
    /// The outcome, once known.
    ended: Option<Ended>,
    /// The resync count at the last lookup.
    seen: u64,
    /// For a job about to be enqueued ([`Watch::Expect`]): ends since this time are its own (0 until
    /// the store says its now).
    since_ms: Option<i64>,
    /// When the job was last looked up successfully (found live); `None` before the first lookup.
    looked_up: Option<Instant>,
    /// Until when the store holds this waiter's registration (from the last lookup).
    registered_until: Option<Instant>,
    resyncs: watch::Receiver<u64>,
    _job: std::marker::PhantomData<fn() -> J>,
}

impl<J: Job> std::fmt::Debug for Waiter<J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiter")
            .field("topic", &self.topic)
            .field("id", &self.id)
            .field("progress", &self.progress)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

/// What one step of a wait found.
enum Step {
    Ended,
    Progress,
    Unknown,
    TimedOut,
}

impl<J: Job> Waiter<J> {
    /// The progress last heard (or read at the lookup).
    pub fn progress(&self) -> Option<&Progress> {
        self.progress.as_ref()
    }

    /// Waits until the job reports progress (returns it) or ends, or until `deadline`: `None` when it
    /// ended (see [`outcome`](Self::outcome)) or the deadline passed.
    pub async fn next_progress(&mut self, deadline: Instant) -> Result<Option<Progress>> {
        match self.step(deadline).await? {
            Step::Progress => Ok(self.progress.clone()),
            _ => Ok(None),
        }
    }

    /// Waits until the job ends or `timeout` passes, and says how it ended (or where it is).
    pub async fn outcome(self, timeout: Duration) -> Result<JobOutcome<J::Output>> {
        self.outcome_by(Instant::now() + timeout).await
    }

    /// Registers in the store before the job exists (see [`Enqueue::and_wait`](crate::Enqueue::and_wait)):
    /// what the lookup finds is kept for [`outcome_by`](Self::outcome_by).
    pub(crate) async fn register(&mut self, deadline: Instant) -> Result<()> {
        self.look_up(deadline).await?;
        self.looked_up = Some(Instant::now());
        Ok(())
    }

    /// [`outcome`](Self::outcome) by a deadline.
    pub(crate) async fn outcome_by(mut self, deadline: Instant) -> Result<JobOutcome<J::Output>> {
        loop {
            match self.step(deadline).await? {
                Step::Progress => continue,
                Step::Unknown => return Ok(JobOutcome::Unknown),
                Step::TimedOut => {
                    return Ok(JobOutcome::Pending {
                        progress: self.progress.take(),
                    })
                }
                Step::Ended => return self.decode(),
            }
        }
    }

    fn decode(&mut self) -> Result<JobOutcome<J::Output>> {
        Ok(match self.ended.take() {
            Some(Ended::Succeeded { result }) => {
                let bytes: &[u8] = if result.is_empty() { b"null" } else { &result };
                let value = serde_json::from_slice(bytes).map_err(|e| Error::Decode {
                    topic: J::TOPIC.to_owned(),
                    id: self.id.clone(),
                    source: format!("the job's result does not decode: {e}").into(),
                })?;
                JobOutcome::Succeeded(value)
            }
            Some(Ended::Dead { reason }) => JobOutcome::Dead { reason },
            Some(Ended::Cancelled) => JobOutcome::Cancelled,
            None => JobOutcome::Unknown,
        })
    }

    /// Looks the job up in the store, registering there until `deadline` (at least [`REGISTER_FOR`]
    /// from now, so that a waiter whose caller waits again later stays registered in between).
    async fn look_up(&mut self, deadline: Instant) -> Result<Option<Step>> {
        self.seen = *self.resyncs.borrow_and_update();
        let now = Instant::now();
        let until = deadline.max(now + REGISTER_FOR);
        let wait_ms = millis(until - now);
        let watch = match self.since_ms {
            None => Watch::Live(wait_ms),
            Some(since_ms) => Watch::Expect { wait_ms, since_ms },
        };
        let store = &self.client.inner.store;
        Ok(match store.outcome(&self.topic, &self.id, watch).await? {
            Lookup::Ended { ended, .. } => {
                self.ended = Some(ended);
                Some(Step::Ended)
            }
            Lookup::Live { progress, now_ms } => {
                if progress.is_some() {
                    self.progress = progress;
                }
                if self.since_ms == Some(0) {
                    self.since_ms = Some(now_ms);
                }
                self.registered_until = Some(until);
                None
            }
            Lookup::Expected { since_ms } => {
                self.since_ms = Some(since_ms);
                self.registered_until = Some(until);
                None
            }
            Lookup::Unknown => Some(Step::Unknown),
        })
    }

    /// Waits for the next thing that happens to the job, or `deadline`.
    async fn step(&mut self, deadline: Instant) -> Result<Step> {
        if self.ended.is_some() {
            return Ok(Step::Ended);
        }
        loop {
            // Look (registering) at once, whether or not the hub listens yet: the store tells a waited
            // job's end to the lookups after it, and the hub's first resync (it listens) brings one.
            let expired = self.registered_until.is_none_or(|until| deadline > until);
            if self.looked_up.is_none() || expired || *self.resyncs.borrow() != self.seen {
                match self.look_up(deadline).await {
                    Ok(Some(step)) => return Ok(step),
                    Ok(None) => self.looked_up = Some(Instant::now()),
                    // The first lookup's error is the caller's; after a resync the store may still be
                    // coming back: look again shortly, until the deadline.
                    Err(e) if self.looked_up.is_none() => return Err(e),
                    Err(e) => {
                        tracing::debug!(topic = %self.topic, id = %self.id, error = %e.report(), "could not look a waited job up; retrying");
                        self.seen = self.seen.wrapping_sub(1);
                        let retry = (Instant::now() + LOOKUP_RETRY).min(deadline);
                        tokio::time::sleep_until(retry).await;
                        if Instant::now() >= deadline {
                            return Ok(Step::TimedOut);
                        }
                        continue;
                    }
                }
            }
            tokio::select! {
                heard = self.registration.rx.recv() => match heard {
                    Some(Heard::Ended(ended)) => {
                        self.ended = Some(ended);
                        return Ok(Step::Ended);
                    }
                    Some(Heard::Progress(p)) => {
                        self.progress = Some(p);
                        return Ok(Step::Progress);
                    }
                    None => return Err(listener_stopped()),
                },
                changed = self.resyncs.changed() => {
                    if changed.is_err() {
                        return Err(listener_stopped());
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return Ok(Step::TimedOut),
            }
        }
    }
}

/// The shortest a waiter is registered in the store at a lookup.
const REGISTER_FOR: Duration = Duration::from_secs(60);

/// How soon a waiter looks its job up again after a failed lookup (the store coming back).
const LOOKUP_RETRY: Duration = Duration::from_millis(100);

fn listener_stopped() -> Error {
    Error::backend("waiting for a job", "the client's listener stopped")
}

impl Client {
    /// Waits up to `timeout` for job `id` of type `J` to end, and returns how it ended: its handler's
    /// result ([`JobOutcome::Succeeded`], typed as the job's [`Output`](Job::Output)), its death, or
    /// its cancellation; [`JobOutcome::Pending`] when it had not ended by then, and
    /// [`JobOutcome::Unknown`] when there is no such job.
    ///
    /// It returns as soon as the outcome is known: the store announces it (one subscription per client,
    /// however many wait), with no polling. A job that ended before the call is found too, when it died
    /// or its type keeps finished jobs ([`Job::keep`]); one that succeeded or was cancelled and was not
    /// kept is [`JobOutcome::Unknown`]: to enqueue a job and wait for it, use
    /// [`Enqueue::and_wait`](crate::Enqueue::and_wait), which registers the wait before the job exists.
    /// Waiting survives a lost connection: after a reconnect every waiter looks its job up again, and
    /// the store keeps a waited job's end for its waiters' time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use postpone::{Client, Job, JobContext, JobError, JobOutcome, Worker};
    /// use serde::{Deserialize, Serialize};
    ///
    /// #[derive(Serialize, Deserialize, Job)]
    /// #[job(topic = "invoices.render", output = String, keep = "1h")]
    /// struct RenderInvoice { invoice_id: u64 }
    ///
    /// async fn render(job: RenderInvoice, _ctx: JobContext) -> Result<String, JobError> {
    ///     Ok(format!("https://files.example/invoice-{}.pdf", job.invoice_id))
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let client = Client::memory();
    /// let worker = Worker::builder(&client).handle(render).build()?;
    /// let stop = worker.shutdown_handle();
    /// let running = tokio::spawn(worker.run());
    ///
    /// client.enqueue(RenderInvoice { invoice_id: 7 }).id("invoice:7").await?;
    /// // Later, anywhere: the job may have ended already (it is kept for an hour), or not yet.
    /// match client.wait::<RenderInvoice>("invoice:7", Duration::from_secs(2)).await? {
    ///     JobOutcome::Succeeded(url) => assert_eq!(url, "https://files.example/invoice-7.pdf"),
    ///     JobOutcome::Pending { .. } => println!("still rendering"),
    ///     other => panic!("{other:?}"),
    /// }
    /// # stop.shutdown();
    /// # running.await.unwrap()?;
    /// # Ok(()) }
    /// ```
    pub async fn wait<J: Job>(&self, id: &str, timeout: Duration) -> Result<JobOutcome<J::Output>> {
        self.waiter::<J>(id)?.outcome(timeout).await
    }

    /// A [`Waiter`] for job `id` of type `J`: its progress as its handler reports it
    /// ([`JobContext::progress`](crate::JobContext::progress)), then its outcome. It listens from now
    /// on; nothing is looked up before its first call.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use postpone::{Client, Job};
    /// # use serde::{Deserialize, Serialize};
    /// # #[derive(Serialize, Deserialize, Job)]
    /// # #[job(topic = "imports")]
    /// # struct Import { file: String }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// # let client = Client::memory();
    /// # client.enqueue(Import { file: "a.csv".into() }).id("import:a").await?;
    /// let mut waiter = client.waiter::<Import>("import:a")?;
    /// let deadline = tokio::time::Instant::now() + Duration::from_millis(50);
    /// while let Some(p) = waiter.next_progress(deadline).await? {
    ///     println!("{}: {}", p.value, p.message);
    /// }
    /// let outcome = waiter.outcome(Duration::ZERO).await?;
    /// assert!(!outcome.is_final()); // no worker here: still pending
    /// # Ok(()) }
    /// ```
    pub fn waiter<J: Job>(&self, id: &str) -> Result<Waiter<J>> {
        self.make_waiter(id, None)
    }

    /// A waiter for a job about to be enqueued: see [`Enqueue::and_wait`](crate::Enqueue::and_wait).
    pub(crate) fn waiter_expecting<J: Job>(&self, id: &str) -> Result<Waiter<J>> {
        self.make_waiter(id, Some(0))
    }

    fn make_waiter<J: Job>(&self, id: &str, since_ms: Option<i64>) -> Result<Waiter<J>> {
        validate_id(id)?;
        let topic = store_topic(J::TOPIC, partition_of(id, J::partitions())).into_owned();
        let hub = self.inner.waiters.hub(&self.inner.store)?;
        let resyncs = hub.resyncs.subscribe();
        let registration = Registration::new(hub, topic.clone(), id.to_owned());
        Ok(Waiter {
            client: self.clone(),
            topic,
            id: id.to_owned(),
            registration,
            progress: None,
            ended: None,
            seen: 0,
            since_ms,
            looked_up: None,
            registered_until: None,
            resyncs,
            _job: std::marker::PhantomData,
        })
    }
}
