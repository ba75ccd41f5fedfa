//! `postpone-bench fairness` end to end, on a `redis-server` of its own: the flood drains in the worker
//! process while the harness's quiet producers enqueue, and every quiet job is reported.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on a free port, killed when dropped.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start() -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !redis.answers() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    fn answers(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let mut reply = [0u8; 7];
        conn.write_all(b"PING\r\n").is_ok()
            && conn.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `postpone-bench fairness` with `extra` and returns its JSON line.
fn fairness(redis: &Redis, extra: &[&str]) -> serde_json::Value {
    let url = format!("redis://127.0.0.1:{}", redis.port);
    let out = Command::new(env!("CARGO_BIN_EXE_postpone-bench"))
        .args([
            "fairness",
            "--jobs",
            "10000",
            "--quiet-keys",
            "5",
            "--flush",
        ])
        .args(["--redis", &url])
        .args(extra)
        .output()
        .expect("postpone-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("a JSON line");
    serde_json::from_str(last).expect("the last line is JSON")
}

#[test]
fn the_fairness_workload_drains_the_flood_in_a_worker_process_and_reports_every_quiet_job() {
    let redis = Redis::start();
    for extra in [&[][..], &["--no-keys"][..]] {
        let report = fairness(&redis, extra);
        assert_eq!(report["workload"], "fairness", "{report}");
        assert_eq!(report["ok"], true, "every quiet job ran: {report}");
        assert_eq!(report["jobs"], 10000, "{report}");
        assert!(report["jobs_per_sec"].as_f64().unwrap() > 0.0, "{report}");
        // The worker process's CPU (not the harness's) and Redis's over the flood.
        assert!(report["worker_cpu_s"].as_f64().unwrap() > 0.0, "{report}");
        assert!(report["redis_cpu_s"].as_f64().unwrap() > 0.0, "{report}");
        // Lags by the wall clock both processes read: never negative, and not absurd.
        let p99 = report["quiet_p99_ms"].as_f64().expect("quiet jobs ran");
        assert!((0.0..30_000.0).contains(&p99), "{report}");
    }
}
