//! The key layout: one hash tag per topic, nothing left per finished job, hostile ids, namespaces.

mod support;

use postpone::store::{
    CancelOutcome, DeadLetterStore, DeadSelection, Due, EnqueueOutcome, Finish, FinishItem,
    FinishOutcome, JobStore, OpsStore, PageQuery, PageState, WorkerStore,
};
use support::redis_server::RedisServer;
use support::store::*;

#[tokio::test]
async fn keys_stay_in_the_topic_slot_and_finished_jobs_leave_nothing() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs: Vec<_> = (0..50)
        .map(|i| job(&format!("order:{i}"), Due::In(0)))
        .collect();
    s.enqueue(T, jobs).await.unwrap();
    s.enqueue(T, vec![job("later", Due::In(3_600_000))])
        .await
        .unwrap();
    let batch = s.claim(T, claim(20)).await.unwrap();
    assert_eq!(batch.jobs.len(), 20);
    // Marked while running; its Done still counts as processed.
    assert_eq!(
        s.cancel(T, &batch.jobs[0].id).await.unwrap(),
        CancelOutcome::Marked
    );
    let prefix = "postpone:{shop:orders.close}:";
    for key in server.keys() {
        assert!(
            key.starts_with(prefix),
            "{key} is outside the topic's hash tag"
        );
    }
    // Finish everything: done, retried then done, dead then purged, cancelled.
    let mut items: Vec<_> = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    items[1] = FinishItem::new(
        batch.jobs[1].id.clone(),
        batch.jobs[1].token,
        Finish::Retry {
            record: b"again".to_vec(),
            delay_ms: 0,
            counted: true,
        },
    );
    items[2] = FinishItem::new(
        batch.jobs[2].id.clone(),
        batch.jobs[2].token,
        Finish::Dead {
            record: b"dead".to_vec(),
            reason: "boom".into(),
        },
    );
    s.finish(T, items).await.unwrap();
    loop {
        let batch = s.claim(T, claim(100)).await.unwrap();
        if batch.jobs.is_empty() {
            break;
        }
        let items = batch
            .jobs
            .iter()
            .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
            .collect();
        s.finish(T, items).await.unwrap();
    }
    assert_eq!(s.cancel(T, "later").await.unwrap(), CancelOutcome::Removed);
    s.dead_purge(T, DeadSelection::All).await.unwrap();
    // A purged death still reaches its hook: its record stays until the hook is acknowledged.
    let hooks: Vec<_> = s
        .dead_claim(T, 10, 60_000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.death())
        .collect();
    assert_eq!(hooks.len(), 1);
    s.dead_ack(T, &hooks).await.unwrap();
    // What is left: the counters, the per-minute history (bounded: one field per minute of the last
    // 25 hours), and the records of claims, which expire with their lease.
    let (claims, mut rest): (Vec<_>, Vec<_>) = server
        .keys()
        .into_iter()
        .partition(|k| k.starts_with(&format!("{prefix}claim:")));
    rest.sort();
    assert_eq!(
        rest,
        vec![format!("{prefix}history"), format!("{prefix}stats")]
    );
    for key in claims {
        let ttl = server.cli(&["PTTL", &key]).unwrap();
        assert!(
            matches!(ttl, redis::Value::Int(ms) if ms > 0 && ms <= 30_000),
            "{key}: {ttl:?}"
        );
    }
    let c = s.counts(T).await.unwrap();
    assert_eq!(
        (c.processed, c.retried, c.dead_total, c.failed, c.cancelled),
        (49, 1, 1, 1, 1)
    );
}

#[tokio::test]
async fn hostile_ids_are_stored_and_found() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let ids = [
        "{}",
        "{shop:other}",
        ":",
        "a:b:c",
        "*",
        "?[a]",
        "with spaces",
        "zoé 🦀 注文",
        "\\",
        "'\"",
        &"x".repeat(512),
    ];
    let jobs = ids.iter().map(|id| job(id, Due::In(0))).collect();
    let out = s.enqueue(T, jobs).await.unwrap();
    assert!(
        out.iter()
            .all(|o| matches!(o, EnqueueOutcome::Created { .. })),
        "{out:?}"
    );
    for id in ids {
        let found = s
            .job(T, id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id} not found"));
        assert_eq!(found.record, job(id, Due::In(0)).record);
    }
    let batch = s.claim(T, claim(100)).await.unwrap();
    let mut got: Vec<_> = batch.jobs.iter().map(|j| j.id.as_str()).collect();
    let mut want = ids.to_vec();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
    for key in server.keys() {
        assert!(key.starts_with("postpone:{shop:orders.close}:"), "{key}");
    }
    let items = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    assert!(s
        .finish(T, items)
        .await
        .unwrap()
        .iter()
        .all(|o| *o == FinishOutcome::Applied));
}

