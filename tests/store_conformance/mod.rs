//! The store conformance suite: what every [`Store`] backend must do, asserted through the trait only.
//!
//! Each test is an `async fn(Arc<dyn Store>)`. A backend's test file instantiates all of them with
//! [`store_conformance!`], giving an async factory expression that evaluates to a [`Fixture`]: an
//! `Arc<dyn Store>`, or `(Arc<dyn Store>, guard)` where the guard (say, a redis-server process) lives
//! until the test ends:
//!
//! ```ignore
//! #[macro_use]
//! mod store_conformance;
//! mod support; // the suite waits with `support::wait`
//!
//! store_conformance!(async { Arc::new(MemoryStore::new()) as Arc<dyn Store> });
//! ```
//!
//! The suite assumes nothing about the backend: time comes from `store.now_ms()`, leases and delays are
//! tens of ms, whatever must happen later is awaited with [`eventually_within`] (never a bare sleep),
//! every test uses its own topic, and hints are filtered by topic (so a backend may share one server
//! between tests).
//!
//! A test left off the list in `store_conformance!` would never run; it is an unused function instead,
//! and `dead_code` is denied here, so the suite does not build until it is listed.
#![deny(dead_code)]

mod batch_ends;
mod batches;
mod cancel;
mod claim;
mod dead;
mod deaths;
mod delivered;
mod enqueue;
mod fair;
mod flow;
mod hints;
mod inspect;
mod lease;
mod ops;
mod outcomes;
mod periodic;
mod priority;
mod sweep;
mod workflow_deps;
mod workflow_failures;
mod workflow_listing;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use postpone::store::{
    ClaimBatch, ClaimRequest, ClaimedJob, Due, EnqueueOutcome, Finish, FinishItem, FinishOutcome,
    Hint, NewJob, Store, StoredState,
};
use tokio::sync::broadcast;

pub(crate) use self::batch_ends::*;
pub(crate) use self::batches::*;
pub(crate) use self::cancel::*;
pub(crate) use self::claim::*;
pub(crate) use self::dead::*;
pub(crate) use self::deaths::*;
pub(crate) use self::delivered::*;
pub(crate) use self::enqueue::*;
pub(crate) use self::fair::*;
pub(crate) use self::flow::*;
pub(crate) use self::hints::*;
pub(crate) use self::inspect::*;
pub(crate) use self::lease::*;
pub(crate) use self::ops::*;
pub(crate) use self::outcomes::*;
pub(crate) use self::periodic::*;
pub(crate) use self::priority::*;
pub(crate) use self::sweep::*;
pub(crate) use self::workflow_deps::*;
pub(crate) use self::workflow_failures::*;
pub(crate) use self::workflow_listing::*;
pub(crate) use crate::support::wait::eventually_within;

