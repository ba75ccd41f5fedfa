//! Script behaviour specific to Redis: leases over real time, big batches, extreme arguments, idle cost.

mod support;

use std::time::Duration;

use postpone::store::{
    ClaimRequest, DeadLetterStore, Due, EnqueueOutcome, Finish, FinishItem, FinishOutcome,
    JobStore, LeaseStatus, OpsStore, StoredState, TrimPolicy, WorkerStore,
};
use support::redis_server::RedisServer;
use support::store::*;

/// Enqueues job "a", due now, and claims it under a lease of `lease_ms`.
async fn enqueue_and_claim_one(
    s: &postpone::store::redis::RedisStore,
    lease_ms: u64,
) -> postpone::store::ClaimedJob {
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    s.claim(T, ClaimRequest::new(1, lease_ms, 100, 1))
        .await
        .unwrap()
        .jobs
        .remove(0)
}

#[tokio::test]
async fn leases_extend_and_expire() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let j = enqueue_and_claim_one(&s, 50).await;
    let lease = [(j.id.clone(), j.token)];
    assert_eq!(
        s.extend(T, &lease, 50).await.unwrap(),
        vec![LeaseStatus::Held]
    );
    assert_eq!(
        s.extend(T, &[(j.id.clone(), j.token + 1)], 50)
            .await
            .unwrap(),
        vec![LeaseStatus::Lost]
    );
    tokio::time::sleep(Duration::from_millis(120)).await;
    // Swept back to due (stall 1 <= limit 1), then claimed again under a new token.
    let b = s.claim(T, ClaimRequest::new(1, 50, 100, 1)).await.unwrap();
    assert_eq!((b.swept, b.jobs.len()), (1, 1));
    let again = &b.jobs[0];
    assert_ne!(again.token, j.token);
    assert_eq!(
        s.extend(T, &lease, 50).await.unwrap(),
        vec![LeaseStatus::Lost]
    );
    let late = s
        .finish(
            T,
            vec![FinishItem::new(j.id.clone(), j.token, Finish::Done)],
        )
        .await
        .unwrap();
    assert_eq!(late, vec![FinishOutcome::Stale]);
    tokio::time::sleep(Duration::from_millis(120)).await;
    // Second stall exceeds the limit: dead-lettered.
    let b = s.claim(T, ClaimRequest::new(1, 50, 100, 1)).await.unwrap();
    assert_eq!((b.swept, b.swept_dead, b.jobs.len()), (0, 1, 0));
    assert!(b.dead_pending);
    let found = s.job(T, "a").await.unwrap().unwrap();
    match found.state {
        StoredState::Dead {
            reason, delivered, ..
        } => {
            assert_eq!(reason, "stalled: lease expired 2 times");
            assert!(!delivered);
        }
        other => panic!("{other:?}"),
    }
    let c = s.counts(T).await.unwrap();
    assert_eq!(
        (c.stalled, c.dead_total, c.failed, c.dead, c.dead_pending),
        (1, 1, 0, 1, 1)
    );
}

#[tokio::test]
async fn a_finish_under_a_token_that_is_a_prefix_of_the_leases_or_extends_it_is_stale() {
    // The scripts compare tokens as text: a lease "<token>:<due>:<holder>" is held by a token only
    // when the whole token and then the colon start it.
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let j = enqueue_and_claim_one(&s, 30_000).await;
    assert!(j.token >= 10, "a token of one digit has no shorter prefix");
    for other in [j.token / 10, j.token * 10 + j.token % 10] {
        let out = s
            .finish(T, vec![FinishItem::new(j.id.clone(), other, Finish::Done)])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![FinishOutcome::Stale],
            "token {other} against {}",
            j.token
        );
    }
    let out = s
        .finish(
            T,
            vec![FinishItem::new(j.id.clone(), j.token, Finish::Done)],
        )
        .await
        .unwrap();
    assert_eq!(out, vec![FinishOutcome::Applied]);
}

