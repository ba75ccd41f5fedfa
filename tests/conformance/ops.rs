//! The operations API: registries of topics and workers, jobs by state paged by cursor, one job with
//! why it is not running, pause and resume, run now, dead letters in bulk by reason, history.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use postpone::ops::{DeadFilter, JobQuery, PageState};
use postpone::{Error, Job, JobContext, JobError, JobState, Worker};
use serde::{Deserialize, Serialize};

use super::*;

/// A topic of three partitions, so that listings merge partitions.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "ops.parts", partitions = 3, retry = ["0", "0"])]
pub(crate) struct Parted {
    pub n: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "ops.mail", retry = ["0", "0"])]
pub(crate) struct Mail {
    pub n: u64,
    pub fail: Option<String>,
}

/// Pages through a whole listing; returns the ids in order, failing on a repeated id.
async fn page_all(b: &Backend, topic: &str, query: JobQuery) -> Vec<(i64, String)> {
    let ops = b.client.ops();
    let mut seen = Vec::new();
    let mut q = query;
    for _ in 0..10_000 {
        let page = ops.jobs(topic, &q).await.unwrap();
        seen.extend(
            page.jobs
                .iter()
                .map(|j| (j.at.timestamp_millis(), j.id.clone())),
        );
        match page.next {
            Some(c) => q = q.cursor(c.to_string().parse().unwrap()),
            None => return seen,
        }
    }
    panic!("the listing never ended");
}

pub(crate) async fn ops_registries_list_topics_and_live_workers(b: Backend) {
    let ops = b.client.ops();
    b.client
        .enqueue(Parted { n: 1 })
        .id("p:1")
        .after(Duration::from_secs(600))
        .await
        .unwrap();
    let handler = |_: Mail, _: JobContext| async { Ok::<(), JobError>(()) };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .concurrency(7)
            .build()
            .unwrap(),
    );
    let workers = eventually("the worker in the registry", || {
        let ops = ops.clone();
        async move { Some(ops.workers().await.unwrap()).filter(|w| !w.is_empty()) }
    })
    .await;
    let topics = ops.topics().await.unwrap();
    let names: Vec<_> = topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    assert_eq!(
        names,
        [("ops.mail", 1), ("ops.parts", 3)],
        "enqueued-to and served topics"
    );
    assert_eq!(topics[1].counts.scheduled, 1);
    assert_eq!(workers.len(), 1);
    let w = &workers[0];
    assert_eq!(w.pid, std::process::id());
    assert_eq!(w.concurrency, 7);
    assert_eq!(
        w.version.split('.').count(),
        3,
        "postpone's version: {}",
        w.version
    );
    assert!(w.serves("ops.mail") && !w.serves("ops.parts"));
    assert!(w.last_beat <= w.expires_at);
    worker.stop().await;
    assert!(
        ops.workers().await.unwrap().is_empty(),
        "a worker that stops leaves the registry at once"
    );
    let err = ops.topic("ops.never").await.unwrap_err();
    assert!(matches!(err, Error::TopicNotFound { .. }), "{err}");
}

pub(crate) async fn ops_pages_are_complete_and_stable_while_jobs_change(b: Backend) {
    let ops = b.client.ops();
    let now = store_now(&b.client).await;
    let base = chrono::DateTime::from_timestamp_millis(now + 3_600_000).unwrap();
    // 60 jobs over 20 due times (ties of three), in three partitions.
    let items: Vec<_> = (0..60u64)
        .map(|n| {
            postpone::EnqueueItem::new(Parted { n })
                .id(format!("job:{n:02}"))
                .at(base + chrono::Duration::milliseconds((n % 20) as i64))
        })
        .collect();
    b.client.enqueue_many(items).await.unwrap();

    // Oldest first, 7 a page; between pages a later job is added and a seen one cancelled.
    let mut q = JobQuery::new(PageState::Scheduled).limit(7);
    let mut seen: Vec<(i64, String)> = Vec::new();
    let mut added = 0;
    loop {
        let page = ops.jobs("ops.parts", &q).await.unwrap();
        assert!(page.jobs.len() <= 7);
        seen.extend(
            page.jobs
                .iter()
                .map(|j| (j.at.timestamp_millis(), j.id.clone())),
        );
        if let Some(j) = page.jobs.first() {
            ops.cancel("ops.parts", &j.id).await.unwrap();
            b.client
                .enqueue(Parted { n: 1000 + added })
                .id(format!("late:{added}"))
                .at(base + chrono::Duration::hours(1))
                .await
                .unwrap();
            added += 1;
        }
        match page.next {
            Some(c) => q = q.cursor(c),
            None => break,
        }
    }
    let ids: Vec<&str> = seen.iter().map(|(_, id)| id.as_str()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "no job twice: {ids:?}");
    for n in 0..60 {
        assert!(
            unique.contains(format!("job:{n:02}").as_str()),
            "job:{n:02}"
        );
    }
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "in (due time, id) order across partitions");

    // Newest first: the same jobs still scheduled, in reverse.
    let newest = page_all(
        &b,
        "ops.parts",
        JobQuery::new(PageState::Scheduled).newest_first().limit(9),
    )
    .await;
    let oldest = page_all(
        &b,
        "ops.parts",
        JobQuery::new(PageState::Scheduled).limit(9),
    )
    .await;
    let mut reversed = newest.clone();
    reversed.reverse();
    assert_eq!(reversed, oldest);
    assert_eq!(
        oldest.len() as u64,
        b.client.topic::<Parted>().counts().await.unwrap().scheduled
    );

    assert!(matches!(
        "bogus".parse::<postpone::ops::Cursor>(),
        Err(Error::InvalidCursor { .. })
    ));
}