#[tokio::test]
async fn namespaces_do_not_see_each_other() {
    let server = RedisServer::start();
    let a = store(&server, "a").await;
    let b = store(&server, "b").await;
    a.enqueue(T, vec![job("same", Due::In(0))]).await.unwrap();
    assert!(b.job(T, "same").await.unwrap().is_none());
    assert!(b.claim(T, claim(10)).await.unwrap().jobs.is_empty());
    let out = b.enqueue(T, vec![job("same", Due::In(0))]).await.unwrap();
    assert!(matches!(out[0], EnqueueOutcome::Created { .. }));
    assert_eq!(a.counts(T).await.unwrap().ready, 1);
    assert_eq!(a.claim(T, claim(10)).await.unwrap().jobs.len(), 1);
    assert_eq!(b.counts(T).await.unwrap().ready, 1);
}

fn encoding(server: &RedisServer, key: &str) -> String {
    match server.cli(&["OBJECT", "ENCODING", key]).unwrap() {
        redis::Value::BulkString(b) => String::from_utf8(b).unwrap(),
        redis::Value::SimpleString(s) => s,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn active_and_leases_stay_hashed_and_go_with_the_last_lease() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs: Vec<_> = (0..3).map(|i| job(&format!("j{i}"), Due::In(0))).collect();
    s.enqueue(T, jobs).await.unwrap();
    let batch = s.claim(T, claim(2)).await.unwrap();
    let prefix = "postpone:{shop:orders.close}:";
    // Three small entries would be a listpack; the marker keeps both keys hashed.
    assert_eq!(encoding(&server, &format!("{prefix}active")), "skiplist");
    assert_eq!(encoding(&server, &format!("{prefix}leases")), "hashtable");
    let c = s.counts(T).await.unwrap();
    assert_eq!((c.active, c.ready), (2, 1), "the marker is not counted");
    let next = s.claim(T, claim(0)).await.unwrap();
    assert!(next
        .next_lease_deadline_ms
        .is_some_and(|d| d < i64::MAX / 2));
    let items = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    s.finish(T, items).await.unwrap();
    assert!(
        !server
            .keys()
            .iter()
            .any(|k| k.ends_with(":active") || k.ends_with(":leases")),
        "{:?}",
        server.keys()
    );
    assert_eq!(
        s.claim(T, claim(0)).await.unwrap().next_lease_deadline_ms,
        None
    );
    assert_eq!(s.counts(T).await.unwrap().active, 0);
}

#[tokio::test]
async fn unique_and_debounce_keys_live_in_the_topic_slot_and_go_once_they_no_longer_hold() {
    use postpone::store::{Keyed, KeyedJob, UniqueStates};
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let unique = Keyed::Unique {
        key: "product:42".into(),
        window_ms: 300,
        states: UniqueStates::ALL,
    };
    let debounce = Keyed::Debounce {
        key: "product:7".into(),
        quiet_ms: 0,
        max_wait_ms: 0,
        replace: false,
    };
    let jobs = vec![
        KeyedJob::new(job("a", Due::In(0)), Some(unique)),
        KeyedJob::new(job("b", Due::In(0)), Some(debounce)),
    ];
    s.enqueue_keyed(T, jobs).await.unwrap();
    let prefix = "postpone:{shop:orders.close}:";
    let keys = server.keys();
    for set in ["unique", "unique_until", "debounce", "debounce_at"] {
        let key = format!("{prefix}{set}");
        assert!(keys.contains(&key), "{key} missing: {keys:?}");
    }
    let batch = s.claim(T, claim(10)).await.unwrap();
    let done: Vec<_> = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    s.finish(T, done).await.unwrap();
    // Past the window: the next keyed enqueue drops both keys (its own job has no key).
    let now = s.now_ms().await.unwrap();
    while s.now_ms().await.unwrap() <= now + 300 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    s.enqueue_keyed(T, vec![KeyedJob::new(job("c", Due::In(0)), None)])
        .await
        .unwrap();
    s.cancel(T, "c").await.unwrap();
    let left: Vec<_> = server
        .keys()
        .into_iter()
        .filter(|k| {
            ["unique", "unique_until", "debounce", "debounce_at"]
                .iter()
                .any(|s| k.ends_with(&format!(":{s}")))
        })
        .collect();
    assert!(left.is_empty(), "per-key state left: {left:?}");
}

/// The reply of `args` on `server`, as a `T`.
fn cli_as<T: redis::FromRedisValue>(server: &RedisServer, args: &[&str]) -> T {
    redis::FromRedisValue::from_redis_value(server.cli(args).unwrap()).unwrap()
}

/// `text`'s SHA-1 in hex, as the scripts name a key's state by it (Redis's own `redis.sha1hex`).
fn sha1_hex(server: &RedisServer, text: &str) -> String {
    cli_as(
        server,
        &["EVAL", "return redis.sha1hex(ARGV[1])", "0", text],
    )
}

#[tokio::test]
async fn fair_keys_live_in_the_topic_slot_and_go_once_their_jobs_end() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let keyed = |id: &str, key: &str| job(id, Due::In(0)).with_key(Some(key.to_owned()));
    // Key "big" has 6 due jobs, "small" one, "later" one in an hour (cancelled below).
    let mut jobs: Vec<_> = (0..6).map(|i| keyed(&format!("big:{i}"), "big")).collect();
    jobs.push(keyed("small:0", "small"));
    jobs.push(job("later:0", Due::In(3_600_000)).with_key(Some("later".into())));
    s.enqueue(T, jobs).await.unwrap();
    let prefix = "postpone:{shop:orders.close}:";
    let keys = server.keys();
    for set in ["fready", "fwait"] {
        let key = format!("{prefix}{set}");
        assert!(keys.contains(&key), "{key} missing: {keys:?}");
    }
    // A queue for the key with more than one job, named by the key's SHA-1; the keys with one job
    // have it in `fone` (key's SHA-1 -> id).
    let queues: Vec<_> = keys
        .iter()
        .filter(|k| k.starts_with(&format!("{prefix}fq:")))
        .collect();
    assert_eq!(
        queues,
        [&format!("{prefix}fq:{}", sha1_hex(&server, "big"))],
        "{keys:?}"
    );
    let mut ones: Vec<(String, String)> = cli_as(&server, &["HGETALL", &format!("{prefix}fone")]);
    ones.sort_unstable();
    let mut want = vec![
        (sha1_hex(&server, "small"), "small:0".to_owned()),
        (sha1_hex(&server, "later"), "later:0".to_owned()),
    ];
    want.sort_unstable();
    assert_eq!(ones, want);
    // Round-robin: the first claim of two takes one job of each due key.
    let first = s.claim(T, claim(2)).await.unwrap();
    let mut ids: Vec<_> = first.jobs.iter().map(|j| j.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["big:0", "small:0"]);
    assert_eq!(
        s.cancel(T, "later:0").await.unwrap(),
        CancelOutcome::Removed
    );
    // The rest, retrying one of them once; then everything ends.
    let mut claimed = first.jobs;
    let mut retried = false;
    while !claimed.is_empty() {
        let items: Vec<_> = claimed
            .iter()
            .map(|j| {
                let finish = if j.id == "big:3" && !retried {
                    retried = true;
                    Finish::Retry {
                        record: b"again".to_vec(),
                        delay_ms: 0,
                        counted: true,
                    }
                } else {
                    Finish::Done
                };
                FinishItem::new(j.id.clone(), j.token, finish)
            })
            .collect();
        s.finish(T, items).await.unwrap();
        claimed = s.claim(T, claim(2)).await.unwrap().jobs;
    }
    assert!(retried);
    assert_eq!(s.counts(T).await.unwrap().processed, 7);
    for key in server.keys() {
        assert!(
            key.starts_with(prefix),
            "{key} is outside the topic's hash tag"
        );
    }
    // A claim that finds a due job after the last keyed one ended clears what keys left behind.
    s.enqueue(T, vec![job("plain", Due::In(0))]).await.unwrap();
    let last = s.claim(T, claim(2)).await.unwrap();
    assert_eq!(last.jobs.len(), 1);
    let left = server.fairness_keys();
    assert!(left.is_empty(), "per-key state left: {left:?}");
}

