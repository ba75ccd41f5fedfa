//! Limits per key through workers (fairness by key, `Job::key`): at most `max running` jobs of one key
//! at once, and a rate per key, across every worker of a topic, each key on its own.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use postpone::{Job, JobContext, JobError, KeyLimits, RateLimit, Worker};
use serde::{Deserialize, Serialize};

use super::*;

/// A tenant's job: its key for fairness is its tenant.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "fair.tenants", key = "tenant")]
pub(crate) struct TenantJob {
    pub tenant: String,
    pub n: u64,
}

/// A tenant's job on a topic of its own, for the rate per key.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "fair.rated_tenants", key = "tenant")]
pub(crate) struct RatedTenantJob {
    pub tenant: String,
    pub n: u64,
}

const TENANTS: [&str; 4] = ["acme", "globex", "initech", "umbrella"];

pub(crate) async fn key_limit_max_running_holds_per_key_across_three_workers(b: Backend) {
    const PER_TENANT: u64 = 15;
    // Jobs of each tenant running now, and the most seen at once; and the same for all tenants.
    let running: Arc<HashMap<&str, (AtomicUsize, AtomicUsize)>> = Arc::new(
        TENANTS
            .iter()
            .map(|t| (*t, (AtomicUsize::new(0), AtomicUsize::new(0))))
            .collect(),
    );
    let all = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let (tx, mut rx) = events();
    let handler = {
        let (running, all) = (running.clone(), all.clone());
        move |job: TenantJob, _: JobContext| {
            let (running, all, tx) = (running.clone(), all.clone(), tx.clone());
            async move {
                let (now, most) = &running[job.tenant.as_str()];
                most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                all.1
                    .fetch_max(all.0.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(40)).await;
                all.0.fetch_sub(1, Ordering::SeqCst);
                now.fetch_sub(1, Ordering::SeqCst);
                let _ = tx.send(job.tenant);
                Ok::<(), JobError>(())
            }
        }
    };
    let workers: Vec<_> = (0..3)
        .map(|_| {
            spawn(
                Worker::builder(&b.client)
                    .handle(handler.clone())
                    .key_limits::<TenantJob>(KeyLimits::new().max_running(2))
                    .concurrency(10)
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    // Interleaved, so that every tenant has jobs due the whole time.
    let jobs = (0..PER_TENANT).flat_map(|n| {
        TENANTS.iter().map(move |t| TenantJob {
            tenant: t.to_string(),
            n,
        })
    });
    b.client.enqueue_many(jobs).await.unwrap();
    let mut done: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..PER_TENANT * TENANTS.len() as u64 {
        *done.entry(next(&mut rx).await).or_default() += 1;
    }
    for t in TENANTS {
        assert_eq!(done[t], PER_TENANT, "every job of {t} ran once: {done:?}");
        let most = running[t].1.load(Ordering::SeqCst);
        assert!(
            most <= 2,
            "at most 2 jobs of {t} at once across three workers, saw {most}"
        );
    }
    let most = all.1.load(Ordering::SeqCst);
    assert!(
        most > 2,
        "tenants run beside each other (up to 2 each): at most {most} jobs ran at once"
    );
    for w in workers {
        w.stop().await;
    }
}

pub(crate) async fn key_limit_rate_per_key_holds_across_three_workers(b: Backend) {
    const PER_TENANT: usize = 200;
    let tenants = ["acme", "globex"];
    let (tx, mut rx) = events();
    let client = b.client.clone();
    let handler = move |job: RatedTenantJob, _: JobContext| {
        let (tx, client) = (tx.clone(), client.clone());
        async move {
            let _ = tx.send((job.tenant, store_now(&client).await));
            Ok::<(), JobError>(())
        }
    };
    let rate = RateLimit::per_second(50);
    let workers: Vec<_> = (0..3)
        .map(|_| {
            spawn(
                Worker::builder(&b.client)
                    .handle(handler.clone())
                    .key_limits::<RatedTenantJob>(KeyLimits::new().rate(rate))
                    .build()
                    .unwrap(),
            )
        })
        .collect();
    let jobs = (0..PER_TENANT as u64).flat_map(|n| {
        tenants.iter().map(move |t| RatedTenantJob {
            tenant: t.to_string(),
            n,
        })
    });
    b.client.enqueue_many(jobs).await.unwrap();
    let mut starts: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for _ in 0..PER_TENANT * tenants.len() {
        // 200 jobs of a tenant at 50/s take 4 s in all; each event comes within the suite's patience.
        let (tenant, at) = next(&mut rx).await;
        starts.entry(tenant).or_default().push(at);
    }
    // By the store's clock: every second of a tenant's starts holds at most the rate and its burst (52;
    // a second of claims holds at most 51, and a start is read a little after its claim), and over the
    // run the rate is 50/s, within 5 %.
    let most_per_second = (rate.jobs() + rate.burst()) as usize;
    for t in tenants {
        let s = starts.get_mut(t).unwrap();
        s.sort_unstable();
        assert_eq!(s.len(), PER_TENANT, "every job of {t} ran once");
        for (i, from) in s.iter().enumerate() {
            let n = s[i..].iter().take_while(|at| **at < from + 1_000).count();
            assert!(
                n <= most_per_second,
                "{n} jobs of {t} started in the second from {} ms (at most {most_per_second})",
                from - s[0]
            );
        }
        let span = (s[PER_TENANT - 1] - s[0]) as f64;
        let per_second = (PER_TENANT - 1) as f64 * 1_000.0 / span;
        assert!(
            (47.5..=52.5).contains(&per_second),
            "{t}: {per_second:.1} jobs/s over {span} ms, the limit is 50/s"
        );
    }
    for w in workers {
        w.stop().await;
    }
}
