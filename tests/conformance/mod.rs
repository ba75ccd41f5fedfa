//! The product conformance suite: client + worker behaviour against any backend.
//!
//! Each test takes a [`Backend`] (a client and whatever keeps its store alive) and asserts one promise of
//! DESIGN.md. `conformance_tests!(factory)` expands to one `#[tokio::test]` per test, so the memory and
//! Redis backends run the same source. Handlers report events on channels and tests await them (or
//! poll with [`eventually`], from `support::wait`, so a binary with this suite has `mod support;` too):
//! no test sleeps and hopes.
//!
//! A test left off the list in `conformance_tests!` would never run; it is an unused function instead,
//! and `dead_code` is denied here, so the suite does not build until it is listed.
#![deny(dead_code)]

pub(crate) mod batches;
pub(crate) mod deaths;
pub(crate) mod flow;
pub(crate) mod growth;
pub(crate) mod jobs;
pub(crate) mod key_limits;
pub(crate) mod keyed;
pub(crate) mod lifecycle;
pub(crate) mod middleware;
pub(crate) mod ops;
pub(crate) mod partitions;
pub(crate) mod periodic;
pub(crate) mod results;
pub(crate) mod retry;
pub(crate) mod worker;
pub(crate) mod workflows;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use postpone::{Client, ShutdownHandle, Worker};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

pub(crate) use crate::support::wait::eventually;

/// A client on a fresh store, and what keeps that store alive (a redis-server process, say).
pub(crate) struct Backend {
    pub client: Client,
    pub _keep: Box<dyn Any + Send>,
}

/// How long any awaited event may take before the test fails.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// Receives the next event, failing the test after [`PATIENCE`].
pub(crate) async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>) -> T {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("timed out waiting for an event")
        .expect("event channel closed")
}

/// Asserts that no event arrives within `quiet`.
pub(crate) async fn none_within<T: std::fmt::Debug>(
    rx: &mut mpsc::UnboundedReceiver<T>,
    quiet: Duration,
) {
    if let Ok(Some(e)) = tokio::time::timeout(quiet, rx.recv()).await {
        panic!("unexpected event: {e:?}");
    }
}

/// A worker running in the background.
pub(crate) struct Running {
    pub handle: ShutdownHandle,
    pub task: JoinHandle<postpone::Result<()>>,
}

impl Running {
    pub(crate) async fn stop(self) {
        self.handle.shutdown();
        tokio::time::timeout(PATIENCE * 3, self.task)
            .await
            .expect("worker did not stop")
            .expect("worker panicked")
            .expect("worker failed");
    }
}

pub(crate) fn spawn<S: Send + Sync + 'static>(worker: Worker<S>) -> Running {
    let handle = worker.shutdown_handle();
    Running {
        handle,
        task: tokio::spawn(worker.run()),
    }
}

/// The store's clock, in ms.
pub(crate) async fn store_now(client: &Client) -> i64 {
    client.store().now_ms().await.unwrap()
}

pub(crate) type Events<T> = (mpsc::UnboundedSender<T>, mpsc::UnboundedReceiver<T>);

pub(crate) fn events<T>() -> Events<T> {
    mpsc::unbounded_channel()
}

/// A shared sink that reports every dead letter on a channel.
pub(crate) fn channel_sink(
    tx: mpsc::UnboundedSender<postpone::DeadLetter>,
) -> impl postpone::DeadLetterSink {
    let tx = Arc::new(tx);
    postpone::sink_fn(move |dead| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(dead);
            Ok(())
        }
    })
}