/// Expands to one `#[tokio::test]` per conformance test, each with a store from `$factory` (an async
/// expression evaluating to a [`Fixture`], run afresh for every test).
macro_rules! store_conformance {
    ($factory:expr) => {
        store_conformance!(@each $factory;
            // enqueue
            enqueue_new_job_is_created_and_stored,
            enqueue_existing_due_id_is_exists_and_changes_nothing,
            enqueue_with_replace_replaces_record_and_due_time,
            enqueue_of_an_active_id_is_running_and_changes_nothing,
            enqueue_beside_a_dead_job_of_the_same_id_is_created,
            due_in_counts_from_the_backends_now,
            due_at_in_the_past_means_now,
            due_at_in_the_future_is_not_claimable_before_its_time,
            due_times_are_capped_at_max_due_ms,
            bulk_enqueue_reports_one_outcome_per_job_in_order,
            bulk_enqueue_has_the_outcomes_of_single_enqueues,
            plain_bulk_enqueue_has_the_outcomes_of_single_enqueues,
            // enqueue once per delivery token (an outbox relay)
            outbox_delivery_enqueues_once_per_token_even_after_the_job_ran,
            outbox_delivery_batch_reports_in_order_and_takes_a_token_once,
            outbox_delivery_tokens_go_when_forgotten_or_older_than_keep,
            // claim
            claim_takes_the_earliest_due_first_up_to_max,
            claim_reports_next_due_next_lease_deadline_and_now,
            claim_reports_each_jobs_own_due_time_in_runs_and_alone,
            claim_on_an_empty_topic_reports_nothing,
            claim_with_max_zero_claims_nothing,
            claim_gives_one_token_per_claim_and_a_new_token_each_claim,
            // finish, extend, sweep
            finish_done_deletes_the_job_and_counts_processed,
            finish_retry_delays_the_job_with_its_new_record_and_counts_retried,
            finish_retry_not_counted_is_not_counted,
            finish_dead_moves_the_job_to_the_dead_letters_and_counts_failed,
            stale_token_finish_and_extend_change_nothing,
            finish_and_extend_of_unknown_jobs_are_stale_and_lost,
            extend_moves_the_lease_deadline_and_reports_held,
            extend_and_finish_still_hold_an_expired_lease_not_yet_swept,
            sweep_returns_an_expired_lease_to_due_without_using_an_attempt,
            sweep_dead_letters_a_job_that_stalls_more_than_stall_limit,
            sweep_stall_count_survives_retries,
            sweep_is_bounded_by_sweep_limit,
            // cancel, reschedule
            cancel_due_job_removes_it_and_counts_cancelled,
            cancel_running_job_marks_it_and_a_retry_ends_it_cancelled,
            cancel_running_job_then_done_is_applied_and_processed,
            cancel_running_job_then_dead_is_dead_lettered,
            cancel_running_job_whose_lease_expires_ends_cancelled,
            cancel_unknown_or_dead_job_is_not_found,
            reschedule_due_job_moves_its_due_time,
            reschedule_running_job_reports_running,
            reschedule_unknown_or_dead_job_is_not_found,
            // inspect
            job_lookup_reports_due_active_dead_and_none,
            counts_separate_scheduled_ready_active_and_dead,
            ids_with_special_characters_are_distinct_and_round_trip,
            topics_never_see_each_others_jobs,
            // dead letters
            dead_list_is_newest_first_with_offset_and_limit,
            dead_requeue_moves_a_dead_job_back_to_due,
            dead_requeue_of_a_missing_job_is_false,
            dead_requeue_beside_a_live_job_of_the_same_id_is_job_exists,
            dead_purge_deletes_one_or_all,
            dead_trim_only_removes_delivered_jobs_and_counts_them,
            dead_trim_keeps_the_newest_keep,
            dead_trim_removes_only_jobs_older_than_the_cutoff,
            dead_trim_removes_at_most_limit_per_call,
            dead_claim_takes_due_hooks_earliest_first_and_leases_them,
            dead_claimed_entries_come_back_after_the_lease,
            dead_ack_marks_the_hook_delivered,
            dead_retry_makes_the_hook_due_after_the_delay,
            // deaths, lost claim replies, swept jobs' places
            two_deaths_of_one_id_are_two_dead_letters,
            acking_one_death_leaves_a_newer_death_of_the_same_id_pending,
            requeue_and_purge_touch_only_the_death_they_name,
            a_claim_sent_again_gets_back_what_it_took,
            a_claim_sent_again_that_never_ran_claims_as_usual,
            a_received_claim_is_forgotten,
            an_expired_lease_keeps_its_place_in_line,
            // hints
            hint_on_enqueue_earlier_than_the_topics_earliest_and_not_on_a_later_one,
            hint_on_bulk_enqueue_for_its_earliest_new_job_only_when_earlier,
            hint_on_reschedule_earlier_than_the_topics_earliest,
            hint_on_retry_earlier_than_the_topics_earliest,
            // operations
            page_walks_ties_in_id_order_and_resumes_after_an_entry_that_went,
            page_lists_running_jobs_with_their_holder_and_dead_letters_with_their_reason,
            find_prefix_finds_every_match_step_by_step,
            a_paused_topic_claims_nothing_but_still_hands_back_a_lost_reply,
            registries_keep_topics_and_expire_workers,
            outbox_reports_are_kept_until_their_ttl,
            history_counts_what_happened_this_minute,
            // flow control
            max_running_caps_active_jobs_across_claimers_and_a_finish_frees_a_slot,
            max_running_frees_the_slot_of_an_expired_lease_once_swept,
            rate_limit_lets_its_budget_go_and_reports_when_the_next_job_may,
            rate_limit_never_lets_more_than_its_budget_go,
            a_rate_limited_finish_holds_the_topic_and_retries_the_job_without_counting,
            counts_show_the_flow_limits_the_budget_and_a_hold,
            a_hold_without_a_job_holds_claims_and_is_never_shortened,
            // priorities
            higher_priority_due_jobs_are_claimed_first_then_by_due_time,
            a_scheduled_job_with_a_priority_goes_first_once_due,
            a_priority_survives_a_retry_and_a_reschedule,
            a_swept_job_keeps_its_priority,
            cancel_and_replace_take_a_priority_away,
            // fairness by key
            fair_claim_takes_one_job_per_key_before_any_key_gets_a_second,
            fair_flood_does_not_delay_a_job_of_another_key,
            fair_a_batch_of_keyed_unkeyed_and_existing_jobs_files_each_created_job_once,
            fair_six_hundred_keys_each_take_one_turn_per_claim,
            fair_key_takes_its_own_jobs_in_due_order,
            fair_unkeyed_jobs_take_one_turn_as_the_key_of_no_key_and_older_ones_go_in_due_order,
            fair_only_key_left_fills_the_whole_claim,
            fair_only_key_left_passes_its_stale_entries_and_still_fills_the_claim,
            fair_only_key_left_reports_each_jobs_own_due_time,
            fair_claims_take_each_job_once_in_its_keys_order_however_the_keys_interleave,
            fair_retry_and_expired_lease_keep_the_key,
            fair_jobs_delivered_once_and_batch_members_keep_their_keys,
            fair_reschedule_and_cancel_of_keyed_jobs,
            fair_a_keys_jobs_enqueued_one_at_a_time_keep_due_order_and_cancels,
            fair_a_flood_claimed_between_writes_to_its_queue_keeps_each_job_once_in_order,
            fair_a_job_from_before_the_first_key_moved_later_is_still_claimed,
            fair_a_keyed_job_that_retries_after_its_topic_claims_plainly_again_is_claimed_once,
            fair_future_jobs_of_a_key_join_when_due,
            fair_jobs_with_a_priority_go_first_whatever_their_key,
            fair_replace_applies_the_new_jobs_key,
            fair_a_ready_key_keeps_its_turn_when_it_gets_another_job,
            fair_a_key_that_joins_late_does_not_make_up_for_missed_turns,
            fair_a_debounced_job_pushed_back_keeps_its_turn,
            fair_unique_and_debounced_jobs_keep_their_keys,
            fair_a_job_that_waits_for_jobs_takes_its_keys_turn_once_released,
            fair_a_jobs_key_is_found_with_it_in_every_state,
            fair_a_job_replaced_under_another_key_is_claimed_once,
            fair_key_limit_max_running_holds_per_key_while_other_keys_run_freely,
            fair_key_limit_a_keys_own_limits_replace_the_claims_for_that_key_alone,
            fair_key_limit_a_max_of_its_own_counts_the_keys_jobs_already_running,
            fair_key_limit_a_max_set_on_the_workers_counts_the_jobs_claimed_under_it,
            fair_running_keyed_jobs_show_their_holder_counted_or_not,
            fair_key_limit_a_finish_that_frees_a_parked_key_wakes_claimers,
            fair_key_limit_an_expired_lease_frees_its_keys_slot,
            fair_key_limit_a_dead_letter_requeued_keeps_its_key,
            fair_key_limit_a_key_takes_its_jobs_from_between_a_held_keys,
            fair_key_limit_rate_per_key_lets_each_key_go_at_its_rate,
            fair_key_limit_next_due_is_a_rate_held_keys_go_time_or_none_when_all_are_parked,
            fair_key_limit_a_rate_limited_finish_holds_only_its_key,
            fair_key_limit_a_jobs_key_load_shows_its_key_held_back,
            fair_key_limit_the_key_of_jobs_without_a_key_is_not_limited,
            // periodic schedules
            periodic_upsert_is_idempotent_and_a_changed_definition_replaces,
            periodic_tick_enqueues_due_ticks_once_and_advances,
            periodic_tick_checks_the_plan_against_the_stores_clock,
            periodic_tick_skips_a_tick_later_than_its_grace,
            periodic_overlap_skips_while_the_previous_ticks_job_is_due_or_active,
            periodic_trigger_enqueues_a_run_now_once,
            periodic_ticks_and_a_trigger_keep_their_keys_for_fairness,
            periodic_tick_of_a_live_id_or_another_definition_changes_nothing,
            periodic_tick_and_trigger_send_hints,
            // results, waiters, progress, kept finished jobs
            result_is_kept_with_its_record_only_under_a_retention,
            wait_registration_hears_finish_cancel_death_and_sweep,
            progress_holds_under_the_lease_reaches_waiters_and_goes_with_the_job,
            retention_trims_by_count_and_age_in_bounded_steps,
            wait_expecting_a_job_hears_its_end_before_any_other_lookup,
            // batches: members, their ends, callbacks
            batch_create_puts_members_due_in_their_topics_and_counts_them,
            batch_add_counts_new_members_once_and_refuses_closed_or_unknown_batches,
            batch_member_success_is_reported_by_the_claim_and_delivered_once,
            batch_success_and_complete_callbacks_fire_once_when_the_last_member_succeeds,
            batch_death_callback_fires_at_the_first_death_only_once,
            batch_cancelled_members_count_cancelled_and_complete_without_success,
            batch_member_stalled_to_death_by_the_sweep_counts_dead,
            batch_dead_member_requeued_is_no_longer_followed,
            batch_member_retry_is_not_an_end,
            batch_member_already_live_in_its_topic_is_that_job,
            batch_empty_and_closed_fires_complete_and_success,
            batch_members_are_listed_in_add_order_with_offset_and_limit,
            batches_are_listed_newest_first,
            batch_ends_are_not_pending_for_a_job_nobody_follows,
            // jobs that wait for jobs
            workflow_job_waits_for_its_parent_then_runs_once_it_succeeded,
            workflow_two_parents_in_two_topics_release_the_job_after_both_in_any_order,
            workflow_parent_named_twice_counts_once,
            workflow_an_end_delivered_twice_counts_once,
            workflow_parent_already_succeeded_and_kept_or_none_enqueues_the_job_at_once,
            workflow_unknown_parent_is_missing_and_nothing_is_enqueued,
            workflow_cancelled_waiting_job_is_gone_and_its_parents_end_changes_nothing,
            workflow_due_time_of_a_waiting_job_counts_from_its_release,
            workflow_released_job_keeps_its_priority,
            workflow_parent_death_dead_letters_the_waiting_job,
            workflow_parent_death_cancels_or_counts_as_done_by_the_jobs_policy,
            workflow_cancelled_parent_dead_letters_the_job_as_cancelled,
            workflow_death_propagates_down_a_chain_of_three,
            workflow_parent_already_dead_ends_the_job_at_once_by_its_policy,
            workflow_batch_hears_the_end_of_a_waiting_member_its_parent_killed,
            workflow_waiting_jobs_are_listed_by_id_apart_from_the_scheduled_ones,
            workflow_waiting_jobs_are_found_by_id_prefix_apart_from_the_scheduled_ones,
        );
    };
    (@each $factory:expr; $($name:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let fixture = $factory.await;
            let store = $crate::store_conformance::Fixture::store(&fixture);
            $crate::store_conformance::$name(store).await;
            drop(fixture);
        }
    )*};
}