pub(crate) async fn ops_search_by_id_prefix_finds_every_match(b: Backend) {
    let ops = b.client.ops();
    let mut items = Vec::new();
    for n in 0..40u64 {
        let id = if n % 2 == 0 {
            format!("order:{n}")
        } else {
            format!("cart:{n}")
        };
        items.push(
            postpone::EnqueueItem::new(Parted { n })
                .id(id)
                .after(Duration::from_secs(600)),
        );
    }
    // An id with glob characters is matched literally.
    items.push(
        postpone::EnqueueItem::new(Parted { n: 99 })
            .id("order:*[x]")
            .after(Duration::from_secs(600)),
    );
    b.client.enqueue_many(items).await.unwrap();
    let mut found = BTreeSet::new();
    let mut q = JobQuery::new(PageState::Scheduled)
        .id_prefix("order:1")
        .limit(3);
    for _ in 0..1000 {
        let page = ops.jobs("ops.parts", &q).await.unwrap();
        assert!(page.jobs.len() <= 3, "a page holds at most its limit");
        for j in page.jobs {
            assert!(found.insert(j.id.clone()), "{} twice", j.id);
        }
        match page.next {
            Some(c) => q = q.cursor(c),
            None => break,
        }
    }
    let expected: BTreeSet<String> = ["order:10", "order:12", "order:14", "order:16", "order:18"]
        .map(String::from)
        .into();
    assert_eq!(found, expected);
    let star = ops
        .jobs(
            "ops.parts",
            &JobQuery::new(PageState::Scheduled).id_prefix("order:*"),
        )
        .await
        .unwrap();
    let star: Vec<_> = star.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(star, ["order:*[x]"], "glob characters are literal");
}