// A key taking from the head of `due` (alone) moves past its jobs' queue entries without removing them:
// `fskip` counts them, and its zset keeps them until a write to it (here a retry's refile) removes them
// first, or until no entry is left past them (then the zset goes whole, with its count).
#[tokio::test]
async fn a_key_taking_from_the_head_of_due_counts_the_entries_it_passed_until_a_write() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs = (0..10)
        .map(|i| job(&format!("f{i}"), Due::In(0)).with_key(Some("flood".to_owned())))
        .collect();
    s.enqueue(T, jobs).await.unwrap();
    let prefix = "postpone:{shop:orders.close}:";
    let name = sha1_hex(&server, "flood");
    let (queue, skip, stats) = (
        format!("{prefix}fq:{name}"),
        format!("{prefix}fskip"),
        format!("{prefix}stats"),
    );
    let card = || -> i64 { cli_as(&server, &["ZCARD", &queue]) };
    let passed = || -> Option<i64> { cli_as(&server, &["HGET", &skip, &name]) };
    let flag = || -> Option<String> { cli_as(&server, &["HGET", &stats, "fskip"]) };
    let first = s.claim(T, claim(4)).await.unwrap().jobs;
    assert_eq!(first.len(), 4);
    assert_eq!((card(), passed()), (10, Some(4)), "four passed, kept");
    assert_eq!(
        flag().as_deref(),
        Some("1"),
        "`fskip` in stats: some key has a count"
    );
    let next = s.claim(T, claim(2)).await.unwrap().jobs;
    assert_eq!(next.len(), 2);
    assert_eq!((card(), passed()), (10, Some(6)), "six passed, kept");
    // f0 retries, due now: its entry is among those passed, so they go before it is filed again.
    let f0 = &first[0];
    s.finish(
        T,
        vec![FinishItem::new(
            f0.id.clone(),
            f0.token,
            Finish::Retry {
                record: f0.record.clone(),
                delay_ms: 0,
                counted: true,
            },
        )],
    )
    .await
    .unwrap();
    assert_eq!((card(), passed()), (5, None), "f6 to f9, and f0");
    assert_eq!(flag(), None, "no key has a count");
    let rest = s.claim(T, claim(10)).await.unwrap().jobs;
    let ids: Vec<_> = rest.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["f6", "f7", "f8", "f9", "f0"]);
    let left = server.fairness_keys();
    assert!(left.is_empty(), "nothing past them: all gone ({left:?})");
    // A cancel of the last job past the entries passed takes the queue and its count.
    let jobs = (0..3)
        .map(|i| job(&format!("c{i}"), Due::In(0)).with_key(Some("flood".to_owned())))
        .collect();
    s.enqueue(T, jobs).await.unwrap();
    assert_eq!(s.claim(T, claim(2)).await.unwrap().jobs.len(), 2);
    assert_eq!((card(), passed()), (3, Some(2)));
    assert_eq!(flag().as_deref(), Some("1"));
    assert_eq!(s.cancel(T, "c2").await.unwrap(), CancelOutcome::Removed);
    let left = server.fairness_keys();
    assert!(left.is_empty(), "the cancel took them: {left:?}");
    assert_eq!(flag(), None);
}