/// What a factory gives: a store, and whatever must live as long as the test.
pub(crate) trait Fixture: Send {
    /// The store under test.
    fn store(&self) -> Arc<dyn Store>;
}

impl Fixture for Arc<dyn Store> {
    fn store(&self) -> Arc<dyn Store> {
        self.clone()
    }
}

impl<G: Send> Fixture for (Arc<dyn Store>, G) {
    fn store(&self) -> Arc<dyn Store> {
        self.0.clone()
    }
}

/// How long this suite waits for what must happen later: generous, since a loaded machine is slow, and the wait
/// ends as soon as the condition holds.
pub(crate) const WAIT: Duration = Duration::from_secs(10);
/// A lease that will not expire during a test.
pub(crate) const LONG: u64 = 600_000;
/// A lease or delay that will have passed within a few polls.
pub(crate) const SHORT: u64 = 30;
/// A record that is not UTF-8: backends store bytes.
pub(crate) const REC: &[u8] = b"rec\x00\xff\x01";
/// A record as the library encodes one (format version 2, no flags, attempt 1, enqueued at the epoch):
/// a keyed job's record carries its key (`NewJob::with_key` puts it in), which only such a record can.
pub(crate) const KEYED_REC: &[u8] = b"\x20\x01\x00rec";

/// KEYED_REC with `key` in it, as `NewJob::with_key` puts it (and a worker's retry sends it back).
pub(crate) fn rec_with_key(key: &str) -> Vec<u8> {
    let mut record = vec![KEYED_REC[0] | 8, key.len() as u8];
    record.extend_from_slice(key.as_bytes());
    record.extend_from_slice(&KEYED_REC[1..]);
    record
}

