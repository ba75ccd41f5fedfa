//! The metrics a worker and a client emit through the [`metrics`](https://docs.rs/metrics) facade, with
//! the `metrics` feature; without it every function here is empty.
//!
//! Names and labels (the guide's [operating](crate::guide::operating) chapter has the table). Labels are `topic`, and
//! `partition` on the per-partition ones of a partitioned topic, never a job id:
//!
//! | name | type | labels |
//! |---|---|---|
//! | `postpone_jobs_enqueued_total` | counter | topic, status |
//! | `postpone_jobs_finished_total` | counter | topic, outcome |
//! | `postpone_job_duration_seconds` | histogram | topic |
//! | `postpone_job_start_lag_seconds` | histogram | topic |
//! | `postpone_lease_renewals_total` | counter | topic |
//! | `postpone_leases_lost_total` | counter | topic |
//! | `postpone_stalls_swept_total` | counter | topic, partition, result |
//! | `postpone_dead_letter_deliveries_total` | counter | topic, result |
//! | `postpone_queue_depth` | gauge | topic, partition, state |
//! | `postpone_claim_batch_size` | histogram | topic, partition |
//! | `postpone_ack_batch_size` | histogram | topic, partition |
//!
//! Handles are registered when a worker starts: install the recorder (the exporter) before
//! [`Worker::run`](crate::Worker::run).

use std::time::Duration;

use crate::status::EnqueueStatus;
use crate::store::{FinishOutcome, TopicCounts};

/// How a job's run ended, as far as the worker knows before the store records it (the store may still
/// find it cancelled, or its lease lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tally {
    /// The handler succeeded.
    Done,
    /// The attempt failed; a retry is scheduled.
    Retried,
    /// Dead-lettered at once: the handler failed with `JobError::fail`, or the payload cannot be read.
    Failed,
    /// Dead-lettered after the last attempt of its schedule failed.
    Dead,
    /// Not a finished run: a snooze, or a job handed back at shutdown.
    Uncounted,
}

/// The `outcome` label of `postpone_jobs_finished_total` for a recorded finish, if it counts.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
fn outcome(tally: Tally, recorded: FinishOutcome) -> Option<&'static str> {
    match (recorded, tally) {
        (FinishOutcome::Stale, _) => None,
        (FinishOutcome::Cancelled, _) => Some("cancelled"),
        (_, Tally::Uncounted) => None,
        (_, Tally::Done) => Some("done"),
        (_, Tally::Retried) => Some("retried"),
        (_, Tally::Failed) => Some("failed"),
        (_, Tally::Dead) => Some("dead"),
    }
}

