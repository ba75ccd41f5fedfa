//! Unique jobs, throttle and debounce through the client: the key is checked and set in the store, in
//! one atomic step, whatever the number of concurrent callers.

use std::time::Duration;

use postpone::{
    Debounce, EnqueueStatus, Error, Job, JobContext, JobError, Unique, UniqueStates, Worker,
};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job, PartialEq)]
#[job(topic = "search.reindex")]
pub(crate) struct Reindex {
    pub product_id: u64,
    pub edit: u64,
}

fn reindex(edit: u64) -> Reindex {
    Reindex {
        product_id: 42,
        edit,
    }
}

/// Runs Reindex jobs, reporting (id, edit, store-now-at-start) per run; with `gate`, each run first
/// waits for a message on it.
fn reindexer(
    b: &Backend,
    tx: mpsc::UnboundedSender<(String, u64, i64)>,
    gate: Option<async_channel_like::Gate>,
) -> Running {
    let client = b.client.clone();
    let handler = move |job: Reindex, ctx: JobContext| {
        let (tx, client, gate) = (tx.clone(), client.clone(), gate.clone());
        async move {
            let now = store_now(&client).await;
            let _ = tx.send((ctx.id().to_owned(), job.edit, now));
            if let Some(gate) = gate {
                gate.wait().await;
            }
            Ok::<(), JobError>(())
        }
    };
    spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .concurrency(8)
            .build()
            .unwrap(),
    )
}

/// A gate handlers wait at until the test opens it.
pub(crate) mod async_channel_like {
    use std::sync::Arc;

    use tokio::sync::Semaphore;

    #[derive(Clone, Debug)]
    pub(crate) struct Gate(Arc<Semaphore>);

    impl Gate {
        pub(crate) fn closed() -> Self {
            Gate(Arc::new(Semaphore::new(0)))
        }
        pub(crate) async fn wait(&self) {
            self.0.acquire().await.expect("gate").forget();
        }
        pub(crate) fn open(&self) {
            self.0.add_permits(1_000_000);
        }
    }
}

pub(crate) async fn unique_key_under_64_concurrent_enqueues_creates_exactly_one_job(b: Backend) {
    let window = Unique::new("product:42", Duration::from_secs(600));
    let calls = (0..64).map(|n| {
        let (client, window) = (b.client.clone(), window.clone());
        tokio::spawn(async move { client.enqueue(reindex(n)).unique(window).await.unwrap() })
    });
    let mut outcomes = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        outcomes.push(call.await.unwrap());
    }
    let created: Vec<_> = outcomes
        .iter()
        .filter(|e| e.status == EnqueueStatus::Created)
        .collect();
    assert_eq!(created.len(), 1, "{outcomes:?}");
    let first = created[0].id.clone();
    for e in &outcomes {
        if e.status != EnqueueStatus::Created {
            assert_eq!(e.status, EnqueueStatus::Duplicate, "{e:?}");
            assert_eq!(
                e.id, first,
                "each duplicate names the job that holds the key"
            );
            assert!(e.due_at.is_some(), "it is scheduled");
        }
    }
    let counts = b.client.topic::<Reindex>().counts().await.unwrap();
    assert_eq!(counts.scheduled + counts.ready, 1);

    // The job runs; within the window, an enqueue of the key is throttled until the window's end.
    let (tx, mut rx) = events();
    let worker = reindexer(&b, tx, None);
    let (id, _, _) = next(&mut rx).await;
    assert_eq!(id, first);
    worker.stop().await;
    let again = b.client.enqueue(reindex(99)).unique(window).await.unwrap();
    assert_eq!(again.status, EnqueueStatus::Throttled);
    assert_eq!(again.id, first);
    let until = again
        .held_until
        .expect("a throttled enqueue says until when");
    assert!(until > chrono::Utc::now() + chrono::Duration::seconds(590));
}

