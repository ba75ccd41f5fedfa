//! Flow control across worker processes: three workers share one rate limit (by the Redis clock), and
//! a provider's rate limit reported by one handler holds all three; limits per key (max running and
//! a rate, each tenant on its own) hold across the three.

mod fault;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fault::log::Event;
use fault::{Expect, Rig, Spec, Tenant, Work};
use postpone::EnqueueItem;
use support::redis_server::RedisServer;

/// 100 jobs per second, across the three workers.
const RATE: &str = "100/1000";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_keep_one_rate_limit_and_a_provider_limit_holds_them_all() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("flow", RedisServer::builder()).await;
    let spec = Spec::new(2_000, 8).env("FAULT_RATE", RATE);
    rig.spawn_ready(3, &spec).await;
    rig.enqueue_now("r", 2_000, 0).await;
    rig.drain(Duration::from_secs(90)).await;

    // Starts by the Redis clock: every 5 s window (one starting each second) holds 500 +- 5 %.
    let mut starts: Vec<(i64, u32)> = rig
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Start { ms, pid, .. } => Some((*ms, *pid)),
            _ => None,
        })
        .collect();
    starts.sort_unstable();
    assert_eq!(starts.len(), 2_000, "every job ran once");
    let (first, last) = (starts[0].0, starts[starts.len() - 1].0);
    assert!(
        last - first >= 19_000,
        "2,000 jobs at 100/s took {} ms",
        last - first
    );
    let mut windows = 0;
    let (mut fewest, mut most) = (usize::MAX, 0);
    let mut from = first;
    while from + 5_000 <= last {
        let n = starts
            .iter()
            .filter(|(ms, _)| (from..from + 5_000).contains(ms))
            .count();
        assert!(
            (475..=525).contains(&n),
            "{n} jobs started in the 5 s from {} ms: the rate is off by more than 5 %",
            from - first
        );
        windows += 1;
        (fewest, most) = (fewest.min(n), most.max(n));
        from += 1_000;
    }
    eprintln!(
        "FLOW-FIGURES {windows} windows of 5 s: {fewest} to {most} jobs (500 at 100/s); 2,000 jobs in {} ms",
        last - first
    );
    assert!(windows >= 14, "{windows} windows measured");
    let pids: std::collections::BTreeSet<u32> = starts.iter().map(|(_, pid)| *pid).collect();
    assert_eq!(pids.len(), 3, "all three workers ran jobs");

    // A provider's limit of 2 s, reported by the first job, holds every worker.
    let hold = Work {
        hold_ms: 2_000,
        ..Work::default()
    };
    rig.enqueue(vec![EnqueueItem::new(hold).id("0hold")])
        .await
        .unwrap();
    rig.enqueue_now("h", 300, 0).await;
    rig.drain(Duration::from_secs(60)).await;
    let events = rig.events();
    // Its first run (it runs again after the hold, attempt 1 again: no attempt used).
    let held_at = events
        .iter()
        .filter_map(|e| match e {
            Event::Start {
                id, attempt: 1, ms, ..
            } if id == "0hold" => Some(*ms),
            _ => None,
        })
        .min()
        .expect("the hold job ran");
    let mut after: Vec<(i64, u32)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Start { id, ms, pid, .. } if id.starts_with('h') && *ms > held_at => {
                Some((*ms, *pid))
            }
            _ => None,
        })
        .collect();
    after.sort_unstable();
    // Jobs claimed before the hold was recorded (a claim or two, 10 ms apart) may still start; then
    // none until it ends.
    let during: Vec<_> = after
        .iter()
        .filter(|(ms, _)| (held_at + 100..held_at + 2_000).contains(ms))
        .collect();
    assert!(
        during.is_empty(),
        "jobs started during the hold: {during:?}"
    );
    let resumed: std::collections::BTreeSet<u32> = after
        .iter()
        .filter(|(ms, _)| *ms >= held_at + 2_000)
        .map(|(_, pid)| *pid)
        .collect();
    assert_eq!(resumed.len(), 3, "all three workers resumed after the hold");

    let report = rig
        .check(Expect {
            attempt_one: true,
            ..Expect::default()
        })
        .await;
    assert_eq!(report.lost, 0);
    assert_eq!(report.done_more_than_once, 0);
    eprintln!("{report}");
}

