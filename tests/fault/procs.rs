//! Worker processes: how to start one (`examples/fault_worker`), and the faults a test injects into them.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::Rig;
use crate::support::example::example_binary;

/// How to run one worker process.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Environment variables on top of the rig's (`FAULT_LEASE_MS`, `FAULT_CRASH`, ...).
    pub env: Vec<(String, String)>,
}

impl Spec {
    /// A worker with this lease and concurrency.
    pub fn new(lease_ms: u64, concurrency: usize) -> Self {
        Spec { env: Vec::new() }
            .env("FAULT_LEASE_MS", lease_ms)
            .env("FAULT_CONCURRENCY", concurrency)
    }

    /// Sets a variable (a later value wins).
    pub fn env(mut self, name: &str, value: impl ToString) -> Self {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.to_owned(), value.to_string()));
        self
    }
}

/// A fault the test injected.
#[derive(Debug, Clone)]
pub struct Fault {
    /// What it was ("kill", "stop", "crash", "redis-kill", ...).
    pub kind: String,
    /// The worker process it hit, or `None` for Redis.
    pub pid: Option<u32>,
    /// The Redis time just before it (ms); for a crash the worker chose itself, when it was seen.
    pub at_ms: i64,
}

/// A worker process.
#[derive(Debug)]
pub struct Proc {
    /// Its spec, to restart it.
    pub spec: Spec,
    pub(super) child: Child,
    /// Its pid.
    pub pid: u32,
    pub(super) exited: bool,
}

impl Proc {
    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        !self.exited && self.child.try_wait().expect("try_wait").is_none()
    }
}

/// The worker binary, newer than its source.
pub fn worker_binary() -> PathBuf {
    example_binary(
        "fault_worker",
        &[Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fault_worker.rs")],
        "run `cargo build --example fault_worker` (plain `cargo test` builds it)",
    )
}

impl Rig {
    fn command(&mut self, spec: &Spec) -> (Command, PathBuf) {
        self.spawned += 1;
        let stderr = self.dir.path().join(format!("worker-{}.err", self.spawned));
        let mut cmd = Command::new(worker_binary());
        cmd.env("FAULT_REDIS_URL", self.server.url())
            .env("FAULT_NS", &self.ns)
            .env("FAULT_LOG", &self.log)
            .env("FAULT_POLL_MS", "200");
        for (k, v) in self.extra_env.iter().chain(&spec.env) {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        (cmd, stderr)
    }

    /// Starts a worker process in a new slot; returns the slot.
    pub fn spawn(&mut self, spec: Spec) -> usize {
        let proc = self.launch(spec);
        self.procs.push(proc);
        self.procs.len() - 1
    }

    fn launch(&mut self, spec: Spec) -> Proc {
        let (mut cmd, stderr) = self.command(&spec);
        cmd.stderr(File::create(&stderr).expect("worker stderr file"));
        let child = cmd.spawn().expect("spawning the fault worker");
        Proc {
            spec,
            pid: child.id(),
            child,
            exited: false,
        }
    }

    /// Starts `n` workers with `spec` and waits until each has logged `ready`.
    pub async fn spawn_ready(&mut self, n: usize, spec: &Spec) -> Vec<usize> {
        let slots: Vec<usize> = (0..n).map(|_| self.spawn(spec.clone())).collect();
        for &slot in &slots {
            let pid = self.procs[slot].pid;
            self.wait_for(&format!("worker {pid} to be ready"), |events| {
                events.iter().any(|e| e.is_ready(pid))
            })
            .await;
        }
        slots
    }

    /// Replaces the process in `slot` by a new one with `spec` (the old one must have exited or been
    /// killed).
    pub fn respawn(&mut self, slot: usize, spec: Spec) -> u32 {
        let proc = self.launch(spec);
        let pid = proc.pid;
        let mut old = std::mem::replace(&mut self.procs[slot], proc);
        let _ = old.child.kill();
        let _ = old.child.wait();
        pid
    }

    /// SIGKILLs the worker in `slot` (recorded as a fault) and waits for it to die.
    pub fn kill9(&mut self, slot: usize) {
        let at_ms = self.redis_ms();
        let p = &mut self.procs[slot];
        let _ = p.child.kill();
        let _ = p.child.wait();
        p.exited = true;
        self.faults.push(Fault {
            kind: "kill".into(),
            pid: Some(p.pid),
            at_ms,
        });
    }

    /// SIGSTOPs the worker in `slot` (recorded as a fault).
    pub fn stop(&mut self, slot: usize) {
        let at_ms = self.redis_ms();
        let pid = self.procs[slot].pid;
        signal(pid, "-STOP");
        self.faults.push(Fault {
            kind: "stop".into(),
            pid: Some(pid),
            at_ms,
        });
    }

    /// SIGCONTs the worker in `slot`.
    pub fn resume(&mut self, slot: usize) {
        signal(self.procs[slot].pid, "-CONT");
    }

    /// Records a fault on Redis itself (taken just before it happens).
    pub fn redis_fault(&mut self, kind: &str, at_ms: i64) {
        self.faults.push(Fault {
            kind: kind.into(),
            pid: None,
            at_ms,
        });
    }

    /// Restarts every worker that has exited by itself (a crash point or a poison job), with
    /// `respec(old spec)`, recording each exit as a fault. Returns how many.
    pub fn restart_exited(&mut self, mut respec: impl FnMut(&Spec) -> Spec) -> usize {
        let mut n = 0;
        for slot in 0..self.procs.len() {
            let p = &mut self.procs[slot];
            if p.exited || p.child.try_wait().expect("try_wait").is_none() {
                continue;
            }
            let pid = p.pid;
            let spec = respec(&p.spec);
            let at_ms = self.redis_ms();
            self.faults.push(Fault {
                kind: "crash".into(),
                pid: Some(pid),
                at_ms,
            });
            self.respawn(slot, spec);
            n += 1;
        }
        n
    }

    /// The workers' stderr, for failure messages.
    pub fn worker_stderr(&self) -> String {
        let mut out = String::new();
        for i in 1..=self.spawned {
            let path = self.dir.path().join(format!("worker-{i}.err"));
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(20).collect();
            if !tail.is_empty() {
                out.push_str(&format!("--- worker-{i}.err (last lines)\n"));
                for l in tail.into_iter().rev() {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .expect("running kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}