#[tokio::test]
async fn big_batches_are_fine() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs: Vec<_> = (0..5000)
        .map(|i| job(&format!("j{i}"), Due::In(0)))
        .collect();
    let out = s.enqueue(T, jobs).await.unwrap();
    assert_eq!(out.len(), 5000);
    let batch = s
        .claim(T, ClaimRequest::new(5000, 60_000, 5000, 3))
        .await
        .unwrap();
    assert_eq!(batch.jobs.len(), 5000);
    assert!(batch.jobs.iter().all(|j| j.token == batch.jobs[0].token));
    let leases: Vec<_> = batch.jobs.iter().map(|j| (j.id.clone(), j.token)).collect();
    assert!(s
        .extend(T, &leases, 60_000)
        .await
        .unwrap()
        .iter()
        .all(|l| *l == LeaseStatus::Held));
    let items = batch
        .jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    let done = s.finish(T, items).await.unwrap();
    assert!(done.iter().all(|o| *o == FinishOutcome::Applied));
    assert_eq!(s.counts(T).await.unwrap().processed, 5000);
}

#[tokio::test]
async fn huge_offsets_and_limits_are_fine() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    let j = s.claim(T, claim(1)).await.unwrap().jobs.remove(0);
    let dead = Finish::Dead {
        record: b"r".to_vec(),
        reason: "x".into(),
    };
    s.finish(T, vec![FinishItem::new(j.id, j.token, dead)])
        .await
        .unwrap();
    assert!(s
        .dead_list(T, usize::MAX, usize::MAX)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.dead_list(T, 0, usize::MAX).await.unwrap().len(), 1);
    assert_eq!(
        s.dead_claim(T, usize::MAX, u64::MAX).await.unwrap().len(),
        1
    );
    s.enqueue(
        T,
        vec![job("b", Due::In(u64::MAX)), job("c", Due::At(i64::MAX))],
    )
    .await
    .unwrap();
    let c = s
        .claim(
            T,
            ClaimRequest::new(usize::MAX, u64::MAX, usize::MAX, u32::MAX),
        )
        .await
        .unwrap();
    assert!(c.jobs.is_empty());
    for policy in [
        TrimPolicy::new(Some(Duration::ZERO), Some(0)),
        TrimPolicy::new(Some(Duration::MAX), Some(u64::MAX)),
    ] {
        assert_eq!(s.dead_trim(T, policy, usize::MAX).await.unwrap(), 0);
    }
}

#[tokio::test]
async fn an_idle_claim_costs_six_commands() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("later", Due::In(3_600_000))])
        .await
        .unwrap();
    s.claim(T, claim(50)).await.unwrap(); // loads the script
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    for _ in 0..10 {
        let b = s.claim(T, claim(50)).await.unwrap();
        assert!(b.jobs.is_empty() && b.next_due_ms.is_some());
    }
    // FCALL + TIME + 3 ZRANGE (earliest lease, earliest due, dead pending) + HGET (whether ends of
    // jobs that batches follow wait for delivery): whether the topic is paused is read only when
    // something is due (and then with the ends flag, in one HMGET).
    assert_eq!(commands(&server), 10 * 6);
}

#[tokio::test]
async fn scripts_come_back_after_script_and_function_flush() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    server.cli(&["SCRIPT", "FLUSH"]).unwrap();
    server.cli(&["FUNCTION", "FLUSH"]).unwrap();
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    // Function not found: its library loaded again and the call made again, as a function.
    s.enqueue(T, vec![job("b", Due::In(0))]).await.unwrap();
    assert_eq!(s.claim(T, claim(10)).await.unwrap().jobs.len(), 2);
    let calls = calls_by_command(&server);
    let count = |name: &str| calls.get(name).copied().unwrap_or(0);
    assert_eq!(count("function|load"), 2, "{calls:?}");
    // Each script called twice: not found, then run.
    assert_eq!(count("fcall"), 4, "{calls:?}");
    assert_eq!(count("evalsha") + count("eval"), 0, "{calls:?}");
}

