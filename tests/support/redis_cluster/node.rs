//! One cluster node: a redis-server under an `sh` watchdog that kills it when the test process ends.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::super::tempdir::TempDir;
use super::{Builder, INSTALL};

/// How long a node may take to answer PING after it is spawned.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// One cluster node, running under its watchdog.
#[derive(Debug)]
pub(super) struct Node {
    pub(super) port: u16,
    pub(super) dir: TempDir,
    pub(super) process: Mutex<Option<Watched>>,
}

/// A redis-server and the `sh` watchdog that started it.
#[derive(Debug)]
pub(super) struct Watched {
    /// The watchdog; it kills `pid` when its stdin closes.
    shell: Child,
    /// Held open for as long as the node should live.
    stdin: Option<ChildStdin>,
    /// The redis-server's pid (a child of `shell`, so it is not reaped, or reused, while `shell` lives).
    pid: u32,
}

/// The watchdog: starts redis-server with the given arguments in the background, prints its pid, waits
/// for its stdin to close, then kills the server and deletes its directory (a shared cluster's
/// `TempDir` is never dropped).
const WATCHDOG: &str = r#"redis-server "$@" </dev/null >/dev/null 2>"$POSTPONE_NODE_DIR/stderr" &
pid=$!
echo "$pid"
read -r _ignored
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
case "$POSTPONE_NODE_DIR" in
*/postpone-cluster-*) rm -rf "$POSTPONE_NODE_DIR" ;;
esac
exit 0"#;

impl Node {
    pub(super) fn start(options: &Builder) -> Node {
        let dir = TempDir::new("postpone-cluster-");
        let mut last_log = String::new();
        // A port picked free may be taken before redis-server binds it (or its bus port): try a few.
        for _ in 0..8 {
            let port = free_cluster_port();
            match spawn(port, dir.path(), options) {
                Ok(watched) => {
                    return Node {
                        port,
                        dir,
                        process: Mutex::new(Some(watched)),
                    }
                }
                Err(log) if log.contains("Address already in use") => last_log = log,
                Err(log) => panic!("redis-server did not start on port {port}; its log:\n{log}"),
            }
        }
        panic!("redis-server could not bind a free port; its last log:\n{last_log}");
    }

    pub(super) fn url(&self) -> String {
        url(self.port)
    }

    /// Kills the node: closing the watchdog's stdin makes it kill redis-server with SIGKILL and wait.
    pub(super) fn kill9(&self) {
        if let Some(w) = self.process.lock().unwrap().take() {
            w.kill9();
        }
    }

    /// Sends `signal` (e.g. `-STOP`, `-CONT`) to the running redis-server.
    pub(super) fn signal(&self, signal: &str) {
        let process = self.process.lock().unwrap();
        let w = process.as_ref().expect("the node is not running");
        let status = Command::new("kill")
            .arg(signal)
            .arg(w.pid.to_string())
            .status()
            .expect("running kill");
        assert!(status.success(), "kill {signal} failed");
    }

    /// One command on a fresh connection to this node only.
    pub(super) fn cli(&self, args: &[&str]) -> Result<redis::Value, redis::RedisError> {
        cli(self.port, args)
    }
}

impl Watched {
    /// Whether the redis-server process still runs (a zombie, exited but not yet reaped by the
    /// watchdog, has state Z).
    fn alive(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .map(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| !rest.starts_with('Z'))
            })
            .unwrap_or(false)
    }

    fn kill9(mut self) {
        drop(self.stdin.take());
        let _ = self.shell.wait();
    }
}

fn url(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

/// Node `dir`'s log and the server's stderr.
pub(super) fn node_log(dir: &Path) -> String {
    let mut log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    log.push_str(&std::fs::read_to_string(dir.join("stderr")).unwrap_or_default());
    log
}

/// Starts a node on `port` in `dir` under its watchdog and waits for PING; on failure returns the log.
fn spawn(port: u16, dir: &Path, o: &Builder) -> Result<Watched, String> {
    // A watchdog that killed an earlier try deleted the directory.
    std::fs::create_dir_all(dir).expect("node directory");
    for f in ["redis.log", "stderr", "nodes.conf"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let port_arg = port.to_string();
    let node_timeout = o.node_timeout_ms.to_string();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(WATCHDOG)
        .arg("sh")
        .args([
            "--port",
            &port_arg,
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "no",
        ])
        .arg("--dir")
        .arg(dir)
        .arg("--logfile")
        .arg(dir.join("redis.log"))
        .args(["--save", "", "--appendonly", "no"])
        .args(["--cluster-enabled", "yes"])
        .args(["--cluster-config-file", "nodes.conf"])
        .args(["--cluster-node-timeout", &node_timeout])
        .args([
            "--cluster-require-full-coverage",
            if o.full_coverage { "yes" } else { "no" },
        ])
        .args(&o.extra)
        .env("POSTPONE_NODE_DIR", dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut shell = cmd.spawn().expect("running sh");
    let mut line = String::new();
    BufReader::new(shell.stdout.take().expect("watchdog stdout"))
        .read_line(&mut line)
        .expect("reading the redis-server pid");
    let pid: u32 = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("the watchdog printed {line:?}, not a pid"));
    let stdin = shell.stdin.take();
    let watched = Watched { shell, stdin, pid };
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        // A PONG alone may come from another test's server on that port (this one then exits with
        // "Address already in use"): this node's own log says it is the one listening.
        if cli(port, &["PING"]).is_ok() && node_log(dir).contains("Ready to accept connections") {
            return Ok(watched);
        }
        let log = node_log(dir);
        if log.contains("redis-server: not found") || log.contains("redis-server: No such file") {
            watched.kill9();
            panic!(
                "redis-server is not on PATH, and the cluster tests need it (they start their own \
                 servers). {INSTALL}"
            );
        }
        if !watched.alive() || log.contains("Address already in use") || Instant::now() > deadline {
            watched.kill9();
            return Err(format!("no PONG on port {port}\n{log}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One command on a fresh connection to the node on `port` only (no redirection).
fn cli(port: u16, args: &[&str]) -> Result<redis::Value, redis::RedisError> {
    let client = redis::Client::open(url(port)).expect("url");
    let mut conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut conn)
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Ok(mut guard) = self.process.lock() {
            if let Some(w) = guard.take() {
                w.kill9();
            }
        }
    }
}

/// A loopback port that was free a moment ago, with its cluster bus port (port + 10000) free too.
fn free_cluster_port() -> u16 {
    for _ in 0..1000 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
        let port = listener.local_addr().expect("local addr").port();
        if port > 55_535 {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair (port, port + 10000) on 127.0.0.1");
}