/// A topic name of its own for each test (and each run, should a server be shared).
pub(crate) fn topic(name: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let mut t = format!("{name}.{}.{nanos}.{seq}", std::process::id());
    t.truncate(128);
    t
}

/// The backend's now.
pub(crate) async fn now(s: &dyn Store) -> i64 {
    s.now_ms().await.unwrap()
}

/// Waits until the backend's clock is past `t`.
pub(crate) async fn wait_past(s: &dyn Store, t: i64) -> i64 {
    eventually_within(WAIT, "the backend's clock to move on", || async move {
        let now = now(s).await;
        (now > t).then_some(now)
    })
    .await
}

pub(crate) fn new_job(id: &str, record: &[u8], due: Due) -> NewJob {
    NewJob::new(id.to_owned(), record.to_vec(), due, false)
}

pub(crate) fn replacing(id: &str, record: &[u8], due: Due) -> NewJob {
    NewJob::new(id.to_owned(), record.to_vec(), due, true)
}

/// Enqueues one job (not replacing) and returns its outcome.
pub(crate) async fn enqueue(
    s: &dyn Store,
    topic: &str,
    id: &str,
    record: &[u8],
    due: Due,
) -> EnqueueOutcome {
    let out = s
        .enqueue(topic, vec![new_job(id, record, due)])
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    out[0]
}