// A function library keeps its helpers from call to call: calls for two topics with keyed jobs,
// interleaved on one Redis, each file and claim their own topic's jobs under their own topic's keys
// (fair.lua's helpers, made for one topic, are made again for the other).
#[tokio::test]
async fn interleaved_topics_keep_their_own_keys_in_one_function_library() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let topics = [T, "orders.other"];
    for round in 0..3 {
        for topic in topics {
            let jobs = (0..2)
                .map(|k| {
                    job(&format!("{topic}-{round}-{k}"), Due::In(0))
                        .with_key(Some(format!("tenant {k}")))
                })
                .collect();
            s.enqueue(topic, jobs).await.unwrap();
        }
    }
    // Each topic's keys hold its own two keys' queues and its ready keys.
    for topic in topics {
        let tag = format!("postpone:{{shop:{topic}}}");
        let queues = server.cli(&["KEYS", &format!("{tag}:fq:*")]).unwrap();
        assert!(
            matches!(&queues, redis::Value::Array(q) if q.len() == 2),
            "{topic}: {queues:?}"
        );
        let ready = server.cli(&["ZCARD", &format!("{tag}:fready")]).unwrap();
        assert_eq!(ready, redis::Value::Int(2), "{topic}");
    }
    for round in 0..3 {
        for topic in topics {
            let claimed = s.claim(topic, claim(2)).await.unwrap().jobs;
            let ids: Vec<&str> = claimed.iter().map(|j| j.id.as_str()).collect();
            assert_eq!(ids.len(), 2, "round {round}, {topic}: {ids:?}");
            assert!(
                ids.iter().all(|id| id.starts_with(&format!("{topic}-"))),
                "round {round}, {topic}: {ids:?}"
            );
            // Round-robin between the topic's two keys: one job of each.
            let keys: Vec<char> = ids.iter().map(|id| id.chars().last().unwrap()).collect();
            assert!(keys.contains(&'0') && keys.contains(&'1'), "{ids:?}");
        }
    }
    for topic in topics {
        let c = s.counts(topic).await.unwrap();
        assert_eq!((c.ready, c.active), (0, 6), "{topic}");
    }
    let calls = calls_by_command(&server);
    assert!(calls.contains_key("fcall"), "{calls:?}");
}

// A Redis that runs no functions (before 7.0, or where FCALL and FUNCTION are renamed away) runs
// every script with EVALSHA.
#[tokio::test]
async fn a_redis_without_functions_runs_the_scripts_by_evalsha() {
    let server = RedisServer::builder()
        .arg("--rename-command")
        .arg("FCALL")
        .arg("")
        .arg("--rename-command")
        .arg("FUNCTION")
        .arg("")
        .start();
    let s = store(&server, "shop").await;
    scripts_run(&s).await;
    let calls = calls_by_command(&server);
    // Three enqueues, a claim, a finish and the counts, each by script.
    assert!(calls.get("evalsha").copied().unwrap_or(0) >= 6, "{calls:?}");
    // Operators are told, and a prune has nothing to do.
    let found = s.script_libraries(true).await.unwrap();
    assert_eq!(
        (
            found.servers,
            found.without_functions,
            found.current,
            found.deleted
        ),
        (1, 1, 0, 0)
    );
    let check = libraries_check(&s).await;
    assert!(check.found.contains("runs no functions"), "{check:?}");
}

/// Another build's library (an earlier release of postpone's, named as postpone names them) and a
/// library of the application's own.
const OTHER_BUILD: &str = "#!lua name=postpone_0123456789012345678901234567890123456789
redis.register_function('postpone_0123456789012345678901234567890123456789', function() return 1 end)";
const USERS_OWN: &str = "#!lua name=billing
redis.register_function('billing_total', function() return 1 end)";

