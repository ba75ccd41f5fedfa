//! Group commit on Redis: concurrent enqueues, cancels and reschedules to one topic share script calls,
//! and each caller still gets exactly its own outcome, in its own order; a failed shared call fails each
//! of its callers, and a caller that gives up strands nobody.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use postpone::store::redis::{RedisOptions, RedisStore};
use postpone::store::{CancelOutcome, Due, EnqueueOutcome, JobStore, NewJob, RescheduleOutcome};
use postpone::Error;
use support::redis_server::RedisServer;
use support::store::*;
use tokio::sync::Barrier;

const CALLERS: usize = 64;

/// Calls of `command` (e.g. "evalsha") the server has answered.
fn calls(server: &RedisServer, command: &str) -> u64 {
    calls_by_command(server).get(command).copied().unwrap_or(0)
}

/// Calls of scripts the server has answered (as functions, or by script on a Redis without them).
fn script_calls(server: &RedisServer) -> u64 {
    calls(server, "fcall") + calls(server, "evalsha") + calls(server, "eval")
}

fn with_record(id: &str, record: &str, replace: bool) -> NewJob {
    NewJob::new(id.into(), record.as_bytes().to_vec(), Due::In(0), replace)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_enqueues_share_calls_and_each_caller_gets_its_own_outcomes_in_order() {
    let server = RedisServer::start();
    let s = Arc::new(store(&server, "shop").await);
    s.enqueue(T, vec![job("warm-up", Due::In(60_000))])
        .await
        .unwrap();
    let before = script_calls(&server);
    let start = Arc::new(Barrier::new(CALLERS));
    let tasks = (0..CALLERS).map(|t| {
        let (s, start) = (s.clone(), start.clone());
        tokio::spawn(async move {
            start.wait().await;
            let mut seen = Vec::new();
            for i in 0..20 {
                // An id of its own, then one every caller enqueues, then its own again.
                let own = format!("own:{t}:{i}");
                seen.push(s.enqueue(T, vec![job(&own, Due::In(0))]).await.unwrap()[0]);
                let shared = format!("shared:{i}");
                seen.push(s.enqueue(T, vec![job(&shared, Due::In(0))]).await.unwrap()[0]);
                seen.push(s.enqueue(T, vec![job(&own, Due::In(0))]).await.unwrap()[0]);
            }
            // Its own order: the replace sees the job the first call made, the lookup the replacement.
            let id = format!("seq:{t}");
            let first = s
                .enqueue(T, vec![with_record(&id, "first", false)])
                .await
                .unwrap();
            let second = s
                .enqueue(T, vec![with_record(&id, "second", true)])
                .await
                .unwrap();
            let stored = s.job(T, &id).await.unwrap().unwrap().record;
            (seen, first[0], second[0], stored)
        })
    });
    let mut created_shared = 0;
    for r in join_all(tasks).await {
        let (seen, first, second, stored) = r.unwrap();
        for triple in seen.chunks(3) {
            assert!(
                matches!(triple[0], EnqueueOutcome::Created { .. }),
                "{triple:?}"
            );
            assert!(
                matches!(triple[2], EnqueueOutcome::Exists { .. }),
                "{triple:?}"
            );
            match triple[1] {
                EnqueueOutcome::Created { .. } => created_shared += 1,
                EnqueueOutcome::Exists { .. } => {}
                other => panic!("shared id: {other:?}"),
            }
        }
        assert!(matches!(first, EnqueueOutcome::Created { .. }), "{first:?}");
        assert!(
            matches!(second, EnqueueOutcome::Replaced { .. }),
            "{second:?}"
        );
        assert_eq!(stored, b"second");
    }
    assert_eq!(created_shared, 20, "each shared id is created exactly once");
    let c = s.counts(T).await.unwrap();
    assert_eq!(
        c.ready + c.scheduled,
        (CALLERS * 20 + 20 + CALLERS + 1) as u64
    );
    // 64 callers x 63 enqueues (and 1 lookup each): far fewer script calls than enqueues.
    let sent = script_calls(&server) - before;
    let enqueues = (CALLERS * 62) as u64;
    assert!(
        sent < enqueues,
        "{sent} script calls for {enqueues} enqueues and {CALLERS} lookups: nothing was coalesced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_cancels_and_reschedules_each_get_their_own_outcome() {
    let server = RedisServer::start();
    let s = Arc::new(store(&server, "shop").await);
    let jobs = (0..CALLERS / 2)
        .map(|i| job(&format!("j{i}"), Due::In(60_000)))
        .collect();
    s.enqueue(T, jobs).await.unwrap();
    let start = Arc::new(Barrier::new(CALLERS));
    // Callers 2k and 2k+1 both reschedule job k; once every reschedule is done, both cancel it.
    let tasks = (0..CALLERS).map(|t| {
        let (s, start) = (s.clone(), start.clone());
        tokio::spawn(async move {
            let id = format!("j{}", t / 2);
            start.wait().await;
            let moved = s
                .reschedule(T, &id, Due::In(120_000 + t as u64))
                .await
                .unwrap();
            start.wait().await;
            let cancelled = s.cancel(T, &id).await.unwrap();
            (moved, cancelled)
        })
    });
    let results: Vec<_> = join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    for pair in results.chunks(2) {
        // Both reschedules found the job.
        for (moved, _) in pair {
            assert!(
                matches!(moved, RescheduleOutcome::Rescheduled { .. }),
                "{moved:?}"
            );
        }
        // Exactly one cancel removed it; the other found nothing.
        let mut outcomes: Vec<_> = pair.iter().map(|(_, c)| *c).collect();
        outcomes.sort_by_key(|c| *c != CancelOutcome::Removed);
        assert_eq!(outcomes, [CancelOutcome::Removed, CancelOutcome::NotFound]);
    }
    let c = s.counts(T).await.unwrap();
    assert_eq!((c.scheduled, c.cancelled), (0, (CALLERS / 2) as u64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_call_that_fails_fails_each_of_its_callers_then_all_recover() {
    let server = RedisServer::start();
    let options = RedisOptions::new("shop")
        .response_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300));
    let s = Arc::new(
        RedisStore::connect_with(&server.url(), options)
            .await
            .unwrap(),
    );
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    server.pause();
    let calls = (0..CALLERS).map(|i| {
        let s = s.clone();
        tokio::spawn(async move { s.enqueue(T, vec![job(&format!("p{i}"), Due::In(0))]).await })
    });
    for r in join_all(calls).await {
        let e = r.unwrap().unwrap_err();
        assert!(matches!(e, Error::Backend { .. }), "{e:?}");
        // The cause is there, as if the call had been the caller's own.
        assert!(
            e.report().to_string().len() > e.to_string().len(),
            "{}",
            e.report()
        );
    }
    server.resume();
    until_ok("an enqueue after resume", || {
        s.enqueue(T, vec![job("b", Due::In(0))])
    })
    .await;
    let calls = (0..CALLERS).map(|i| s.enqueue(T, vec![job(&format!("q{i}"), Due::In(0))]));
    for r in join_all(calls).await {
        assert!(matches!(r.unwrap()[0], EnqueueOutcome::Created { .. }));
    }
}

// One thread: a spawned task runs exactly when this one yields, so which call leads is known.
#[tokio::test(flavor = "current_thread")]
async fn a_caller_that_gives_up_strands_nobody_queued_behind_it() {
    let server = RedisServer::start();
    let s = Arc::new(store(&server, "shop").await);
    s.enqueue(T, vec![job("warm-up", Due::In(0))])
        .await
        .unwrap();
    // The first call is sent to a paused server and waits; the others queue behind it.
    server.pause();
    let first = {
        let s = s.clone();
        tokio::spawn(async move { s.enqueue(T, vec![job("first", Due::In(0))]).await })
    };
    settle().await;
    let behind: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move { s.enqueue(T, vec![job(&format!("b{i}"), Due::In(0))]).await })
        })
        .collect();
    settle().await;
    // The first caller gives up while its call is in flight.
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    server.resume();
    for r in join_all(behind).await {
        assert!(matches!(
            r.unwrap().unwrap()[0],
            EnqueueOutcome::Created { .. }
        ));
    }
    let more = s.enqueue(T, vec![job("after", Due::In(0))]).await.unwrap();
    assert!(matches!(more[0], EnqueueOutcome::Created { .. }));
}

/// Lets every spawned task run until it waits on something.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}