pub(crate) async fn ops_job_detail_says_why_it_is_not_running(b: Backend) {
    let ops = b.client.ops();
    b.client
        .enqueue(Mail { n: 1, fail: None })
        .id("m:later")
        .after(Duration::from_secs(600))
        .await
        .unwrap();
    let job = ops.job("ops.mail", "m:later").await.unwrap().unwrap();
    assert!(
        job.why.starts_with("due in 9m 5") || job.why.starts_with("due in 10m ("),
        "{}",
        job.why
    );
    assert!(matches!(job.state, JobState::Scheduled { .. }));
    assert_eq!(job.payload, serde_json::json!({"n": 1, "fail": null}));
    assert_eq!(job.attempt, 1);
    // On a Redis Cluster, where it is: the master serving its slot.
    let cluster = b.client.backend_name() == "redis-cluster";
    assert_eq!(job.node.is_some(), cluster, "{:?}", job.node);
    assert_eq!(job.why.contains(" on node "), cluster, "{}", job.why);

    ops.pause("ops.mail").await.unwrap();
    let job = ops.job("ops.mail", "m:later").await.unwrap().unwrap();
    assert!(job.paused && job.why.contains("is paused"), "{}", job.why);
    ops.resume("ops.mail").await.unwrap();

    // Due now with no worker alive.
    let at = chrono::Utc::now() + chrono::Duration::hours(2);
    let moved = ops.reschedule("ops.mail", "m:later", at).await.unwrap();
    assert_eq!(moved.timestamp_millis(), at.timestamp_millis());
    ops.run_now("ops.mail", "m:later").await.unwrap();
    let job = ops.job("ops.mail", "m:later").await.unwrap().unwrap();
    assert!(
        job.why.contains("no live worker serves topic ops.mail"),
        "{}",
        job.why
    );

    // Running: leased to the worker, which the registry names.
    let (tx, mut rx) = events();
    let (release_tx, release_rx) = tokio::sync::watch::channel(false);
    let handler = move |m: Mail, _: JobContext| {
        let (tx, mut release) = (tx.clone(), release_rx.clone());
        async move {
            let _ = tx.send(m.n);
            let _ = release.wait_for(|r| *r).await;
            match m.fail {
                Some(reason) => Err(JobError::fail(reason)),
                None => Ok(()),
            }
        }
    };
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    assert_eq!(next(&mut rx).await, 1);
    let job = ops.job("ops.mail", "m:later").await.unwrap().unwrap();
    let workers = ops.workers().await.unwrap();
    assert_eq!(job.worker.as_deref(), Some(workers[0].id.as_str()));
    assert!(
        job.why
            .starts_with(&format!("running: leased to worker {}", workers[0].id)),
        "{}",
        job.why
    );
    assert_eq!(
        job.max_attempts,
        Some(1),
        "the topic's schedule, as its worker declares it"
    );

    // Dead: the reason and the hook.
    b.client
        .enqueue(Mail {
            n: 2,
            fail: Some("mailbox <b>full</b>".into()),
        })
        .id("m:dead")
        .await
        .unwrap();
    release_tx.send_replace(true);
    let dead = eventually("the job to die", || {
        let ops = ops.clone();
        async move {
            ops.job("ops.mail", "m:dead")
                .await
                .unwrap()
                .filter(|j| matches!(j.state, JobState::Dead { .. }))
        }
    })
    .await;
    assert!(dead.why.starts_with("dead since"), "{}", dead.why);
    assert!(dead.why.contains("mailbox <b>full</b>"), "{}", dead.why);
    assert_eq!(dead.errors.len(), 1);
    worker.stop().await;
}

pub(crate) async fn ops_pause_holds_across_workers_until_resumed(b: Backend) {
    let ops = b.client.ops();
    let (tx, mut rx) = events();
    let handler = move |m: Mail, _: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(m.n);
            Ok::<(), JobError>(())
        }
    };
    let build = || {
        Worker::builder(&b.client)
            .handle(handler.clone())
            .poll_interval(Duration::from_millis(50))
            .build()
            .unwrap()
    };
    let (w1, w2) = (spawn(build()), spawn(build()));
    // Both workers are up before the pause (their registration is part of start-up).
    eventually("both workers in the registry", || {
        let ops = ops.clone();
        async move { (ops.workers().await.unwrap().len() == 2).then_some(()) }
    })
    .await;
    ops.pause("ops.mail").await.unwrap();
    for n in 0..5 {
        b.client.enqueue(Mail { n, fail: None }).await.unwrap();
    }
    // Quiet for many poll intervals of both workers: nothing is claimed while paused.
    none_within(&mut rx, Duration::from_millis(500)).await;
    let counts = b.client.topic::<Mail>().counts().await.unwrap();
    assert!(counts.paused);
    assert_eq!(counts.ready, 5, "enqueues are still accepted");
    ops.resume("ops.mail").await.unwrap();
    let mut got: Vec<u64> = Vec::new();
    for _ in 0..5 {
        got.push(next(&mut rx).await);
    }
    got.sort();
    assert_eq!(got, [0, 1, 2, 3, 4]);
    assert!(!b.client.topic::<Mail>().counts().await.unwrap().paused);
    w1.stop().await;
    w2.stop().await;
}