/// The jobs of `tenants`, `n` each, ids `<tenant>-<i>`, interleaved, each working `sleep_ms`.
fn tenant_jobs(tenants: &[&str], n: usize, sleep_ms: u64) -> Vec<EnqueueItem<Tenant>> {
    (0..n)
        .flat_map(|i| {
            tenants.iter().map(move |t| {
                let job = Tenant {
                    tenant: t.to_string(),
                    sleep_ms,
                };
                EnqueueItem::new(job).id(format!("{t}-{i}"))
            })
        })
        .collect()
}

/// How many `finish` events the jobs of `tenants` logged.
fn tenants_finished(events: &[Event], tenants: &[&str]) -> usize {
    events
        .iter()
        .filter(|e| match e {
            Event::Finish { id, .. } => tenants.iter().any(|t| id.starts_with(&format!("{t}-"))),
            _ => false,
        })
        .count()
}

/// Starts 3 workers of `spec`, enqueues `n` jobs of each tenant (each working `sleep_ms`) and waits
/// until every one finished; returns the workers' slots.
async fn run_tenants(
    rig: &mut Rig,
    spec: &Spec,
    tenants: &[&str],
    n: usize,
    sleep_ms: u64,
) -> Vec<usize> {
    let slots = rig.spawn_ready(3, spec).await;
    rig.client
        .enqueue_many(tenant_jobs(tenants, n, sleep_ms))
        .await
        .unwrap();
    rig.drain_until(
        Duration::from_secs(60),
        "every tenant's job finished",
        |events| tenants_finished(events, tenants) == n * tenants.len(),
        |_| {},
    )
    .await;
    slots
}

/// The tenant of an id `<tenant>-<i>`.
fn tenant_of(id: &str) -> &str {
    id.rsplit_once('-').map_or(id, |(t, _)| t)
}