#[tokio::test]
async fn a_dead_keyed_jobs_key_stays_with_its_death_until_its_record_goes() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let keyed = job("order:1", Due::In(0)).with_key(Some("acme".into()));
    s.enqueue(T, vec![keyed]).await.unwrap();
    let batch = s.claim(T, claim(1)).await.unwrap();
    let dead = Finish::Dead {
        record: b"dead".to_vec(),
        reason: "boom".into(),
    };
    let job = &batch.jobs[0];
    s.finish(T, vec![FinishItem::new(job.id.clone(), job.token, dead)])
        .await
        .unwrap();
    let dead_keys = "postpone:{shop:orders.close}:dead_keys";
    assert!(
        server.keys().iter().any(|k| k == dead_keys),
        "{:?}",
        server.keys()
    );
    // Purged, the death is listed no more, but its hook is pending: record and key stay.
    assert_eq!(s.dead_purge(T, DeadSelection::All).await.unwrap(), 1);
    assert!(
        server.keys().iter().any(|k| k == dead_keys),
        "{:?}",
        server.keys()
    );
    // Its hook succeeded: both go.
    let pending = s.dead_claim(T, 10, 60_000).await.unwrap();
    let deaths: Vec<_> = pending.iter().map(|e| e.death()).collect();
    assert_eq!(deaths.len(), 1);
    s.dead_ack(T, &deaths).await.unwrap();
    let left: Vec<_> = server
        .keys()
        .into_iter()
        .filter(|k| k.contains("dead"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The members of `active` scored +inf: the markers of prelude_core.lua.
fn active_markers(server: &RedisServer) -> Vec<String> {
    cli_as(
        server,
        &[
            "ZRANGE",
            "postpone:{shop:orders.close}:active",
            "+inf",
            "+inf",
            "BYSCORE",
        ],
    )
}

// While a topic has keyed jobs, `active` holds a marker that says so (scored +inf, as the marker that
// keeps the key hashed): a batch enqueue without a key reads it with the ZMSCORE of `active` it makes
// anyway, and files its jobs under the key ''. The marker is never counted or listed as running, stays
// when the last lease goes, and goes with `fair` in stats, when a claim finds a job due and no key with
// anything left (here a job from before the first key, unfiled).
#[tokio::test]
async fn the_marker_of_keyed_jobs_lives_in_active_uncounted_until_no_key_is_left() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let prefix = "postpone:{shop:orders.close}:";
    let old = s
        .enqueue(T, vec![job("old", Due::In(1_000))])
        .await
        .unwrap();
    let old_at = match old[0] {
        EnqueueOutcome::Created { due_at_ms } => due_at_ms,
        ref other => panic!("{other:?}"),
    };
    assert!(active_markers(&server).is_empty(), "no keyed job yet");
    s.enqueue(
        T,
        vec![job("acme:0", Due::In(0)).with_key(Some("acme".into()))],
    )
    .await
    .unwrap();
    let markers = active_markers(&server);
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert!(markers[0].starts_with('\u{1}'), "{markers:?}");
    assert_eq!(s.counts(T).await.unwrap().active, 0, "the marker is no job");
    // A batch without keys (the lean batch enqueue) now files its jobs under the key '': a queue of
    // two, named by the SHA-1 of ''.
    s.enqueue(
        T,
        vec![job("plain:0", Due::In(0)), job("plain:1", Due::In(0))],
    )
    .await
    .unwrap();
    let unkeyed = format!("{prefix}fq:{}", sha1_hex(&server, ""));
    let queued: Vec<String> = cli_as(&server, &["ZRANGE", &unkeyed, "0", "-1"]);
    assert_eq!(queued, ["plain:0", "plain:1"]);
    // One job running: counted and listed alone, beside both markers.
    let one = s.claim(T, claim(1)).await.unwrap();
    assert_eq!(active_markers(&server).len(), 2);
    assert_eq!(s.counts(T).await.unwrap().active, 1);
    let running = s
        .page(T, &PageQuery::new(PageState::Running, 10))
        .await
        .unwrap();
    assert_eq!(running.len(), 1, "{running:?}");
    let mut newest = PageQuery::new(PageState::Running, 10);
    newest.newest_first = true;
    assert_eq!(s.page(T, &newest).await.unwrap(), running);
    let done = |jobs: &[postpone::store::ClaimedJob]| -> Vec<FinishItem> {
        jobs.iter()
            .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
            .collect()
    };
    s.finish(T, done(&one.jobs)).await.unwrap();
    // The last lease gone: `leases` goes, and `active` keeps the marker of keyed jobs alone.
    assert_eq!(active_markers(&server), markers);
    assert!(!server.keys().contains(&format!("{prefix}leases")));
    let rest = s.claim(T, claim(10)).await.unwrap();
    assert_eq!(rest.jobs.len(), 2, "{:?}", rest.jobs);
    s.finish(T, done(&rest.jobs)).await.unwrap();
    assert_eq!(active_markers(&server), markers, "`old` is not due yet");
    // `old` comes due with no key left: its claim clears the marker with `fair`.
    while cli_as::<Vec<i64>>(&server, &["TIME"])[0] * 1000 <= old_at {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let last = s.claim(T, claim(10)).await.unwrap();
    assert_eq!(last.jobs.len(), 1);
    assert_eq!(active_markers(&server).len(), 1, "only the lease's marker");
    s.finish(T, done(&last.jobs)).await.unwrap();
    assert!(
        !server.keys().contains(&format!("{prefix}active")),
        "{:?}",
        active_markers(&server)
    );
    assert_eq!(s.counts(T).await.unwrap().processed, 4);
}

// A batch enqueue whose keyed jobs are the topic's first (here beside a job with a priority, which takes
// the general script) files its jobs without a key under the key '' in the same call: the marker it read
// with the leases was not there yet, and its own keyed jobs set it.
#[tokio::test]
async fn a_batch_that_makes_its_topic_keyed_files_its_jobs_without_a_key_under_the_key_of_none() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let prefix = "postpone:{shop:orders.close}:";
    s.enqueue(
        T,
        vec![
            job("acme:0", Due::In(0)).with_key(Some("acme".into())),
            job("plain", Due::In(0)).priority(3),
        ],
    )
    .await
    .unwrap();
    assert_eq!(active_markers(&server).len(), 1);
    let filed: Option<String> = cli_as(
        &server,
        &["HGET", &format!("{prefix}fone"), &sha1_hex(&server, "")],
    );
    assert_eq!(filed.as_deref(), Some("plain"));
}
