//! The relay: moves committed outbox rows to the queue, in order per job id, each exactly once.
//!
//! # How a row travels
//!
//! One *round* is one PostgreSQL transaction:
//! 1. take up to `batch` rows, oldest first, that are the oldest row of their job id (`NOT EXISTS` an
//!    earlier row of the same topic and id) and not backing off, with `FOR UPDATE SKIP LOCKED`: rows
//!    another relay holds are skipped, and so are the rows of their ids that come after them, so
//!    several relays never deliver one row twice at once nor two rows of one id out of order;
//! 2. deliver them: enqueues with [`Client::deliver_once`] (one call per topic; Redis records each row's
//!    token with its job in one script, so a row delivered a second time changes nothing), cancels and
//!    reschedules by id (an id not found, or running for a reschedule, has nothing left to do);
//! 3. delete the delivered rows, and mark those that cannot be delivered (reported, kept, tried again
//!    later); commit; then drop the delivered tokens from Redis.
//!
//! A crash anywhere before the commit leaves every row in place (its lock goes with the connection),
//! and the next round delivers it again: Redis answers "delivered before" for an enqueue, "not found"
//! for a cancel, and the row is deleted then. A crash after the commit leaves only tokens in Redis, which
//! are dropped after the dedupe window. Redis away: the round delivers nothing, rolls back, and the
//! relay tries again with a backoff of up to 2 s; nothing is lost or reordered.
//!
//! # Waking up
//!
//! Each outbox write notifies the table's channel, which PostgreSQL delivers at commit; the relay
//! listens on it (one pooled connection) and runs a round at once. It also runs one every poll
//! interval (1 s by default), so a lost notification delays a row by at most that.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use postpone::outbox::Delivery;
use postpone::Error as JobError;
use sqlx::postgres::PgListener;
use sqlx::{AssertSqlSafe, PgPool};
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::outbox::Outbox;
use crate::row::{Action, Row, COLUMNS};
use crate::stats::{self, OutboxStats};

/// Most rows a round takes.
pub const MAX_BATCH: usize = 1000;
/// The longest wait between two tries while Redis or PostgreSQL is away.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// The first wait after a failed round.
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// The longest the relay's last report, when it stops, may take.
const FINAL_REPORT: Duration = Duration::from_secs(2);

/// Moves committed outbox rows to the queue. Run one per application instance (or several: they share
/// the work without delivering a row twice): `tokio::spawn(relay.run())`.
///
/// ```no_run
/// # async fn demo(client: postpone::Client, pool: sqlx::PgPool) -> postpone_postgres::Result<()> {
/// use postpone_postgres::{Outbox, Relay};
///
/// let outbox = Outbox::new(&client);
/// let relay = Relay::new(&outbox, pool.clone());
/// let stop = relay.shutdown_handle();
/// let running = tokio::spawn(relay.run());
/// // ... serve ...
/// stop.shutdown();
/// running.await.expect("the relay did not panic")?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Relay {
    outbox: Outbox,
    pool: PgPool,
    batch: usize,
    poll: Duration,
    keep: Duration,
    stale_after: Option<Duration>,
    select: Arc<str>,
    stop: Arc<Stop>,
}

#[derive(Debug, Default)]
struct Stop {
    stopped: AtomicBool,
    notify: Notify,
}

/// Stops a running [`Relay`]: its current round finishes, then [`Relay::run`] returns.
#[derive(Debug, Clone)]
pub struct RelayShutdown(Arc<Stop>);