/// Enqueues a new job and returns its due time.
pub(crate) async fn create(s: &dyn Store, topic: &str, id: &str, record: &[u8], due: Due) -> i64 {
    match enqueue(s, topic, id, record, due).await {
        EnqueueOutcome::Created { due_at_ms } => due_at_ms,
        other => panic!("enqueue of {id:?} gave {other:?}, not Created"),
    }
}

/// A claim that sweeps up to 100 expired leases and tolerates 10 stalls.
pub(crate) async fn claim(s: &dyn Store, topic: &str, max: usize, lease_ms: u64) -> ClaimBatch {
    s.claim(topic, ClaimRequest::new(max, lease_ms, 100, 10))
        .await
        .unwrap()
}

/// The ids of the jobs a claim of up to `max` takes (with a lease that will not expire), in the order
/// claimed.
pub(crate) async fn claimed_ids(s: &dyn Store, topic: &str, max: usize) -> Vec<String> {
    claim(s, topic, max, LONG)
        .await
        .jobs
        .into_iter()
        .map(|j| j.id)
        .collect()
}

/// Claims exactly one job, which must be `id`.
pub(crate) async fn claim_id(s: &dyn Store, topic: &str, id: &str, lease_ms: u64) -> ClaimedJob {
    let mut batch = claim(s, topic, 1, lease_ms).await;
    assert_eq!(batch.jobs.len(), 1, "expected to claim {id:?}: {batch:?}");
    let job = batch.jobs.remove(0);
    assert_eq!(job.id, id);
    job
}