pub(crate) async fn ops_dead_letters_requeue_and_purge_by_reason(b: Backend) {
    let ops = b.client.ops();
    let (tx, mut rx) = events();
    let handler = move |m: Mail, ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((m.n, ctx.attempt()));
            match (&m.fail, ctx.previous_errors().is_empty()) {
                (Some(reason), true) => Err(JobError::fail(reason.clone())),
                _ => Ok(()),
            }
        }
    };
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    for n in 0..6u64 {
        let reason = if n % 2 == 0 {
            "smtp 550 rejected"
        } else {
            "timeout after 30s"
        };
        b.client
            .enqueue(Mail {
                n,
                fail: Some(reason.into()),
            })
            .id(format!("m:{n}"))
            .await
            .unwrap();
    }
    for _ in 0..6 {
        next(&mut rx).await;
    }
    let topic = b.client.topic::<Mail>();
    eventually("six dead letters", || {
        let topic = topic.clone();
        async move { (topic.counts().await.unwrap().dead == 6).then_some(()) }
    })
    .await;
    let mut calls = 0;
    let requeued = ops
        .requeue_dead(
            "ops.mail",
            None,
            &DeadFilter::reason_contains("timeout"),
            |_| calls += 1,
        )
        .await
        .unwrap();
    assert_eq!(
        (requeued.matched, requeued.done, requeued.skipped),
        (3, 3, 0)
    );
    assert!(calls >= 1, "progress is reported");
    let mut again: HashMap<u64, u32> = HashMap::new();
    for _ in 0..3 {
        let (n, attempt) = next(&mut rx).await;
        again.insert(n, attempt);
    }
    assert_eq!(
        again,
        HashMap::from([(1, 1), (3, 1), (5, 1)]),
        "requeued with attempts reset"
    );
    // One by id: requeue m:0 (it runs again), purge m:2.
    let one = ops
        .requeue_dead("ops.mail", Some("m:0"), &DeadFilter::all(), |_| {})
        .await
        .unwrap();
    assert_eq!(one.done, 1);
    assert_eq!(next(&mut rx).await, (0, 1));
    let m2 = ops
        .jobs("ops.mail", &JobQuery::new(PageState::Dead).id_prefix("m:2"))
        .await
        .unwrap();
    let death = m2.jobs[0].death.expect("a dead letter's death number");
    ops.purge_death("ops.mail", "m:2", death).await.unwrap();
    let err = ops
        .purge_dead("ops.mail", Some("m:2"), &DeadFilter::all(), |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, Error::JobNotFound { .. }), "{err}");
    let err = ops
        .requeue_death("ops.mail", "m:2", death)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::JobNotFound { .. }), "{err}");
    let purged = ops
        .purge_dead(
            "ops.mail",
            None,
            &DeadFilter::reason_contains("550"),
            |_| {},
        )
        .await
        .unwrap();
    assert_eq!(purged.done, 1, "m:4 (m:0 was requeued and m:2 purged)");
    assert_eq!(topic.counts().await.unwrap().dead, 0);
    worker.stop().await;
}

pub(crate) async fn ops_history_counts_each_minute(b: Backend) {
    let ops = b.client.ops();
    let (tx, mut rx) = events();
    let handler = move |m: Mail, ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(m.n);
            match (m.n, ctx.attempt()) {
                (0, _) => Ok(()),
                (1, 1) => Err(JobError::msg("once")),
                (1, _) => Ok(()),
                _ => Err(JobError::fail("no")),
            }
        }
    };
    // Job 1 may run twice (its own schedule): its first failure is a retry.
    let twice = postpone::RetrySchedule::from_millis(&[0, 0, 0]).unwrap();
    for n in 0..3 {
        let job = b.client.enqueue(Mail { n, fail: None });
        match n {
            1 => job.retry(twice.clone()).await.unwrap(),
            _ => job.await.unwrap(),
        };
    }
    let worker = spawn(Worker::builder(&b.client).handle(handler).build().unwrap());
    for _ in 0..4 {
        next(&mut rx).await;
    }
    let topic = b.client.topic::<Mail>();
    let totals = eventually("the history of the run", || {
        let ops = ops.clone();
        async move {
            let h = ops.history("ops.mail", 60).await.unwrap();
            let sum = h.iter().fold([0u64; 5], |mut s, m| {
                s[0] += m.enqueued;
                s[1] += m.processed;
                s[2] += m.retried;
                s[3] += m.failed;
                s[4] += m.dead;
                s
            });
            (sum[1] == 2 && sum[4] == 1).then_some(sum)
        }
    })
    .await;
    assert_eq!(
        totals,
        [3, 2, 1, 1, 1],
        "enqueued, processed, retried, failed, dead"
    );
    let c = topic.counts().await.unwrap();
    assert_eq!(
        (c.processed, c.retried, c.failed, c.dead_total),
        (2, 1, 1, 1)
    );
    worker.stop().await;
}