impl RelayShutdown {
    /// Asks the relay to stop.
    pub fn shutdown(&self) {
        self.0.stopped.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
        self.0.notify.notify_one();
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Round {
    /// Rows taken.
    pub taken: usize,
    /// Rows delivered (and deleted).
    pub delivered: usize,
    /// Rows that cannot be delivered as they are: reported, kept, tried again later.
    pub undeliverable: usize,
    /// Rows left for the next round because Redis failed (a connection, a timeout).
    pub waiting: usize,
}

/// How one row ended in a round.
enum Fate {
    Delivered,
    Undeliverable(String),
    Waiting,
}

impl Relay {
    /// A relay for `outbox`'s table, with `pool` (it keeps one connection of it to listen).
    pub fn new(outbox: &Outbox, pool: PgPool) -> Self {
        let table = &outbox.statements().table.name;
        let select = format!(
            "SELECT {COLUMNS} FROM {table} o \
             WHERE (o.retry_at IS NULL OR o.retry_at <= clock_timestamp()) \
             AND NOT EXISTS (SELECT 1 FROM {table} e \
                 WHERE e.topic = o.topic AND e.job_id = o.job_id AND e.seq < o.seq) \
             ORDER BY o.seq LIMIT $1 FOR UPDATE OF o SKIP LOCKED"
        );
        Relay {
            outbox: outbox.clone(),
            pool,
            batch: 500,
            poll: Duration::from_secs(1),
            keep: Duration::from_secs(24 * 3600),
            stale_after: None,
            select: select.into(),
            stop: Arc::default(),
        }
    }

    /// Rows per round (default 500, at most [`MAX_BATCH`]).
    #[must_use]
    pub fn batch(mut self, rows: usize) -> Self {
        self.batch = rows;
        self
    }

    /// How often the relay looks for rows without a notification (default 1 s): the most a lost
    /// notification can delay a row.
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll = every;
        self
    }

    /// How long Redis remembers a delivered row's token when the relay could not drop it after the
    /// commit (a crash in between): a second delivery of that row within this window changes nothing
    /// (default 24 h).
    #[must_use]
    pub fn dedupe_window(mut self, window: Duration) -> Self {
        self.keep = window;
        self
    }

    /// How long after each of its reports operators should wait for the next one before they flag the
    /// outbox as unattended (default: the larger of 60 s and three poll intervals; it must exceed the
    /// poll interval). The relay reports the outbox's depth to the store every poll interval
    /// ([`postpone::ops::Ops::outboxes`]); the last report is kept a week, and once it is older than
    /// this, `postpone doctor` warns that no relay has reported for that long.
    #[must_use]
    pub fn stale_after(mut self, after: Duration) -> Self {
        self.stale_after = Some(after);
        self
    }

    /// A handle that stops [`run`](Self::run).
    pub fn shutdown_handle(&self) -> RelayShutdown {
        RelayShutdown(self.stop.clone())
    }

    fn check(&self) -> Result<()> {
        if self.batch == 0 || self.batch > MAX_BATCH {
            return Err(Error::InvalidConfig {
                reason: format!("relay batch {} is not 1 to {MAX_BATCH}", self.batch),
            });
        }
        if self.poll.is_zero() {
            return Err(Error::InvalidConfig {
                reason: "the relay's poll interval must be above zero".to_owned(),
            });
        }
        if self.stale_after.is_some_and(|after| after <= self.poll) {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "the relay's stale_after ({:?}) must exceed its poll interval ({:?}): it reports \
                     once per poll interval",
                    self.stale_after.unwrap_or_default(),
                    self.poll
                ),
            });
        }
        Ok(())
    }

    /// When this relay's report goes stale: see [`stale_after`](Self::stale_after).
    fn report_stale_after(&self) -> Duration {
        self.stale_after
            .unwrap_or_else(|| (self.poll * 3).max(postpone::ops::OUTBOX_STALE_AFTER))
    }

    /// Delivers rows until [`RelayShutdown::shutdown`]: a round at each notification, at each poll
    /// interval, and at once again while rounds come back full. Failures (Redis or PostgreSQL away)
    /// are logged and retried with a backoff; it returns an error only for an invalid configuration.
    /// Reports the outbox's depth to operators every poll interval, and once more when it stops (for
    /// at most 2 s; see [`stale_after`](Self::stale_after)).
    pub async fn run(self) -> Result<()> {
        self.check()?;
        let wake = Arc::new(Notify::new());
        let listener = tokio::spawn(listen(
            self.pool.clone(),
            self.outbox.statements().table.channel.clone(),
            wake.clone(),
        ));
        let mut backoff = MIN_BACKOFF;
        let mut reported: Option<tokio::time::Instant> = None;
        while !self.stop.stopped.load(Ordering::SeqCst) {
            if reported.is_none_or(|at| at.elapsed() >= self.poll) {
                self.report().await;
                reported = Some(tokio::time::Instant::now());
            }
            let (wait, wakeable) = match self.deliver().await {
                Ok(round) if round.waiting > 0 => (next_backoff(&mut backoff), false),
                Ok(round) if round.taken == self.batch => (Duration::ZERO, true),
                Ok(_) => {
                    backoff = MIN_BACKOFF;
                    (self.poll, true)
                }
                Err(e) => {
                    tracing::warn!(error = %ErrorChain(&e), "outbox relay: a round failed; trying again");
                    (next_backoff(&mut backoff), false)
                }
            };
            if wait.is_zero() {
                continue;
            }
            tokio::select! {
                _ = wake.notified(), if wakeable => {}
                _ = tokio::time::sleep(wait) => {}
                _ = self.stop.notify.notified() => {}
            }
        }
        listener.abort();
        // The last report operators see while no relay runs: what the outbox holds now. Bounded, so
        // that a PostgreSQL or Redis that is away does not hold up the application's shutdown.
        let _ = tokio::time::timeout(FINAL_REPORT, self.report()).await;
        Ok(())
    }

    /// Runs one round: takes up to `batch` deliverable rows, delivers them, deletes those delivered
    /// and marks those that cannot be, in one transaction. See the module's docs.
    pub async fn deliver(&self) -> Result<Round> {
        let mut tx = self.pool.begin().await?;
        let rows = sqlx::query(AssertSqlSafe(self.select.clone()))
            .bind(i64::try_from(self.batch).unwrap_or(500))
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(Row::read)
            .collect::<Result<Vec<_>, _>>()?;
        if rows.is_empty() {
            return Ok(Round::default());
        }
        let fates = self.deliver_rows(&rows).await;
        let mut round = Round {
            taken: rows.len(),
            ..Round::default()
        };
        let mut done = Vec::new();
        let mut tokens: BTreeMap<(&str, u16), Vec<(String, String)>> = BTreeMap::new();
        let table = &self.outbox.statements().table.name;
        for (row, fate) in rows.iter().zip(fates) {
            match fate {
                Fate::Delivered => {
                    round.delivered += 1;
                    done.push(row.seq);
                    if row.op == 1 {
                        tokens
                            .entry((&row.topic, row.partitions()))
                            .or_default()
                            .push((row.job_id.clone(), row.token.clone()));
                    }
                }
                Fate::Waiting => round.waiting += 1,
                Fate::Undeliverable(error) => {
                    round.undeliverable += 1;
                    tracing::error!(
                        topic = %row.topic,
                        job_id = %row.job_id,
                        seq = row.seq,
                        failures = row.failures + 1,
                        error = %error,
                        "outbox relay: a row cannot be delivered; it is kept and tried again later \
                         (the rows of its job id wait behind it)"
                    );
                    sqlx::query(AssertSqlSafe(format!(
                        "UPDATE {table} SET failures = failures + 1, last_error = $2, retry_at = \
                         clock_timestamp() + make_interval(secs => LEAST(300, power(2, failures))) \
                         WHERE seq = $1"
                    )))
                    .bind(row.seq)
                    .bind(&error)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        if !done.is_empty() {
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE seq = ANY($1)"
            )))
            .bind(&done)
            .execute(&mut *tx)
            .await?;
        }
        crate::failpoint::hit("relay-before-commit");
        tx.commit().await?;
        stats::delivered(round.delivered, round.undeliverable);
        let client = self.outbox.client();
        for ((topic, partitions), delivered) in tokens {
            if let Err(e) = client.forget_deliveries(topic, partitions, delivered).await {
                tracing::debug!(topic, error = %e.report(), "outbox relay: delivered tokens not dropped; they expire after the dedupe window");
            }
        }
        Ok(round)
    }

    /// Delivers checked rows: enqueues per topic in one call each, cancels and reschedules at once.
    /// One fate per row, in order.
    async fn deliver_rows(&self, rows: &[Row]) -> Vec<Fate> {
        let client = self.outbox.client();
        let mut fates: Vec<Option<Fate>> = rows.iter().map(|_| None).collect();
        let mut enqueues: BTreeMap<(&str, u16), Vec<(usize, Delivery)>> = BTreeMap::new();
        let mut by_id = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            match row.action(client) {
                Err(e) => fates[i] = Some(Fate::Undeliverable(e)),
                Ok(Action::Enqueue(delivery)) => enqueues
                    .entry((&row.topic, row.partitions()))
                    .or_default()
                    .push((i, delivery)),
                Ok(action) => by_id.push((i, action)),
            }
        }
        let keep = self.keep;
        let enqueue_calls = enqueues.into_iter().map(|((topic, partitions), batch)| {
            let (positions, deliveries): (Vec<usize>, Vec<Delivery>) = batch.into_iter().unzip();
            async move {
                let result = client
                    .deliver_once(topic, partitions, deliveries, keep)
                    .await;
                (positions, result.err())
            }
        });
        let id_calls = by_id.into_iter().map(|(i, action)| {
            let row = &rows[i];
            async move {
                let result = match client.topic_partitioned(&row.topic, row.partitions()) {
                    Err(e) => Err(e),
                    Ok(topic) => match action {
                        Action::Cancel => topic.cancel(&row.job_id).await.map(drop),
                        Action::Reschedule(when) => {
                            topic.reschedule(&row.job_id, when).await.map(drop)
                        }
                        Action::Enqueue(_) => Ok(()),
                    },
                };
                (i, result)
            }
        });
        let (enqueued, by_id) = tokio::join!(join_all(enqueue_calls), join_all(id_calls));
        for (positions, error) in enqueued {
            for i in positions {
                fates[i] = Some(fate_of(error.as_ref()));
            }
        }
        for (i, result) in by_id {
            // Nothing left to do for an id not found (it ran, or was cancelled) or, for a reschedule,
            // running.
            fates[i] = Some(match result {
                Ok(()) | Err(JobError::JobNotFound { .. } | JobError::JobRunning { .. }) => {
                    Fate::Delivered
                }
                Err(e) => fate_of(Some(&e)),
            });
        }
        fates
            .into_iter()
            .map(|f| f.unwrap_or(Fate::Waiting))
            .collect()
    }

    /// Reads the outbox's stats and reports them to operators ([`postpone::ops::Ops::outboxes`],
    /// `postpone doctor`), stale after [`stale_after`](Self::stale_after). A failure is only logged.
    async fn report(&self) {
        let stats = match self.stats().await {
            Ok(stats) => stats,
            Err(e) => {
                tracing::debug!(error = %ErrorChain(&e), "outbox relay: cannot read the outbox's stats");
                return;
            }
        };
        let report = postpone::ops::OutboxReport::new(stats.rows, stats.oldest, stats.failing);
        let name = &self.outbox.statements().table.name;
        let ops = self.outbox.client().ops();
        let stale_after = self.report_stale_after();
        if let Err(e) = ops.report_outbox(name, &report, stale_after).await {
            tracing::debug!(error = %e.report(), "outbox relay: cannot report the outbox's stats");
        }
    }

    /// The outbox's depth, oldest row and rows failing now.
    pub async fn stats(&self) -> Result<OutboxStats> {
        let mut conn = self.pool.acquire().await?;
        self.outbox.stats(&mut conn).await
    }
}