pub(crate) async fn finish(
    s: &dyn Store,
    topic: &str,
    job: &ClaimedJob,
    finish: Finish,
) -> FinishOutcome {
    let out = s
        .finish(
            topic,
            vec![FinishItem::new(job.id.clone(), job.token, finish)],
        )
        .await
        .unwrap();
    assert_eq!(out.len(), 1);
    out[0]
}

pub(crate) fn retry(record: &[u8], delay_ms: u64, counted: bool) -> Finish {
    Finish::Retry {
        record: record.to_vec(),
        delay_ms,
        counted,
    }
}

pub(crate) fn dead(record: &[u8], reason: &str) -> Finish {
    Finish::Dead {
        record: record.to_vec(),
        reason: reason.to_owned(),
    }
}

/// Where a job is, if anywhere.
pub(crate) async fn state(s: &dyn Store, topic: &str, id: &str) -> Option<StoredState> {
    s.job(topic, id).await.unwrap().map(|job| job.state)
}

/// Kills each job in turn (enqueue, claim, finish `Dead` with reason `"boom <id>"` and record
/// `"final <id>"`), each in a later ms than the one before, and returns the times they died. The topic
/// must have nothing else due.
pub(crate) async fn make_dead(s: &dyn Store, topic: &str, ids: &[&str]) -> Vec<i64> {
    let mut died = Vec::new();
    for id in ids {
        if let Some(last) = died.last() {
            wait_past(s, *last).await;
        }
        create(s, topic, id, REC, Due::In(0)).await;
        let job = claim_id(s, topic, id, LONG).await;
        let finish_as = dead(format!("final {id}").as_bytes(), &format!("boom {id}"));
        assert_eq!(
            finish(s, topic, &job, finish_as).await,
            FinishOutcome::Applied
        );
        match state(s, topic, id).await {
            Some(StoredState::Dead { died_at_ms, .. }) => died.push(died_at_ms),
            other => panic!("{id:?} should be dead, is {other:?}"),
        }
    }
    died
}

/// How long [`hints_for`] keeps listening after its barrier: on a Redis Cluster, hints published by
/// different nodes reach a subscriber over different links, so a barrier from one node may overtake a
/// hint from another.
pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// The due times of the hints for `topic` that arrive before a barrier (a hint for a job enqueued in a
/// fresh topic after everything the test did; hints from one server are ordered, so any hint for
/// `topic` comes first), or within [`SETTLE`] after it. Called once before the test's actions, it also
/// waits until the receiver is live.
pub(crate) async fn hints_for(
    s: &dyn Store,
    rx: &mut broadcast::Receiver<Hint>,
    topic: &str,
) -> Vec<i64> {
    let mut seen = Vec::new();
    let start = Instant::now();
    let mut settle_until = None;
    while start.elapsed() < WAIT {
        let barrier = self::topic("barrier");
        create(s, &barrier, "barrier", REC, Due::In(0)).await;
        let attempt = Instant::now();
        while attempt.elapsed() < Duration::from_millis(500) || settle_until.is_some() {
            if settle_until.is_some_and(|t| Instant::now() >= t) {
                return seen;
            }
            match tokio::time::timeout(Duration::from_millis(50), rx.recv()).await {
                Ok(Ok(Hint::Topic { topic: t, .. })) if t == barrier => {
                    settle_until = Some(Instant::now() + SETTLE);
                }
                Ok(Ok(Hint::Topic {
                    topic: t,
                    due_at_ms,
                })) if t == topic => seen.push(due_at_ms),
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) | Err(_) => {}
                Ok(Err(broadcast::error::RecvError::Closed)) => panic!("the hint channel closed"),
            }
        }
    }
    panic!("no hint arrived for a job enqueued in a fresh topic within {WAIT:?}");
}