// A keyed job's single enqueue, a key's first job in a topic whose other key is ready (fairness's quiet
// keys): the plain enqueue's calls, and its key's placement (fair.lua): the stats fields `vt` and `fair`
// in one HMGET, its place read in `fready` and `fwait`, one EXISTS of both `frun` and `fhold` (neither
// exists without limits per key), whether any key was ready (ZCARD: the hint), then the key made ready
// and its queue entry: the key's one job, in `fone` (an HSET; a zset of its own only once the key has
// more than one). The job's key is in its record; `fair` is not written again.
#[tokio::test]
async fn a_keyed_single_enqueue_makes_twelve_calls() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let keyed = |id: &str, key: &str| job(id, Due::In(0)).with_key(Some(key.to_owned()));
    s.enqueue(T, vec![keyed("flood", "flood")]).await.unwrap();
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    s.enqueue(T, vec![keyed("quiet", "quiet")]).await.unwrap();
    assert_eq!(
        calls_by_command(&server),
        single_enqueue_and(&[
            ("zadd", 2),
            ("hset", 1),
            ("hmget", 1),
            ("zmscore", 2),
            ("exists", 1),
            ("zcard", 1),
        ]),
    );
}

/// The calls of a single enqueue (enqueue_one.lua): the script, the time, the earliest due job (the
/// hint), the record, the history's count, and `more`.
fn single_enqueue_and(more: &[(&str, u64)]) -> std::collections::BTreeMap<String, u64> {
    let mut all = vec![
        ("fcall", 1),
        ("time", 1),
        ("zrange", 1),
        ("hsetnx", 1),
        ("hincrby", 1),
    ];
    all.extend_from_slice(more);
    counted(&all)
}

/// The doctor's line on the function libraries.
async fn libraries_check(s: &postpone::store::redis::RedisStore) -> postpone::ops::Check {
    let checks = s.doctor().await.unwrap();
    checks
        .into_iter()
        .find(|c| c.name == "script libraries")
        .unwrap()
}

/// The Redis clock, ms.
fn redis_ms(server: &RedisServer) -> i64 {
    let (secs, micros): (i64, i64) =
        redis::FromRedisValue::from_redis_value(server.cli(&["TIME"]).unwrap()).unwrap();
    secs * 1000 + micros / 1000
}

/// The names of the server's libraries matching `pattern`, sorted.
fn libraries(server: &RedisServer, pattern: &str) -> Vec<String> {
    let listed = server
        .cli(&["FUNCTION", "LIST", "LIBRARYNAME", pattern])
        .unwrap();
    let redis::Value::Array(libs) = listed else {
        panic!("{listed:?}")
    };
    let mut names: Vec<String> = libs
        .iter()
        .map(|lib| {
            let redis::Value::Array(fields) = lib else {
                panic!("{lib:?}")
            };
            redis::FromRedisValue::from_redis_value(fields[1].clone()).unwrap()
        })
        .collect();
    names.sort();
    names
}

// Operators see this build's function libraries and other builds' (each release whose scripts changed
// loads its own), and a prune deletes only other builds' postpone libraries: this build's stay (its
// scripts run with no load after it) and so does a library of the application's own.
#[tokio::test]
async fn script_libraries_are_counted_and_a_prune_deletes_only_other_builds() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    scripts_run(&s).await;
    let ours = libraries(&server, "postpone_*");
    assert!(ours.len() >= 3, "{ours:?}");
    server.cli(&["FUNCTION", "LOAD", OTHER_BUILD]).unwrap();
    server.cli(&["FUNCTION", "LOAD", USERS_OWN]).unwrap();

    let found = s.script_libraries(false).await.unwrap();
    assert_eq!(
        (
            found.servers,
            found.current,
            found.others,
            found.deleted,
            found.without_functions
        ),
        (1, ours.len(), 1, 0, 0)
    );
    assert!(found.memory_bytes > 0);
    let check = libraries_check(&s).await;
    assert!(check.found.contains("1 of other builds"), "{check:?}");
    assert!(
        check.advice.as_deref().unwrap().contains("--prune"),
        "{check:?}"
    );

    let pruned = s.script_libraries(true).await.unwrap();
    assert_eq!(
        (pruned.current, pruned.others, pruned.deleted),
        (ours.len(), 0, 1)
    );
    assert_eq!(libraries(&server, "postpone_*"), ours);
    assert_eq!(libraries(&server, "billing"), ["billing"]);
    let loads = |server: &RedisServer| calls_by_command(server).get("function|load").copied();
    let before = loads(&server);
    scripts_run(&s).await;
    assert_eq!(loads(&server), before, "this build's libraries were kept");
    let check = libraries_check(&s).await;
    assert!(check.found.contains("0 of other builds"), "{check:?}");
    assert_eq!(check.advice, None);
}