/// Counts an enqueued job (`postpone_jobs_enqueued_total`).
#[inline]
pub(crate) fn enqueued(topic: &'static str, status: EnqueueStatus) {
    #[cfg(feature = "metrics")]
    {
        on::describe();
        ::metrics::counter!("postpone_jobs_enqueued_total", "topic" => topic, "status" => status_label(status))
            .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (topic, status);
}

/// [`enqueued`] for a topic known only at run time (an outbox's delivery): the label is copied.
pub(crate) fn enqueued_named(topic: &str, status: EnqueueStatus) {
    #[cfg(feature = "metrics")]
    {
        on::describe();
        let topic = topic.to_owned();
        ::metrics::counter!("postpone_jobs_enqueued_total", "topic" => topic, "status" => status_label(status))
            .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (topic, status);
}

#[cfg(feature = "metrics")]
fn status_label(status: EnqueueStatus) -> &'static str {
    match status {
        EnqueueStatus::Created => "created",
        EnqueueStatus::Replaced => "replaced",
        EnqueueStatus::AlreadyScheduled => "already_scheduled",
        EnqueueStatus::AlreadyRunning => "already_running",
        EnqueueStatus::Duplicate => "duplicate",
        EnqueueStatus::Throttled => "throttled",
        EnqueueStatus::Debounced => "debounced",
        EnqueueStatus::Waiting => "waiting",
        EnqueueStatus::AlreadyWaiting => "already_waiting",
        EnqueueStatus::ParentFailed => "parent_failed",
    }
}

/// The metrics of one served topic (one partition of it), registered once when the worker starts so
/// that the hot paths touch only handles.
pub(crate) struct TopicMetrics {
    #[cfg(feature = "metrics")]
    on: on::Handles,
}

impl TopicMetrics {
    /// Whether metrics are compiled in.
    pub(crate) const ENABLED: bool = cfg!(feature = "metrics");

    /// Registers the handles of `topic` (and `partition`, on a partitioned topic).
    pub(crate) fn new(topic: &'static str, partition: Option<u16>) -> Self {
        #[cfg(not(feature = "metrics"))]
        let _ = (topic, partition);
        TopicMetrics {
            #[cfg(feature = "metrics")]
            on: on::Handles::new(topic, partition),
        }
    }

    /// A finish recorded by the store (`postpone_jobs_finished_total`).
    #[inline]
    pub(crate) fn finished(&self, tally: Tally, recorded: FinishOutcome) {
        #[cfg(feature = "metrics")]
        if let Some(outcome) = outcome(tally, recorded) {
            self.on.finished(outcome);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (tally, recorded);
    }

    /// A handler ran for `took` (`postpone_job_duration_seconds`).
    #[inline]
    pub(crate) fn ran(&self, took: Duration) {
        #[cfg(feature = "metrics")]
        self.on.duration.record(took.as_secs_f64());
        #[cfg(not(feature = "metrics"))]
        let _ = took;
    }

    /// A claim's reply arrived, with the store's time `now_us` when it ran: the store clock from which
    /// start lags are measured.
    #[inline]
    pub(crate) fn store_time(&self, now_us: i64) {
        #[cfg(feature = "metrics")]
        self.on.clock.set(now_us);
        #[cfg(not(feature = "metrics"))]
        let _ = now_us;
    }

    /// A handler starts on a job due at `due_at_ms` (`postpone_job_start_lag_seconds`, by the store's
    /// clock).
    #[inline]
    pub(crate) fn started(&self, due_at_ms: i64) {
        #[cfg(feature = "metrics")]
        if let Some(now_us) = self.on.clock.now_us() {
            let lag_us = now_us.saturating_sub(due_at_ms.saturating_mul(1000)).max(0);
            self.on.start_lag.record(lag_us as f64 / 1e6);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = due_at_ms;
    }

    /// Leases renewed by a heartbeat (`postpone_lease_renewals_total`).
    #[inline]
    pub(crate) fn leases_renewed(&self, n: usize) {
        #[cfg(feature = "metrics")]
        self.on.renewals.increment(n as u64);
        #[cfg(not(feature = "metrics"))]
        let _ = n;
    }

    /// A lease this worker held was found lost (`postpone_leases_lost_total`).
    #[inline]
    pub(crate) fn lease_lost(&self) {
        #[cfg(feature = "metrics")]
        self.on.lost.increment(1);
    }

    /// What a claim's sweep did (`postpone_stalls_swept_total`).
    #[inline]
    pub(crate) fn swept(&self, returned: u32, ended: u32) {
        #[cfg(feature = "metrics")]
        if returned > 0 || ended > 0 {
            self.on.swept_returned.increment(u64::from(returned));
            self.on.swept_ended.increment(u64::from(ended));
        }
        #[cfg(not(feature = "metrics"))]
        let _ = (returned, ended);
    }

    /// A dead-letter sink call (`postpone_dead_letter_deliveries_total`).
    #[inline]
    pub(crate) fn dead_letter(&self, delivered: bool) {
        #[cfg(feature = "metrics")]
        if delivered {
            self.on.sink_ok.increment(1);
        } else {
            self.on.sink_failed.increment(1);
        }
        #[cfg(not(feature = "metrics"))]
        let _ = delivered;
    }

    /// A claim took `n` jobs (`postpone_claim_batch_size`).
    #[inline]
    pub(crate) fn claimed(&self, n: usize) {
        #[cfg(feature = "metrics")]
        self.on.claim_batch.record(n as f64);
        #[cfg(not(feature = "metrics"))]
        let _ = n;
    }

    /// One store call recorded `n` outcomes (`postpone_ack_batch_size`).
    #[inline]
    pub(crate) fn acked(&self, n: usize) {
        #[cfg(feature = "metrics")]
        self.on.ack_batch.record(n as f64);
        #[cfg(not(feature = "metrics"))]
        let _ = n;
    }

    /// A sample of the topic's (partition's) depth (`postpone_queue_depth`).
    pub(crate) fn depth(&self, counts: &TopicCounts) {
        #[cfg(feature = "metrics")]
        self.on.depth(counts);
        #[cfg(not(feature = "metrics"))]
        let _ = counts;
    }
}

#[cfg(feature = "metrics")]
mod on {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::{Once, OnceLock};
    use std::time::Instant;

    use metrics::{
        counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
        Gauge, Histogram, Label, Unit,
    };

    /// Describes every metric to the recorder (the `# HELP` lines of a Prometheus scrape), once.
    pub(super) fn describe() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            describe_counter!(
                "postpone_jobs_enqueued_total",
                "Jobs enqueued, by what the enqueue did."
            );
            describe_counter!(
                "postpone_jobs_finished_total",
                "Runs recorded by the store, by outcome."
            );
            describe_histogram!(
                "postpone_job_duration_seconds",
                Unit::Seconds,
                "How long handlers ran."
            );
            describe_histogram!(
                "postpone_job_start_lag_seconds",
                Unit::Seconds,
                "Handler start minus due time, by the store's clock."
            );
            describe_counter!(
                "postpone_lease_renewals_total",
                "Leases renewed by heartbeats."
            );
            describe_counter!(
                "postpone_leases_lost_total",
                "Leases this worker held and lost."
            );
            describe_counter!(
                "postpone_stalls_swept_total",
                "Expired leases swept: returned to due, or ended."
            );
            describe_counter!(
                "postpone_dead_letter_deliveries_total",
                "Dead-letter sink calls, by result."
            );
            describe_gauge!(
                "postpone_queue_depth",
                "Jobs by state, sampled by the worker."
            );
            describe_histogram!(
                "postpone_claim_batch_size",
                Unit::Count,
                "Jobs taken per claim."
            );
            describe_histogram!(
                "postpone_ack_batch_size",
                Unit::Count,
                "Outcomes recorded per acknowledgement call."
            );
        });
    }

    use crate::store::TopicCounts;

    pub(super) struct Handles {
        done: Counter,
        retried: Counter,
        failed: Counter,
        dead: Counter,
        cancelled: Counter,
        pub(super) duration: Histogram,
        pub(super) start_lag: Histogram,
        pub(super) clock: StoreClock,
        pub(super) renewals: Counter,
        pub(super) lost: Counter,
        pub(super) swept_returned: Counter,
        pub(super) swept_ended: Counter,
        pub(super) sink_ok: Counter,
        pub(super) sink_failed: Counter,
        pub(super) claim_batch: Histogram,
        pub(super) ack_batch: Histogram,
        /// scheduled, ready, active, dead, dead_pending.
        depth: [Gauge; 6],
    }

    impl Handles {
        pub(super) fn new(topic: &'static str, partition: Option<u16>) -> Self {
            describe();
            let by_topic = || vec![Label::from_static_parts("topic", topic)];
            let by_partition = || {
                let mut labels = by_topic();
                if let Some(p) = partition {
                    labels.push(Label::new("partition", p.to_string()));
                }
                labels
            };
            let with = |mut labels: Vec<Label>, key: &'static str, value: &'static str| {
                labels.push(Label::from_static_parts(key, value));
                labels
            };
            let finished = |outcome| {
                counter!(
                    "postpone_jobs_finished_total",
                    with(by_topic(), "outcome", outcome)
                )
            };
            let swept = |result| {
                counter!(
                    "postpone_stalls_swept_total",
                    with(by_partition(), "result", result)
                )
            };
            let sink = |result| {
                counter!(
                    "postpone_dead_letter_deliveries_total",
                    with(by_topic(), "result", result)
                )
            };
            let depth =
                |state| gauge!("postpone_queue_depth", with(by_partition(), "state", state));
            Handles {
                done: finished("done"),
                retried: finished("retried"),
                failed: finished("failed"),
                dead: finished("dead"),
                cancelled: finished("cancelled"),
                duration: histogram!("postpone_job_duration_seconds", by_topic()),
                start_lag: histogram!("postpone_job_start_lag_seconds", by_topic()),
                clock: StoreClock::default(),
                renewals: counter!("postpone_lease_renewals_total", by_topic()),
                lost: counter!("postpone_leases_lost_total", by_topic()),
                swept_returned: swept("returned"),
                swept_ended: swept("ended"),
                sink_ok: sink("delivered"),
                sink_failed: sink("failed"),
                claim_batch: histogram!("postpone_claim_batch_size", by_partition()),
                ack_batch: histogram!("postpone_ack_batch_size", by_partition()),
                depth: [
                    depth("scheduled"),
                    depth("ready"),
                    depth("active"),
                    depth("waiting"),
                    depth("dead"),
                    depth("dead_pending"),
                ],
            }
        }

        pub(super) fn finished(&self, outcome: &str) {
            let counter = match outcome {
                "done" => &self.done,
                "retried" => &self.retried,
                "failed" => &self.failed,
                "dead" => &self.dead,
                _ => &self.cancelled,
            };
            counter.increment(1);
        }

        pub(super) fn depth(&self, c: &TopicCounts) {
            let values = [
                c.scheduled,
                c.ready,
                c.active,
                c.waiting,
                c.dead,
                c.dead_pending,
            ];
            for (gauge, value) in self.depth.iter().zip(values) {
                gauge.set(value as f64);
            }
        }
    }

    /// The store's clock as this worker last read it (from a claim's reply), kept as an offset from this
    /// process's monotonic clock: a start lag is judged by the store's time, as due times are, so a worker
    /// whose own clock is off still measures it right.
    pub(super) struct StoreClock {
        /// Store time minus monotonic time, µs; `i64::MIN` until a claim replied.
        offset_us: AtomicI64,
    }

    impl Default for StoreClock {
        fn default() -> Self {
            StoreClock {
                offset_us: AtomicI64::new(i64::MIN),
            }
        }
    }

    fn monotonic_us() -> i64 {
        static BASE: OnceLock<Instant> = OnceLock::new();
        let base = BASE.get_or_init(Instant::now);
        i64::try_from(base.elapsed().as_micros()).unwrap_or(i64::MAX)
    }

    impl StoreClock {
        pub(super) fn set(&self, now_us: i64) {
            let offset = now_us.saturating_sub(monotonic_us());
            self.offset_us.store(offset, Ordering::Relaxed);
        }

        pub(super) fn now_us(&self) -> Option<i64> {
            let offset = self.offset_us.load(Ordering::Relaxed);
            (offset != i64::MIN).then(|| offset.saturating_add(monotonic_us()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_counted_once_recorded() {
        let applied = FinishOutcome::Applied;
        assert_eq!(outcome(Tally::Done, applied), Some("done"));
        assert_eq!(outcome(Tally::Retried, applied), Some("retried"));
        assert_eq!(outcome(Tally::Failed, applied), Some("failed"));
        assert_eq!(outcome(Tally::Dead, applied), Some("dead"));
        assert_eq!(
            outcome(Tally::Retried, FinishOutcome::Cancelled),
            Some("cancelled")
        );
        assert_eq!(outcome(Tally::Done, FinishOutcome::Stale), None);
        assert_eq!(outcome(Tally::Uncounted, applied), None);
        // A snoozed job that the store found cancelled ends there.
        assert_eq!(
            outcome(Tally::Uncounted, FinishOutcome::Cancelled),
            Some("cancelled")
        );
    }
}
