//! A `redis-server` of the test's own: free loopback port, temp dir, killed on drop.
//!
//! ```ignore
//! let server = RedisServer::start();
//! let durable = RedisServer::builder().aof(true).appendfsync("always").start();
//! server.kill9();
//! server.restart(); // same port and dir: AOF data survives
//! ```
//!
//! It never touches a server it did not start. When `redis-server` is not on PATH it panics with how to
//! install it: tests never skip silently.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::tempdir::TempDir;

/// How long a server may take to answer PING after it is spawned.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Options for a test server.
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    aof: bool,
    appendfsync: String,
    extra: Vec<String>,
}

impl Builder {
    /// Append-only file on or off (default off).
    pub fn aof(mut self, on: bool) -> Self {
        self.aof = on;
        self
    }

    /// `appendfsync`: `always`, `everysec` (default) or `no`.
    pub fn appendfsync(mut self, policy: &str) -> Self {
        self.appendfsync = policy.to_owned();
        self
    }

    /// Any other `redis-server` argument, e.g. `.arg("--maxmemory-policy").arg("allkeys-lru")`.
    pub fn arg(mut self, arg: &str) -> Self {
        self.extra.push(arg.to_owned());
        self
    }

    /// Starts the server and waits until it answers PING.
    pub fn start(self) -> RedisServer {
        let dir = TempDir::new("postpone-redis-");
        let mut server = RedisServer {
            options: self,
            port: 0,
            dir: dir.path().to_owned(),
            child: Mutex::new(None),
            _dir: Some(dir),
        };
        let mut last_log = String::new();
        // A port picked free may be taken before redis-server binds it: try a few.
        for _ in 0..5 {
            server.port = free_port();
            match server.spawn() {
                Ok(()) => return server,
                Err(log) if log.contains("Address already in use") => last_log = log,
                Err(log) => panic!(
                    "redis-server did not start on port {}; its log:\n{log}",
                    server.port
                ),
            }
        }
        panic!("redis-server could not bind a free port; its last log:\n{last_log}");
    }
}

/// A running `redis-server` owned by one test.
#[derive(Debug)]
pub struct RedisServer {
    options: Builder,
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    /// Deleted when the server is dropped (after the process is killed).
    _dir: Option<TempDir>,
}