// Where the user's ACL denies FCALL, the store runs its scripts with EVALSHA after the first denial,
// and never tries FCALL again (the ACL log counts each denied call).
#[tokio::test]
async fn a_user_denied_functions_runs_the_scripts_by_evalsha_after_one_denial() {
    let server = RedisServer::start();
    server
        .cli(&["ACL", "SETUSER", "default", "-fcall", "-function"])
        .unwrap();
    let s = store(&server, "shop").await;
    scripts_run(&s).await;
    scripts_run(&s).await;
    let log = server.cli(&["ACL", "LOG"]).unwrap();
    assert_eq!(denied(&log, "fcall"), 1, "{log:?}");
    let calls = calls_by_command(&server);
    assert!(
        calls.get("evalsha").copied().unwrap_or(0) >= 12,
        "{calls:?}"
    );
}

/// Enqueues three jobs one at a time, claims and finishes them, and checks the counts.
async fn scripts_run(s: &postpone::store::redis::RedisStore) {
    let ids = ["a", "b", "c"];
    for id in ids {
        s.enqueue(T, vec![job(id, Due::In(0))]).await.unwrap();
    }
    let jobs = s.claim(T, claim(10)).await.unwrap().jobs;
    assert_eq!(jobs.len(), 3);
    let items = jobs
        .iter()
        .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
        .collect();
    let done = s.finish(T, items).await.unwrap();
    assert!(done.iter().all(|o| *o == FinishOutcome::Applied));
    let c = s.counts(T).await.unwrap();
    assert_eq!((c.ready, c.scheduled, c.active), (0, 0, 0));
}

/// How many calls of `command` the ACL log's entries (`ACL LOG`) say were denied.
fn denied(log: &redis::Value, command: &str) -> i64 {
    let redis::Value::Array(entries) = log else {
        return 0;
    };
    let mut total = 0;
    for entry in entries {
        let fields: Vec<String> = match entry {
            redis::Value::Array(items) => items
                .iter()
                .map(|v| redis::FromRedisValue::from_redis_value(v.clone()).unwrap_or_default())
                .collect(),
            _ => continue,
        };
        let field = |name: &str| {
            fields
                .chunks(2)
                .find(|kv| kv[0] == name)
                .map(|kv| kv[1].clone())
        };
        if field("object").as_deref() == Some(command) {
            total += field("count").and_then(|c| c.parse().ok()).unwrap_or(0);
        }
    }
    total
}

/// The calls `expected` names, as a map.
fn counted(expected: &[(&str, u64)]) -> std::collections::BTreeMap<String, u64> {
    expected
        .iter()
        .map(|(n, c)| ((*n).to_owned(), *c))
        .collect()
}

