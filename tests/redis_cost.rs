//! Redis-side cost of the backend's scripts: memory per job and Redis CPU per drained job.
//!
//! Measurements, not checks (they assert nothing about speed): run them on purpose with
//! `cargo test --release --test redis_cost -- --ignored --nocapture`.

mod support;

use postpone::store::redis::RedisStore;
use postpone::store::{ClaimRequest, Due, Finish, FinishItem, NewJob, Store};
use support::redis_server::RedisServer;

const T: &str = "bench";

fn info_field(server: &RedisServer, section: &str, field: &str) -> f64 {
    let info: String =
        redis::FromRedisValue::from_redis_value(server.cli(&["INFO", section]).unwrap()).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

fn cpu(server: &RedisServer) -> f64 {
    info_field(server, "cpu", "used_cpu_user") + info_field(server, "cpu", "used_cpu_sys")
}

/// A record like the benchmarks' payload: a ~10-byte header and ~100 bytes of JSON.
fn jobs(n: usize, due: Due) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            let payload = format!(r#"{{"order_id":{i},"note":"{}"}}"#, "x".repeat(70));
            let mut record = vec![1u8, 0, 1, 0xfb, 0xb6, 0xd0, 0xc0, 0xa6, 0x32];
            record.extend_from_slice(payload.as_bytes());
            NewJob::new(format!("5ZqLw0aB{i:x}"), record, due, false)
        })
        .collect()
}

#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn memory_per_job() {
    let server = RedisServer::start();
    let s = RedisStore::connect(&server.url(), "bench").await.unwrap();
    s.enqueue(T, jobs(1, Due::In(3_600_000))).await.unwrap();
    s.cancel(T, "5ZqLw0aB0").await.unwrap();
    let before = info_field(&server, "memory", "used_memory");
    for chunk in jobs(100_000, Due::In(3_600_000)).chunks(1000) {
        s.enqueue(T, chunk.to_vec()).await.unwrap();
    }
    let after = info_field(&server, "memory", "used_memory");
    println!("memory: {:.0} bytes per job", (after - before) / 100_000.0);
}

#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn redis_cpu_per_drained_job() {
    let server = RedisServer::start();
    let s = RedisStore::connect(&server.url(), "bench").await.unwrap();
    const N: usize = 50_000;
    for chunk in jobs(N, Due::In(0)).chunks(1000) {
        s.enqueue(T, chunk.to_vec()).await.unwrap();
    }
    let before = cpu(&server);
    let mut done = 0;
    while done < N {
        let batch = s
            .claim(T, ClaimRequest::new(50, 30_000, 100, 3))
            .await
            .unwrap();
        let items: Vec<_> = batch
            .jobs
            .iter()
            .map(|j| FinishItem::new(j.id.clone(), j.token, Finish::Done))
            .collect();
        done += items.len();
        s.finish(T, items).await.unwrap();
    }
    let used = cpu(&server) - before;
    println!(
        "drain: {:.2} us of Redis CPU per job (claim and finish in batches of 50)",
        used * 1e6 / N as f64
    );
}

#[tokio::test]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn redis_cpu_per_single_enqueue() {
    let server = RedisServer::start();
    let s = RedisStore::connect(&server.url(), "bench").await.unwrap();
    const N: usize = 5_000;
    let jobs = jobs(N, Due::In(0));
    s.enqueue(T, jobs[..1].to_vec()).await.unwrap();
    server.cli(&["CONFIG", "RESETSTAT"]).unwrap();
    let before = cpu(&server);
    for job in &jobs[1..] {
        s.enqueue(T, vec![job.clone()]).await.unwrap();
    }
    let used = cpu(&server) - before;
    let stats: String =
        redis::FromRedisValue::from_redis_value(server.cli(&["INFO", "commandstats"]).unwrap())
            .unwrap();
    let evalsha = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .unwrap_or_default()
        .to_owned();
    println!(
        "enqueue: {:.2} us of Redis CPU per job (one job per call, each awaited; most of it is \
         per-request network work); {evalsha}",
        used * 1e6 / (N - 1) as f64
    );
}
