//! Acceptance of periodic jobs: three worker processes run a per-second schedule on one Redis for about
//! 30 s; one is SIGKILLed midway and started again. Every tick in the window is enqueued and run once,
//! none twice, none before its time by the Redis clock, none missed while a process lived.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use support::example::example_binary;
use support::redis_server::RedisServer;
use support::tempdir::TempDir;
use support::wait::eventually_within;

/// A handler start, from a process's log.
#[derive(Debug, Clone)]
struct Start {
    id: String,
    tick_ms: i64,
    due_ms: i64,
    pid: u32,
}

fn worker_binary() -> std::path::PathBuf {
    example_binary(
        "periodic_worker",
        &[Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/periodic_worker.rs")],
        "run `cargo build --example periodic_worker` (plain `cargo test` builds it)",
    )
}

fn spawn(server: &RedisServer, ns: &str, dir: &Path) -> Child {
    Command::new(worker_binary())
        .env("PERIODIC_REDIS_URL", server.url())
        .env("PERIODIC_NS", ns)
        .env("PERIODIC_LOG", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning the periodic worker")
}

/// Every handler start logged so far (a torn last line of a killed process is left out).
fn starts(dir: &Path) -> Vec<Start> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the log directory") {
        let text = std::fs::read_to_string(entry.expect("a log file").path()).unwrap_or_default();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if let ["start", id, tick, due, pid] = f[..] {
                if let (Ok(tick_ms), Ok(due_ms), Ok(pid)) = (tick.parse(), due.parse(), pid.parse())
                {
                    let id = id.to_owned();
                    out.push(Start {
                        id,
                        tick_ms,
                        due_ms,
                        pid,
                    });
                }
            }
        }
    }
    out
}

/// The distinct ticks that ran.
fn ticks(dir: &Path) -> BTreeSet<i64> {
    starts(dir).iter().map(|s| s.tick_ms).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_one_killed_run_every_tick_once() {
    let server = RedisServer::start();
    let tmp = TempDir::new("periodic-");
    let dir = tmp.path();
    let ns = "periodic";
    let mut procs: Vec<Child> = (0..3).map(|_| spawn(&server, ns, dir)).collect();

    let long = Duration::from_secs(60);
    eventually_within(long, "10 ticks to run", || async {
        (ticks(dir).len() >= 10).then_some(())
    })
    .await;
    // Kill one process midway and start it again at once.
    let killed = procs[0].id();
    procs[0].kill().expect("SIGKILL");
    procs[0].wait().expect("the killed process");
    procs[0] = spawn(&server, ns, dir);
    eventually_within(long, "30 ticks to run", || async {
        (ticks(dir).len() >= 30).then_some(())
    })
    .await;

    // The window: from the first tick that ran to the last one seen now; every tick in it must run
    // (a job claimed by the killed process runs elsewhere once its 1 s lease expires).
    let seen = ticks(dir);
    let (first, last) = (*seen.first().unwrap(), *seen.last().unwrap());
    let all: BTreeSet<i64> = (0..=(last - first) / 1000)
        .map(|i| first + i * 1000)
        .collect();
    eventually_within(
        Duration::from_secs(20),
        "every tick of the window to run",
        || {
            let all = &all;
            async move {
                let ran = ticks(dir);
                all.iter().all(|t| ran.contains(t)).then_some(())
            }
        },
    )
    .await;
    for p in &mut procs {
        let _ = p.kill();
        let _ = p.wait();
    }

    let starts = starts(dir);
    let mut by_tick: BTreeMap<i64, Vec<&Start>> = BTreeMap::new();
    for s in &starts {
        assert_eq!(s.tick_ms % 1000, 0, "{s:?}");
        assert!(
            s.due_ms >= s.tick_ms,
            "due before its tick by the Redis clock: {s:?}"
        );
        let tick = chrono::DateTime::from_timestamp_millis(s.tick_ms).unwrap();
        let id = format!(
            "each-second:{}",
            tick.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        );
        assert_eq!(s.id, id);
        by_tick.entry(s.tick_ms).or_default().push(s);
    }
    let mut reruns_after_the_kill = 0;
    for t in &all {
        let runs = by_tick.get(t).map_or(&[][..], Vec::as_slice);
        match runs {
            [_] => {}
            // At-least-once delivery: a job that started on the killed process and whose
            // acknowledgement died with it runs again once its lease expires. That is a rerun of one
            // job (one enqueue), not a second tick.
            [a, b] if a.pid == killed || b.pid == killed => reruns_after_the_kill += 1,
            other => panic!("tick {t} ran {} times: {other:?}", other.len()),
        }
    }
    assert!(
        reruns_after_the_kill <= 1,
        "{reruns_after_the_kill} reruns after one kill"
    );
    assert!(all.len() >= 30, "{} ticks", all.len());
    // Whichever process claims first runs a tick: over 30 ticks, more than one does.
    let pids: BTreeSet<u32> = starts.iter().map(|s| s.pid).collect();
    assert!(pids.len() >= 2, "ticks ran on {} process only", pids.len());
    // One schedule, however many processes stored it.
    let keys = server.keys();
    let schedules: Vec<&String> = keys.iter().filter(|k| k.ends_with(":schedules")).collect();
    assert_eq!(
        schedules,
        ["postpone:{periodic:periodic.tick}:schedules"],
        "{keys:?}"
    );
}