pub(crate) async fn unique_scheduled_only_queues_one_while_another_runs(b: Backend) {
    let pending_only =
        Unique::new("product:42", Duration::from_secs(600)).states(UniqueStates::SCHEDULED);
    let first = b
        .client
        .enqueue(reindex(1))
        .unique(pending_only.clone())
        .await
        .unwrap();
    assert_eq!(first.status, EnqueueStatus::Created);
    let gate = async_channel_like::Gate::closed();
    let (tx, mut rx) = events();
    let worker = reindexer(&b, tx, Some(gate.clone()));
    assert_eq!(
        next(&mut rx).await.0,
        first.id,
        "the first one runs (and waits at the gate)"
    );

    // Scheduled for later, so that the worker does not take it at once.
    let hour = Duration::from_secs(3600);
    let second = b
        .client
        .enqueue(reindex(2))
        .after(hour)
        .unique(pending_only.clone())
        .await;
    let second = second.unwrap();
    assert_eq!(
        second.status,
        EnqueueStatus::Created,
        "running is not a held state here"
    );
    assert_ne!(second.id, first.id);
    let third = b
        .client
        .enqueue(reindex(3))
        .after(hour)
        .unique(pending_only)
        .await
        .unwrap();
    assert_eq!(
        (third.status, third.id),
        (EnqueueStatus::Duplicate, second.id.clone())
    );
    gate.open();
    worker.stop().await;
    let job = b.client.topic::<Reindex>().job(&first.id).await.unwrap();
    assert!(job.is_none(), "done");
}

pub(crate) async fn throttle_window_ends_and_then_a_new_job_is_created(b: Backend) {
    let window = Unique::new("product:42", Duration::from_millis(300));
    let first = b
        .client
        .enqueue(reindex(1))
        .unique(window.clone())
        .meta("unique", "the caller's own")
        .await
        .unwrap();
    assert_eq!(first.status, EnqueueStatus::Created);
    let job = b
        .client
        .topic::<Reindex>()
        .job(&first.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        job.meta.get("postpone.unique").map(String::as_str),
        Some("product:42 for 300ms (scheduled, running, finished)"),
        "operators see the key and its window"
    );
    assert_eq!(
        job.meta.get("unique").map(String::as_str),
        Some("the caller's own"),
        "a caller's entry of that name is kept"
    );
    let detail = b
        .client
        .ops()
        .job("search.reindex", &first.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        detail.unique(),
        job.meta.get("postpone.unique").map(String::as_str),
        "in the job view too"
    );
    assert_eq!(detail.debounce(), None);
    let (tx, mut rx) = events();
    let worker = reindexer(&b, tx, None);
    next(&mut rx).await;
    let throttled = eventually("the job to finish", || async {
        let e = b
            .client
            .enqueue(reindex(2))
            .unique(window.clone())
            .await
            .unwrap();
        (e.status == EnqueueStatus::Throttled).then_some(e)
    })
    .await;
    let until = throttled.held_until.unwrap();
    let created = eventually("the window to end", || async {
        let e = b
            .client
            .enqueue(reindex(3))
            .unique(window.clone())
            .await
            .unwrap();
        (e.status == EnqueueStatus::Created).then_some(e)
    })
    .await;
    assert!(
        chrono::Utc::now() >= until - chrono::Duration::milliseconds(50),
        "created only once the window ended ({until})"
    );
    assert_eq!(next(&mut rx).await.0, created.id);
    worker.stop().await;
}