// A plain job (no key, no priority, no waiter, no batch, no dependency) pays no Redis call for the
// features it does not use, even beside a topic that uses them: every call of its enqueue, claim and
// finish is counted here, by command, so a call added to the plain path fails this test and names
// itself. Each script's calls are the same whatever the batch's size.
#[tokio::test]
async fn a_plain_job_pays_no_command_for_features_it_does_not_use() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    // Another topic of the namespace uses keys and priorities.
    let other = "orders.other";
    s.enqueue(
        other,
        vec![
            job("k", Due::In(0)).with_key(Some("tenant 1".into())),
            job("p", Due::In(0)).priority(3),
        ],
    )
    .await
    .unwrap();
    s.claim(other, claim(50)).await.unwrap();
    // Loads the scripts of a single enqueue, a batch enqueue, a claim and a finish.
    s.enqueue(T, vec![job("warm", Due::In(0))]).await.unwrap();
    s.enqueue(T, vec![job("warm2", Due::In(0)), job("warm3", Due::In(0))])
        .await
        .unwrap();
    let b = s.claim(T, claim(50)).await.unwrap();
    let done = |jobs: &[postpone::store::ClaimedJob]| -> Vec<FinishItem> {
        jobs.iter()
            .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
            .collect()
    };
    s.finish(T, done(&b.jobs)).await.unwrap();

    // One job into an empty topic: it is the earliest, so the workers get a hint (PUBLISH).
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    let a = s.enqueue(T, vec![job("a", Due::In(0))]).await.unwrap();
    let a_due = match a[0] {
        EnqueueOutcome::Created { due_at_ms } => due_at_ms,
        ref other => panic!("{other:?}"),
    };
    assert_eq!(
        calls_by_command(&server),
        single_enqueue_and(&[("zadd", 1), ("zscore", 1), ("publish", 1)]),
        "a single enqueue (ZSCORE: whether the topic has keyed jobs)"
    );
    // The ten are due a millisecond or more after `a` (the claim below reads the due times once per
    // run of jobs sharing one): the Redis clock has moved past `a`'s.
    while redis_ms(&server) <= a_due {
        std::thread::yield_now();
    }
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    let ten = (0..10).map(|i| job(&format!("b{i}"), Due::In(0))).collect();
    s.enqueue(T, ten).await.unwrap();
    assert_eq!(
        calls_by_command(&server),
        counted(&[
            ("fcall", 1),
            ("time", 1),
            ("zmscore", 2),
            ("zrange", 1),
            ("hset", 1),
            ("zadd", 1),
            ("hincrby", 1),
        ]),
        "a batch enqueue of 10 (not the earliest: no hint; whether the topic has keyed jobs comes \
         with the ZMSCORE of `active`)"
    );
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    let b = s.claim(T, claim(50)).await.unwrap();
    assert_eq!(b.jobs.len(), 11);
    // TIME; ZRANGE of the earliest lease, the earliest due job, the due jobs, the next due job and
    // the dead letters pending their hook; the due times once per run of jobs sharing one (ZCOUNT of
    // the first job's, a run of one; ZSCORE and ZCOUNT of the batch's, a run of ten); HMGET of the
    // topic's flags, then of the records; the leases (ZADD and HSET, with the marker of prelude.lua:
    // ZADD and HSETNX); the claim's record (GET, whether this claim was sent before; SET).
    assert_eq!(
        calls_by_command(&server),
        counted(&[
            ("fcall", 1),
            ("time", 1),
            ("zrange", 5),
            ("zcount", 2),
            ("zscore", 1),
            ("hmget", 2),
            ("zremrangebyrank", 1),
            ("zadd", 2),
            ("hsetnx", 1),
            ("hset", 1),
            ("get", 1),
            ("set", 1),
        ]),
        "a claim of 11"
    );
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    s.finish(T, done(&b.jobs)).await.unwrap();
    // TIME; HMGET of the leases and of the topic's flags; SCARD of the cancels; ZREM and HDEL of the
    // leases, ZCARD and ZSCORE (only the marker is left: DEL of both keys); HDEL of the records;
    // EXISTS of the stall counts; HINCRBY of `processed` and of the history.
    assert_eq!(
        calls_by_command(&server),
        counted(&[
            ("fcall", 1),
            ("time", 1),
            ("hmget", 2),
            ("scard", 1),
            ("zrem", 1),
            ("hdel", 2),
            ("zcard", 1),
            ("zscore", 1),
            ("del", 1),
            ("exists", 1),
            ("hincrby", 2),
        ]),
        "a finish of 11"
    );
}