/// The most intervals `[from, to)` open at once.
fn most_at_once(intervals: &[(i64, i64)]) -> usize {
    // Ends before starts at the same ms: a job that starts as another ends does not overlap it.
    let mut edges: Vec<(i64, i32)> = intervals
        .iter()
        .flat_map(|(from, to)| [(*from, 1), (*to, -1)])
        .collect();
    edges.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_limits_hold_per_tenant_across_three_worker_processes() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("key_limits", RedisServer::builder()).await;

    // Max running per key: 2 of one tenant at once, whichever process runs them (by the Redis clock,
    // from each handler's start to its finish: within its lease, so within the limit).
    let tenants = ["acme", "globex", "initech"];
    // 3 slots each: 9 in all for the 6 the tenants may use, so no one worker can take them all.
    let spec = Spec::new(2_000, 3).env("FAULT_KEY_MAX", 2);
    let slots = run_tenants(&mut rig, &spec, &tenants, 40, 50).await;
    let events = rig.events();
    let mut runs: BTreeMap<(String, u32), (i64, i64, u32)> = BTreeMap::new();
    for e in &events {
        match e {
            Event::Start {
                id,
                attempt,
                ms,
                pid,
                ..
            } => {
                runs.entry((id.clone(), *attempt)).or_default().0 = *ms;
                runs.entry((id.clone(), *attempt)).or_default().2 = *pid;
            }
            Event::Finish {
                id, attempt, ms, ..
            } => {
                runs.entry((id.clone(), *attempt)).or_default().1 = *ms;
            }
            _ => {}
        }
    }
    assert_eq!(runs.len(), 120, "every job ran once");
    let mut figures = Vec::new();
    for t in tenants {
        let mine: Vec<(i64, i64)> = runs
            .iter()
            .filter(|((id, _), _)| tenant_of(id) == t)
            .map(|(_, (from, to, _))| (*from, *to))
            .collect();
        let most = most_at_once(&mine);
        assert!(most <= 2, "{most} jobs of {t} ran at once, the limit is 2");
        figures.push(format!("{t} {most}"));
    }
    let all: Vec<(i64, i64)> = runs.values().map(|(from, to, _)| (*from, *to)).collect();
    let most = most_at_once(&all);
    assert!(
        most > 2,
        "tenants run beside each other: at most {most} at once"
    );
    // The limit held across processes: more than one ran the tenants' jobs. (Not necessarily all
    // three: two workers' 3 slots each can hold all 6 the limits allow, and a worker that frees a slot
    // usually takes it again before the others' claims, so the third may run none.)
    let pids: BTreeSet<u32> = runs.values().map(|(_, _, pid)| *pid).collect();
    assert!(pids.len() >= 2, "the jobs ran in {} worker(s)", pids.len());
    for slot in slots {
        rig.kill9(slot);
    }

    // A rate per key: 50/s for each tenant, by the Redis clock of each claim. Every second (one
    // starting at each claim) holds 50 +- 5 %, and so does the whole run.
    let tenants = ["hooli", "vandelay"];
    let spec = Spec::new(2_000, 8).env("FAULT_KEY_RATE", "50/1000");
    run_tenants(&mut rig, &spec, &tenants, 250, 0).await;
    let mut claims: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    let mut pids = BTreeSet::new();
    for e in rig.events() {
        if let Event::Claim { id, ms, pid, .. } = e {
            if let Some(t) = tenants.iter().find(|t| tenant_of(&id) == **t) {
                claims.entry(*t).or_default().push(ms);
                pids.insert(pid);
            }
        }
    }
    assert_eq!(pids.len(), 3, "all three workers claimed jobs");
    for t in tenants {
        let at = claims.get_mut(t).unwrap();
        at.sort_unstable();
        assert_eq!(at.len(), 250, "every job of {t} claimed once");
        let (first, last) = (at[0], at[at.len() - 1]);
        let (mut fewest, mut most) = (usize::MAX, 0);
        for (i, from) in at.iter().enumerate() {
            if from + 1_000 > last {
                break;
            }
            let n = at[i..].iter().take_while(|ms| **ms < from + 1_000).count();
            assert!(
                (48..=52).contains(&n),
                "{n} jobs of {t} claimed in the second from {} ms: the rate is off by more than 5 %",
                from - first
            );
            (fewest, most) = (fewest.min(n), most.max(n));
        }
        let per_second = (at.len() - 1) as f64 * 1_000.0 / (last - first) as f64;
        assert!(
            (47.5..=52.5).contains(&per_second),
            "{t}: {per_second:.1} jobs/s over {} ms, the limit is 50/s",
            last - first
        );
        figures.push(format!(
            "{t}: {fewest} to {most} a second, {per_second:.1}/s over {} ms",
            last - first
        ));
    }
    eprintln!("KEY-LIMIT-FIGURES most at once per tenant (limit 2): {figures:?}");
}

/// The topic of [`Tenant`] jobs.
const TENANT_TOPIC: &str = "fault.tenant";

/// Compares, in one script (one moment of Redis), each key's running count in the tenants' `frun`
/// with the leases that count under it (`leases` values ending `:c<key's SHA-1>`: fair.lua's
/// counted_name). Returns the keys where they differ, as "<key's SHA-1> <frun's count> <leases>".
const SLOTS_VS_LEASES: &str = r"
local run = redis.call('HGETALL', KEYS[1])
local held = {}
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do
  if #v > 42 and string.sub(v, -42, -41) == ':c' then
    local name = string.sub(v, -40)
    held[name] = (held[name] or 0) + 1
  end