/// A delivery's fate from its error: none, delivered; a connection's, wait for the next round; any
/// other, the row cannot be delivered as it is.
fn fate_of(error: Option<&JobError>) -> Fate {
    match error {
        None => Fate::Delivered,
        Some(e) if e.is_transient() => Fate::Waiting,
        Some(e) => Fate::Undeliverable(e.report().to_string()),
    }
}

fn next_backoff(backoff: &mut Duration) -> Duration {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    wait
}

/// An error and its causes on one line.
struct ErrorChain<'a>(&'a Error);

impl std::fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Error::Job(e) => write!(f, "{}", e.report()),
            other => write!(f, "{other}"),
        }
    }
}

/// Wakes the relay at each notification of `channel`, and after each (re)connect (rows may have
/// committed meanwhile). Runs until aborted.
async fn listen(pool: PgPool, channel: String, wake: Arc<Notify>) {
    loop {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, "outbox relay: cannot listen yet; polling meanwhile");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(e) = listener.listen(&channel).await {
            tracing::debug!(error = %e, "outbox relay: LISTEN failed; polling meanwhile");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        wake.notify_one();
        loop {
            match listener.try_recv().await {
                Ok(Some(_)) => {
                    while listener.next_buffered().is_some() {}
                    wake.notify_one();
                }
                // The connection was lost; the next call reconnects.
                Ok(None) => wake.notify_one(),
                Err(e) => {
                    tracing::debug!(error = %e, "outbox relay: listening failed; reconnecting");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    break;
                }
            }
        }
    }
}