/// Expands to one test per conformance check, each on a fresh backend from `$factory` (an async fn
/// returning [`Backend`]).
macro_rules! conformance_tests {
    ($factory:path) => {
        conformance_tests!(@each $factory,
            jobs::enqueue_then_run_deletes_the_job,
            jobs::delayed_job_never_runs_before_its_due_time,
            jobs::enqueue_at_absolute_time,
            jobs::duplicate_id_is_idempotent,
            jobs::replace_updates_payload_and_time,
            jobs::replace_of_running_job_is_an_error,
            jobs::generated_ids_are_unique,
            jobs::bulk_enqueue_runs_every_job_once,
            jobs::bad_input_gets_clear_errors,
            jobs::hostile_ids_are_distinct_jobs,
            jobs::job_lookup_reports_state,
            lifecycle::cancel_scheduled_job_never_runs,
            lifecycle::cancel_running_job_stops_it_and_prevents_retry,
            lifecycle::reschedule_moves_a_job,
            lifecycle::counts_by_state,
            lifecycle::dead_letters_list_requeue_purge,
            retry::retry_table_with_millisecond_schedule,
            retry::retry_after_uses_given_delay,
            retry::fail_now_goes_straight_to_dead_letter,
            retry::snooze_does_not_use_an_attempt,
            retry::per_enqueue_schedule_override,
            retry::undecodable_payload_is_dead_lettered_and_worker_continues,
            retry::panicking_handler_is_a_failed_attempt,
            retry::handler_timeout_is_a_failed_attempt,
            retry::failing_sink_is_retried_until_it_succeeds,
            worker::expired_lease_runs_again_without_using_an_attempt,
            worker::stale_token_ack_changes_nothing,
            worker::stalled_job_is_dead_lettered_after_the_bound,
            worker::shutdown_waits_for_running_handlers,
            worker::shutdown_hands_back_unfinished_jobs,
            worker::concurrency_limits_hold,
            worker::one_worker_serves_many_topics,
            worker::state_and_trait_handlers,
            worker::two_workers_never_run_a_job_twice,
            worker::a_stopped_worker_leaves_no_run_task_behind,
            partitions::partitioned_topic_routes_by_id_and_sums_counts,
            partitions::worker_runs_every_partition_once_per_job,
            partitions::partitions_take_turns_under_one_limit,
            partitions::hints_wake_each_partition,
            partitions::expired_leases_are_swept_in_every_partition,
            partitions::dead_letters_merge_over_partitions,
            deaths::a_panicking_sink_is_retried_and_other_deaths_still_flow,
            deaths::each_death_of_an_id_reaches_the_sink,
            growth::a_topic_grown_to_several_partitions_keeps_its_jobs,
            ops::ops_registries_list_topics_and_live_workers,
            ops::ops_pages_are_complete_and_stable_while_jobs_change,
            ops::ops_search_by_id_prefix_finds_every_match,
            ops::ops_job_detail_says_why_it_is_not_running,
            ops::ops_pause_holds_across_workers_until_resumed,
            ops::ops_dead_letters_requeue_and_purge_by_reason,
            ops::ops_history_counts_each_minute,
            flow::max_running_holds_across_workers,
            flow::rate_limit_spaces_jobs_across_workers,
            flow::a_provider_limit_holds_the_topic_across_workers,
            flow::weighted_topics_share_scarce_slots,
            flow::topics_share_slots_while_runs_take_jobs_claimed_ahead,
            flow::a_provider_limit_holds_every_partition,
            flow::ops_say_why_a_due_job_is_held_back,
            key_limits::key_limit_max_running_holds_per_key_across_three_workers,
            key_limits::key_limit_rate_per_key_holds_across_three_workers,
            periodic::two_workers_enqueue_each_tick_once_and_run_now_adds_one,
            middleware::middleware_runs_worker_wide_layers_outside_per_type_ones,
            middleware::middleware_that_fails_fast_skips_the_handler,
            middleware::middleware_error_retries_by_schedule_without_the_handler,
            middleware::middleware_turns_a_handler_error_into_success,
            middleware::middleware_sees_a_handler_panic_or_timeout_as_an_error,
            middleware::middleware_that_panics_fails_the_attempt,
            middleware::middleware_for_one_job_type_leaves_other_types_alone,
            middleware::middleware_sees_the_job_context,
            keyed::unique_key_under_64_concurrent_enqueues_creates_exactly_one_job,
            keyed::unique_scheduled_only_queues_one_while_another_runs,
            keyed::throttle_window_ends_and_then_a_new_job_is_created,
            keyed::debounce_under_1000_enqueues_over_2s_runs_once_after_the_last,
            keyed::debounce_max_wait_runs_a_burst_that_never_goes_quiet,
            keyed::unique_and_debounce_refuse_bad_keys_and_times,
            results::result_typed_round_trip_reaches_the_waiter_and_the_lookup,
            results::wait_returns_as_soon_as_the_job_ends_and_pending_on_timeout,
            results::wait_reports_death_cancellation_and_unknown_jobs,
            results::retention_keeps_the_newest_by_count_and_trims_by_age,
            results::result_over_the_limit_is_dead_lettered_with_the_reason,
            results::wait_registered_by_and_wait_hears_a_job_that_ends_at_once,
            results::done_jobs_are_listed_newest_first_by_cursor_and_say_how_they_ended,
            batches::batch_billing_run_with_two_deaths_fires_death_once_and_complete_with_counts,
            batches::batch_all_succeed_fires_success_and_complete_once_each,
            batches::batch_open_takes_members_until_closed_then_completes,
            batches::batch_members_and_callbacks_see_their_batch_id,
            batches::batch_cancelled_member_completes_the_batch_without_success,
            batches::batch_ids_are_checked_and_never_created_twice,
            workflows::workflow_receipt_runs_only_after_its_charge_succeeded,
            workflows::workflow_dead_charge_dead_letters_its_receipt_through_the_hook,
            workflows::workflow_fan_in_waits_for_every_parent_of_every_type,
            workflows::workflow_unknown_parent_refuses_the_enqueue,
            workflows::workflow_waiting_job_can_be_cancelled_and_the_policy_can_run_it,
        );
    };
    (@each $factory:path, $($module:ident :: $name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let backend = $factory().await;
                conformance::$module::$name(backend).await;
            }
        )*
    };
}