pub(crate) async fn debounce_under_1000_enqueues_over_2s_runs_once_after_the_last(b: Backend) {
    const QUIET: Duration = Duration::from_millis(400);
    let (tx, mut rx) = events();
    let worker = reindexer(&b, tx, None);
    let debounce = Debounce::new("product:42", QUIET).replace_payload();
    // 10 callers, 100 enqueues each, 20 ms apart: 1,000 over about 2 s.
    let calls = (0..10).map(|t| {
        let (client, debounce) = (b.client.clone(), debounce.clone());
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 0..100 {
                let e = client
                    .enqueue(reindex(t * 100 + n))
                    .debounce(debounce.clone())
                    .await
                    .unwrap();
                assert!(
                    matches!(e.status, EnqueueStatus::Created | EnqueueStatus::Debounced),
                    "{e:?}"
                );
                ids.push(e.id);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ids
        })
    });
    let mut ids = std::collections::HashSet::new();
    for call in calls.collect::<Vec<_>>() {
        ids.extend(call.await.unwrap());
    }
    assert_eq!(
        ids.len(),
        1,
        "every enqueue of the burst named one pending job"
    );
    let before_last = store_now(&b.client).await;
    let last = b
        .client
        .enqueue(reindex(9999))
        .debounce(debounce)
        .await
        .unwrap();
    assert_eq!(last.status, EnqueueStatus::Debounced);
    let (id, edit, started) = next(&mut rx).await;
    assert_eq!(id, last.id);
    assert_eq!(edit, 9999, "the pushed job took the last payload");
    assert!(
        started >= before_last + QUIET.as_millis() as i64,
        "ran {} ms after the last enqueue, not at least the quiet period",
        started - before_last
    );
    none_within(&mut rx, QUIET * 2).await;
    worker.stop().await;
}

pub(crate) async fn debounce_max_wait_runs_a_burst_that_never_goes_quiet(b: Backend) {
    const MAX: Duration = Duration::from_millis(600);
    let (tx, mut rx) = events();
    let worker = reindexer(&b, tx, None);
    let debounce = Debounce::new("product:42", Duration::from_millis(400)).max_wait(MAX);
    let start = store_now(&b.client).await;
    let first = b
        .client
        .enqueue(reindex(1))
        .debounce(debounce.clone())
        .await
        .unwrap();
    // An enqueue every 50 ms, until the job has run. One sent after its claim and before its run was
    // reported here starts the next pending job.
    let mut next_pending = None;
    let started = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Ok(Some(run)) = tokio::time::timeout(Duration::ZERO, rx.recv()).await {
            break run;
        }
        let e = b
            .client
            .enqueue(reindex(2))
            .debounce(debounce.clone())
            .await
            .unwrap();
        assert!(
            store_now(&b.client).await - start < 10_000,
            "the burst never ran: {e:?}"
        );
        if e.status == EnqueueStatus::Created {
            next_pending = Some(e.id);
        }
    };
    assert_eq!(started.0, first.id);
    assert!(
        started.2 >= start + MAX.as_millis() as i64,
        "not before the max wait"
    );
    // Once it ran, the next enqueue starts a new pending job.
    let next_one = b
        .client
        .enqueue(reindex(3))
        .debounce(debounce)
        .await
        .unwrap();
    match next_pending {
        Some(pending) => {
            assert_eq!(next_one.status, EnqueueStatus::Debounced);
            assert_eq!(next_one.id, pending);
        }
        None => assert_eq!(next_one.status, EnqueueStatus::Created),
    }
    assert_ne!(next_one.id, first.id);
    worker.stop().await;
}

pub(crate) async fn unique_and_debounce_refuse_bad_keys_and_times(b: Backend) {
    let c = &b.client;
    let empty = c
        .enqueue(reindex(1))
        .unique(Unique::new("", Duration::from_secs(1)))
        .await;
    assert!(
        matches!(empty, Err(Error::InvalidConfig { .. })),
        "{empty:?}"
    );
    let zero = c
        .enqueue(reindex(1))
        .unique(Unique::new("k", Duration::ZERO))
        .await;
    assert!(matches!(zero, Err(Error::InvalidConfig { .. })), "{zero:?}");
    let timed = c
        .enqueue(reindex(1))
        .after(Duration::from_secs(1))
        .debounce(Debounce::new("k", Duration::from_secs(1)))
        .await;
    assert!(
        matches!(timed, Err(Error::InvalidConfig { .. })),
        "{timed:?}"
    );
    let counts = c.topic::<Reindex>().counts().await.unwrap();
    assert_eq!(counts.scheduled + counts.ready, 0, "nothing was stored");
}
