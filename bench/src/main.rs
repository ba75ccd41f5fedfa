//! `postpone-bench`: the workloads, harness contract and targets of BENCHMARKS.md.
//!
//! ```text
//! cargo run --release -p postpone-bench -- <workload> [--jobs N] [--concurrency C] [--redis URL]
//! ```
//!
//! Workloads: `enqueue`, `enqueue-bulk`, `enqueue-concurrent`, `drain`, `drain-io`, `delayed`, `memory`,
//! `backlog`, `idle`, `page`, `outbox`, `steady`, `wait`, `batch`, `fairness`. Each takes an empty Redis and leaves it empty (`FLUSHALL`: a Redis that holds
//! keys is refused unless `--flush` is given, so that a run never deletes someone's data), prints
//! human-readable lines, and last one line of JSON. The exit code is 1 when a job was lost or failed, 2
//! when the harness could not run. Only the public API is used (`Client`, `Worker`, `enqueue_many`), with
//! the real worker and leases on; `drain`, `drain-io`, `backlog`, `delayed` and `idle` run the worker in
//! a process of its own (see `child.rs`). `enqueue-concurrent` runs `--concurrency` tasks (default 64)
//! through one client and counts enqueue errors (any is a failure); `drain-io`'s handler sleeps 1 ms.
//! `outbox` commits PostgreSQL transactions through postpone-postgres's outbox and relay (`--database`
//! or `DATABASE_URL`; see `workloads/outbox.rs` for how commit-to-queued is measured). `steady` enqueues
//! at `--rate` jobs/s for `--secs` s from 64 producers to a worker process, and measures start lag by
//! the Redis clock (see `workloads/steady.rs`).
//! `wait` enqueues 1,000 jobs, waits for each through one client (`Client::waiter`, every waiter
//! registered first), then drains them with a worker in the same process: ms from each handler's
//! finish to its waiter's return (`wake_p99_ms`). `drain --keep` drains jobs of a type that keeps every
//! finished job with its result, and reports the Redis memory they hold (`kept_bytes_per_job`).
//! `batch` creates one batch of 10,000 members with a success callback and drains it with a worker in
//! the same process: members/s from the creation to the callback's start, and ms from the last
//! member's end to the callback's start (`callback_after_last_ms`). `fairness` drains one key's flood
//! beside 50 quiet keys (see `workloads/fairness.rs`): the quiet jobs' start lag (`quiet_p99_ms`).

#[macro_use]
mod out;

mod args;
mod child;
mod handlers;
mod jobs;
mod observe;
mod pacer;
mod probe;
mod report;
mod workloads;

use std::process::ExitCode;

use args::{Args, USAGE};

/// `--features mimalloc`: every allocation of the harness and its worker process through mimalloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The allocator the harness was built with, for the JSON.
const ALLOCATOR_NAME: &str = if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "system"
};

/// Errors of the harness itself.
pub(crate) type BoxResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() || argv.iter().any(|a| a == "-h" || a == "--help") {
        outln!("{USAGE}");
        return if argv.is_empty() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let is_child = argv[0] == child::SUBCOMMAND;
    let args = match Args::parse(if is_child { &argv[1..] } else { &argv }) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("postpone-bench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("postpone-bench: cannot start Tokio: {e}");
            return ExitCode::from(2);
        }
    };
    // Everything runs in a spawned task, on the runtime's worker threads, as an application's request
    // handlers and workers do: a future polled by `block_on` on the main thread pays a thread switch
    // each time it waits (measured: 4.5 context switches per Redis round trip instead of 1).
    if is_child {
        let run = runtime.block_on(async move { tokio::spawn(child::main(args)).await });
        return match run.unwrap_or_else(|e| Err(e.into())) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("postpone-bench worker: {e}");
                ExitCode::from(2)
            }
        };
    }
    let task_args = args.clone();
    let run = runtime.block_on(async move {
        tokio::spawn(async move { workloads::run(&task_args).await }).await
    });
    match run.unwrap_or_else(|e| Err(e.into())) {
        Ok(mut report) => {
            report.workload = args.workload.name();
            report.jobs = args.jobs;
            let (l1, l5, l15) = report::load();
            report.load1 = l1;
            report.allocator = ALLOCATOR_NAME;
            outln!("  load average {l1:.2} {l5:.2} {l15:.2}");
            match serde_json::to_string(&report) {
                Ok(json) => outln!("{json}"),
                Err(e) => {
                    eprintln!("postpone-bench: {e}");
                    return ExitCode::from(2);
                }
            }
            if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("postpone-bench: {e}");
            ExitCode::from(2)
        }
    }
}