// A claim of a key alone (fairness's flood with no other key ready), its jobs all due now: the plain
// claim's calls, and 7 for keys. What keys need read besides is read in calls the claim makes anyway:
// `fair`, `vt` and `flegacy` with the other stats fields, the head's due time from the claim's earliest
// due job, whether the key stays ready from one more id of `due`'s head (its queue's head is not read),
// whether a key is ready for the next due time from the claim's own filing (no ZCARD of `fready`).
// 30 calls before these were folded in.
#[tokio::test]
async fn a_claim_of_a_key_alone_makes_these_calls() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    let jobs = (0..10)
        .map(|i| job(&format!("j{i}"), Due::In(0)).with_key(Some("flood".to_owned())))
        .collect();
    s.enqueue(T, jobs).await.unwrap();
    let first = s
        .claim(T, ClaimRequest::new(4, 60_000, 100, 1))
        .await
        .unwrap();
    assert_eq!(first.jobs.len(), 4);
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    let next = s
        .claim(T, ClaimRequest::new(4, 60_000, 100, 1))
        .await
        .unwrap();
    let ids: Vec<_> = next.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, ["j4", "j5", "j6", "j7"]);
    assert_eq!(
        calls_by_command(&server),
        counted(&[
            // The plain claim's 17 (claim.lua): the script, the time, the earliest lease and due
            // job, the stats fields, the head of `due` and its removal, the due times of its run
            // (ZCOUNT), the marker (ZADD, HSETNX), the leases (ZADD, HSET), the records (HMGET), the
            // claim's record (GET, SET), the next due time and the pending deaths (ZRANGE each).
            ("fcall", 1),
            ("time", 1),
            ("hmget", 2),
            ("zcount", 1),
            ("hsetnx", 1),
            ("get", 1),
            ("set", 1),
            // The head of `due` is read with one id more and removed by rank as in a plain claim;
            // keys add 7: EXISTS of `fready`, `fwait` and `frun` (are keys left?) and of `fhold`,
            // `fwait`'s woken keys (ZRANGE), the key popped (ZPOPMIN), the count of its queue's
            // entries passed (HINCRBY of `fskip`: they stay until a write to its queue, or go with it
            // whole), the key ready again (ZADD), `vt` (HSET).
            ("zrange", 6),
            ("zremrangebyrank", 1),
            ("hincrby", 1),
            ("zadd", 3),
            ("hset", 2),
            ("exists", 2),
            ("zpopmin", 1),
        ]),
    );
}

// A claim of five keys with one job each (fairness's quiet keys): each key's one job is in `fone`
// (which one EXISTS finds there), read for all five in one HMGET and deleted in one HDEL; no key has a
// queue of its own to read (ZRANGE) or delete. The jobs are taken one turn each, their due times read
// in one ZMSCORE and the jobs removed from `due` in one ZREM.
#[tokio::test]
async fn a_claim_of_keys_with_one_job_each_reads_them_in_one_call() {
    let server = RedisServer::start();
    let s = store(&server, "shop").await;
    // A claim before (the scripts loaded), of a job without a key before the topic had keys.
    s.enqueue(T, vec![job("plain", Due::In(0))]).await.unwrap();
    let plain = s.claim(T, claim(1)).await.unwrap();
    assert_eq!(plain.jobs.len(), 1);
    for k in 0..5 {
        let id = format!("q{k}");
        let keyed = job(&id, Due::In(0)).with_key(Some(format!("quiet{k}")));
        s.enqueue(T, vec![keyed]).await.unwrap();
    }
    let queues = server
        .keys()
        .into_iter()
        .filter(|k| k.contains(":fq:"))
        .count();
    assert_eq!(queues, 0, "a key with one job has no queue of its own");
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    let got = s
        .claim(T, ClaimRequest::new(5, 60_000, 100, 1))
        .await
        .unwrap();
    let mut ids: Vec<_> = got.jobs.iter().map(|j| j.id.as_str()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["q0", "q1", "q2", "q3", "q4"]);
    // 27 calls whatever the number of keys (30 for five keys with a queue each: a ZRANGE per key, and
    // a DEL of the queues emptied).
    assert_eq!(
        calls_by_command(&server),
        counted(&[
            ("fcall", 1),
            ("time", 1),
            ("hmget", 3),
            ("zrange", 7),
            ("zremrangebyrank", 1),
            ("zcard", 1),
            ("zscore", 1),
            ("zmscore", 1),
            ("zpopmin", 1),
            ("zrem", 1),
            ("hdel", 1),
            ("zadd", 2),
            ("hset", 3),
            ("hsetnx", 1),
            ("exists", 3),
            ("get", 1),
            ("set", 1),
        ]),
    );
    assert_eq!(server.fairness_keys(), Vec::<String>::new());
}