impl RedisServer {
    /// A server with no persistence.
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// Options for a server.
    pub fn builder() -> Builder {
        Builder {
            aof: false,
            appendfsync: "everysec".into(),
            extra: Vec::new(),
        }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills the server with SIGKILL (no shutdown, no final save) and waits for it to exit.
    pub fn kill9(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server if it runs, then starts it again on the same port and dir (AOF data survives),
    /// as a start script should after a crash: the AOF repaired first (see [`RedisServer::repair_aof`]).
    pub fn restart(&self) {
        self.kill9();
        self.repair_aof();
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match self.spawn() {
                Ok(()) => return,
                // The old socket may linger for a moment.
                Err(log) if log.contains("Address already in use") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(log) => panic!(
                    "redis-server did not restart on port {}; its log:\n{log}",
                    self.port
                ),
            }
        }
    }

    /// The AOF's manifest (Redis 7's multi-part AOF, `appendonlydir`), when the server keeps one.
    pub fn aof_manifest(&self) -> Option<PathBuf> {
        let manifest = self
            .dir
            .join("appendonlydir")
            .join("appendonly.aof.manifest");
        (self.options.aof && manifest.exists()).then_some(manifest)
    }

    /// What `redis-check-aof` takes: the manifest, or before Redis 7 the AOF itself.
    fn aof_to_check(&self) -> Option<PathBuf> {
        let single = self.dir.join("appendonly.aof");
        self.aof_manifest()
            .or_else(|| (self.options.aof && single.exists()).then_some(single))
    }

    /// Cuts a write that a crash tore at the end of the AOF, with `redis-check-aof --fix`, as
    /// docs/guide/deploying-redis.md tells operators to before starting a Redis that did not shut down
    /// cleanly. Redis itself (7.0.15 here, `aof-load-truncated yes`) loads past a script's transaction
    /// torn in its last command but leaves its start in the file, so the next restart applies it
    /// after all, before the first transaction written since (tests/redis_faults.rs shows it cut
    /// whole instead). Does nothing without an AOF.
    pub fn repair_aof(&self) {
        let Some(aof) = self.aof_to_check() else {
            return;
        };
        let child = Command::new("redis-check-aof")
            .arg("--fix")
            .arg(&aof)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-check-aof is not on PATH, and the tests that restart Redis on its AOF need it \
                 (Debian/Ubuntu: `sudo apt-get install redis-tools`)"
            ),
            Err(e) => panic!("could not run redis-check-aof: {e}"),
        };
        // It asks before it truncates.
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(b"y\n");
        }
        let out = child
            .wait_with_output()
            .expect("waiting for redis-check-aof");
        assert!(
            out.status.success(),
            "redis-check-aof --fix {} failed ({}):\n{}{}",
            aof.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Said in the test's output: a fault test that met a torn AOF shows it.
        let said = String::from_utf8_lossy(&out.stdout);
        if said.contains("truncated") {
            let lines: Vec<&str> = said
                .lines()
                .filter(|l| l.contains("AOF analyzed") || l.contains("truncated"))
                .collect();
            eprintln!(
                "redis-check-aof cut a torn write from {}:\n{}",
                aof.display(),
                lines.join("\n")
            );
        }
    }

    /// Stops the process (SIGSTOP): connections stay open but nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Resumes a paused process (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// A client for this server whose connections do not send `CLIENT SETINFO` (which Redis before 7.2
    /// counts as an error in `INFO errorstats`).
    pub fn client(&self) -> redis::Client {
        use redis::IntoConnectionInfo;
        let info = self.url().into_connection_info().expect("url");
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        redis::Client::open(info.set_redis_settings(settings)).expect("url")
    }

    /// Runs one command on a fresh connection and returns its reply (panics on a connection error;
    /// a server error is returned as `Err`).
    pub fn cli(&self, args: &[&str]) -> Result<redis::Value, redis::RedisError> {
        let mut conn = self
            .client()
            .get_connection_with_timeout(Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connecting to the test server on port {}: {e}", self.port));
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query(&mut conn)
    }

    /// Every key of the server (KEYS *; test data is small).
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = match self.cli(&["KEYS", "*"]).expect("KEYS") {
            redis::Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    redis::Value::BulkString(b) => String::from_utf8(b).expect("utf-8 key"),
                    other => panic!("unexpected key {other:?}"),
                })
                .collect(),
            other => panic!("unexpected KEYS reply {other:?}"),
        };
        keys.sort();
        keys
    }

    /// The keys that hold per-key state of fairness by key (`fq:<SHA-1>` queues, `fone`, `fskip`,
    /// `fready`, `fwait`, `frun`, `ftat`, `fhold`): none once every keyed job ended.
    pub fn fairness_keys(&self) -> Vec<String> {
        self.keys()
            .into_iter()
            .filter(|k| {
                k.contains(":fq:")
                    || ["fone", "fskip", "fready", "fwait", "frun", "ftat", "fhold"]
                        .iter()
                        .any(|s| k.ends_with(&format!(":{s}")))
            })
            .collect()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    fn signal(&self, sig: &str) {
        let guard = self.child.lock().unwrap();
        let child = guard.as_ref().expect("the test server is not running");
        let status = Command::new("kill")
            .arg(sig)
            .arg(child.id().to_string())
            .status()
            .expect("running kill");
        assert!(status.success(), "kill {sig} failed");
    }

    /// Spawns the process and waits for PING; on failure returns the log.
    fn spawn(&self) -> Result<(), String> {
        let log = self.dir.join("redis.log");
        let _ = std::fs::remove_file(&log);
        let o = &self.options;
        let mut cmd = Command::new("redis-server");
        cmd.args([
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--daemonize",
            "no",
        ])
        .arg("--dir")
        .arg(&self.dir)
        .arg("--logfile")
        .arg(&log)
        .args([
            "--save",
            "",
            "--appendonly",
            if o.aof { "yes" } else { "no" },
        ])
        .args(["--appendfsync", &o.appendfsync])
        .args(&o.extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-server is not on PATH, and the Redis tests need it (they start their own servers). \
                 Install Redis 6.2 or later, e.g. `sudo apt-get install redis-server` (Debian/Ubuntu) or \
                 `brew install redis` (macOS), then run the tests again."
            ),
            Err(e) => panic!("could not run redis-server: {e}"),
        };
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("waiting for redis-server") {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut stderr);
                }
                return Err(format!("exited with {status}\n{stderr}\n{}", self.log()));
            }
            // A PONG alone may come from another test's server that took the port first (its
            // redis-server then exits with "Address already in use", maybe only after this PING):
            // this server's own log says it is the one listening.
            if ping(self.port) && self.log().contains("Ready to accept connections") {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no PONG within {START_TIMEOUT:?}\n{}", self.log()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        *self.child.lock().unwrap() = Some(child);
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Ok(mut guard) = self.child.lock() {
            if let Some(mut child) = guard.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("local addr").port()
}

/// Whether the server answers PING: PONG, or NOAUTH when it wants a password (not LOADING).
fn ping(port: u16) -> bool {
    let Ok(mut stream) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).is_ok()
        && (line.starts_with("+PONG") || line.starts_with("-NOAUTH"))
}