end
local off = {}
for i = 1, #run, 2 do
  local n = held[run[i]] or 0
  if tonumber(run[i + 1]) ~= n then
    off[#off + 1] = run[i] .. ' ' .. run[i + 1] .. ' ' .. n
  end
  held[run[i]] = nil
end
for name, n in pairs(held) do
  off[#off + 1] = name .. ' 0 ' .. n
end
return off
";

/// Asserts that every key's running count (its slots taken, `frun`) is the number of leases that count
/// under it, now: a slot no lease holds is leaked (its key runs fewer than its max from then on, and
/// once its slots are all leaked none of its jobs runs again); a lease its key does not count lets the
/// key run more than its max.
fn assert_key_slots_are_leases(rig: &Rig) {
    let key = |s: &str| format!("postpone:{{{}:{TENANT_TOPIC}}}:{s}", rig.ns);
    let (frun, leases) = (key("frun"), key("leases"));
    let off = match rig
        .server
        .cli(&["EVAL", SLOTS_VS_LEASES, "2", &frun, &leases])
        .expect("the script comparing frun with the leases")
    {
        redis::Value::Array(v) => v
            .into_iter()
            .map(|x| redis::FromRedisValue::from_redis_value(x).expect("a string"))
            .collect::<Vec<String>>(),
        other => panic!("unexpected reply {other:?}"),
    };
    assert!(
        off.is_empty(),
        "running counts per key (frun) that are not the leases counted under them \
         (<key's SHA-1> <frun's count> <counted leases>): {off:?}"
    );
}

/// Drains until `jobs` distinct jobs finished, killing a worker (SIGKILL) every 300 ms, round robin,
/// and starting another in its place at once; returns how many it killed, and at how many of its
/// 50 ms ticks some key of the tenants' topic had queue entries passed and kept (`fskip`: a key taking
/// from the head of the due set). At every tick, each key's running count must be the leases counted
/// under it (the sweep of a killed worker's expired lease frees its key's slot).
async fn drain_killing_a_worker_every_300_ms(
    rig: &mut Rig,
    spec: &Spec,
    jobs: usize,
) -> (usize, usize) {
    let mut last = std::time::Instant::now();
    let (mut kills, mut skipping) = (0, 0);
    rig.drain_until(
        Duration::from_secs(90),
        "every tenant's job finished",
        |events| {
            let finished: BTreeSet<&str> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Finish { id, .. } => Some(id.as_str()),
                    _ => None,
                })
                .collect();
            finished.len() == jobs
        },
        |rig| {
            assert_key_slots_are_leases(rig);
            let fskip = format!("postpone:{{{}:{TENANT_TOPIC}}}:fskip", rig.ns);
            if rig.server.cli(&["EXISTS", &fskip]).ok() == Some(redis::Value::Int(1)) {
                skipping += 1;
            }
            if last.elapsed() >= Duration::from_millis(300) {
                let slot = kills % rig.procs.len();
                rig.kill9(slot);
                rig.respawn(slot, spec.clone());
                kills += 1;
                last = std::time::Instant::now();
            }
        },
    )
    .await;
    (kills, skipping)
}

/// Waits (at most 30 s) until the tenants' topic holds no live job; panics with its counts if not.
/// The rig's drain waits for the topic of `Work` jobs; here a run's end reaches Redis after its
/// `Finish` event is logged (acknowledgements go in batches), and a run whose worker was killed
/// between the two runs again once its lease expires.
async fn tenants_drained(rig: &Rig) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let c = rig.client.topic::<Tenant>().counts().await.unwrap();
        if c.scheduled + c.ready + c.active == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the tenants' topic still holds live jobs: {c:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_sigkilled_workers_lose_no_keyed_job_claimed_from_the_head_of_due() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("fair_head_kill", RedisServer::builder()).await;
    // No limit per key: a tenant left alone in a claim takes its jobs from the head of the due set
    // (fair.lua's take_head). One tenant's flood, two others beside it.
    let spec = Spec::new(400, 3).env("FAULT_KEYS", 1);
    rig.spawn_ready(3, &spec).await;
    let mut jobs = tenant_jobs(&["acme"], 240, 60);
    jobs.extend(tenant_jobs(&["globex", "initech"], 30, 60));
    rig.client.enqueue_many(jobs).await.unwrap();
    let (kills, skipping) = drain_killing_a_worker_every_300_ms(&mut rig, &spec, 300).await;
    assert!(kills >= 5, "only {kills} kills: the test did not test much");
    // The flood passed its queue entries (kept, counted in `fskip`) while workers died: the refiles
    // of their jobs wrote to its queue then.
    assert!(
        skipping > 0,
        "no key passed its queue entries: the test did not test that"
    );
    // Every job ends (none lost with a killed worker), and nothing is left for keys.
    tenants_drained(&rig).await;
    let left = rig.server.fairness_keys();
    assert!(left.is_empty(), "per-key state left: {left:?}");
    println!("fair_head_kill: {kills} kills, {skipping} ticks with entries passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_limits_sigkilled_workers_lose_no_keyed_job_and_leave_no_key_state() {
    let _serial = fault::serial().await;
    let mut rig = Rig::start("key_limits_kill", RedisServer::builder()).await;
    let tenants = ["acme", "globex", "initech"];
    // Short leases: a killed worker's jobs come back (and free their key's slots) within ~1 s.
    let spec = Spec::new(400, 3).env("FAULT_KEY_MAX", 2);
    rig.spawn_ready(3, &spec).await;
    rig.client
        .enqueue_many(tenant_jobs(&tenants, 100, 50))
        .await
        .unwrap();
    let (kills, _) = drain_killing_a_worker_every_300_ms(&mut rig, &spec, 300).await;
    assert!(kills >= 5, "only {kills} kills: the test did not test much");
    // Runs that finished never held more than 2 of a tenant at once (a killed run's slot is held
    // until its lease is swept, so its rerun cannot overlap it either).
    let events = rig.events();
    let mut runs: BTreeMap<(String, u32, u32), (i64, i64)> = BTreeMap::new();
    for e in &events {
        match e {
            Event::Start {
                id,
                attempt,
                ms,
                pid,
                ..
            } => runs.entry((id.clone(), *attempt, *pid)).or_default().0 = *ms,
            Event::Finish {
                id,
                attempt,
                ms,
                pid,
            } => runs.entry((id.clone(), *attempt, *pid)).or_default().1 = *ms,
            _ => {}
        }
    }
    for t in tenants {
        let mine: Vec<(i64, i64)> = runs
            .iter()
            .filter(|((id, _, _), (_, to))| tenant_of(id) == t && *to > 0)
            .map(|(_, span)| *span)
            .collect();
        let most = most_at_once(&mine);
        assert!(
            most <= 2,
            "{most} finished runs of {t} at once, the limit is 2"
        );
    }
    // Every job ends (none lost with a killed worker), and nothing is left for keys: no slot taken
    // (`frun`), no key queued, ready or waiting.
    tenants_drained(&rig).await;
    assert_key_slots_are_leases(&rig);
    let left = rig.server.fairness_keys();
    assert!(left.is_empty(), "per-key state left: {left:?}");
    // The sweep freed slots: leases of killed workers expired (each a counted one: every keyed job
    // counts under the max per key), and were swept, not only finished.
    let stalled = rig.client.topic::<Tenant>().counts().await.unwrap().stalled;
    assert!(
        stalled > 0,
        "no lease of a killed worker expired: the sweep's release of a key's slot was not tested"
    );
    println!(
        "key_limits_kill: {kills} kills, {} runs, {stalled} leases swept",
        runs.len()
    );
}
