//! A Redis Cluster of the test's own: N masters (no replicas) on free loopback ports, each in a temp dir.
//!
//! ```ignore
//! let cluster = RedisCluster::start();            // 3 masters, slots spread by redis-cli
//! let client = Client::builder().redis_cluster(&cluster.urls()).await?;
//! cluster.kill9(1);                               // one master dies; its slots stay unserved
//! let shared = RedisCluster::shared();            // one cluster per test binary
//! ```
//!
//! Each node is a `redis-server --cluster-enabled yes`; `redis-cli --cluster create ... --cluster-replicas
//! 0 --cluster-yes` assigns the slots, and `start` returns once `CLUSTER INFO` says `cluster_state:ok`
//! with all slots and all nodes known on every node. Dropping the cluster kills its nodes and deletes their
//! directories.
//!
//! Every node runs under a small `sh` watchdog that holds a pipe from the test process: when the test
//! process ends, however it ends, the pipe closes and the watchdog kills its node with SIGKILL. So the
//! cluster of [`RedisCluster::shared`] (a static, never dropped) never outlives its test binary.
//!
//! It never touches a server it did not start. When `redis-server` or `redis-cli` is not on PATH it
//! panics with how to install them: tests never skip silently.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a node may take to answer PING after it is spawned.
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the cluster may take to agree on its slots after `redis-cli --cluster create`.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(30);

const INSTALL: &str = "Install Redis 6.2 or later (redis-server and redis-cli), e.g. `sudo apt-get install \
     redis-server` (Debian/Ubuntu, redis-cli comes with it) or `brew install redis` (macOS), then run the \
     tests again.";

/// Options for a test cluster.
#[derive(Debug, Clone)]
#[must_use]
pub struct Builder {
    masters: usize,
    node_timeout_ms: u32,
    full_coverage: bool,
    extra: Vec<String>,
}

impl Builder {
    /// How many masters (default 3; at least 3, as `redis-cli --cluster create` requires).
    pub fn masters(mut self, n: usize) -> Self {
        self.masters = n;
        self
    }

    /// `cluster-node-timeout` in ms (default 2000): how long a node may be unreachable before the
    /// others mark it failed.
    pub fn node_timeout_ms(mut self, ms: u32) -> Self {
        self.node_timeout_ms = ms;
        self
    }

    /// `cluster-require-full-coverage` (default yes, as in Redis). With `false`, the surviving masters
    /// keep serving their slots when a master without replicas dies.
    pub fn require_full_coverage(mut self, on: bool) -> Self {
        self.full_coverage = on;
        self
    }

    /// Any other `redis-server` argument for every node.
    pub fn arg(mut self, arg: &str) -> Self {
        self.extra.push(arg.to_owned());
        self
    }

    /// Starts the nodes, creates the cluster and waits until every node says `cluster_state:ok`.
    pub fn start(self) -> RedisCluster {
        assert!(self.masters >= 3, "redis-cli needs at least 3 masters");
        let started = Instant::now();
        let nodes: Vec<Node> = (0..self.masters).map(|_| Node::start(&self)).collect();
        let cluster = RedisCluster { nodes };
        cluster.create();
        cluster.wait_converged();
        eprintln!(
            "test cluster on ports {:?} ready in {:?}",
            cluster.ports(),
            started.elapsed()
        );
        cluster
    }
}

/// A running Redis Cluster owned by one test (or, from [`RedisCluster::shared`], one test binary).
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
}

impl RedisCluster {
    /// Three masters with the default options.
    pub fn start() -> Self {
        Self::builder().start()
    }

    /// Options for a cluster.
    pub fn builder() -> Builder {
        Builder {
            masters: 3,
            node_timeout_ms: 2000,
            full_coverage: true,
            extra: Vec::new(),
        }
    }

    /// One cluster for the whole test binary, started on first use. Tests sharing it must keep to their
    /// own namespaces, and must not kill its nodes. Its nodes die with the test process.
    pub fn shared() -> &'static RedisCluster {
        static SHARED: OnceLock<RedisCluster> = OnceLock::new();
        SHARED.get_or_init(RedisCluster::start)
    }

    /// `redis://127.0.0.1:<port>` of every node (the seed list for a client).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// The seed list as `REDIS_CLUSTER_NODES` takes it: URLs separated by commas.
    pub fn nodes_env(&self) -> String {
        self.urls().join(",")
    }

    /// The nodes' ports.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Kills node `i` with SIGKILL (no replicas: its slots stay unserved until it comes back).
    pub fn kill9(&self, i: usize) {
        self.nodes[i].kill9();
    }

    /// Runs one command on node `i` (no redirection) and returns its reply.
    pub fn cli(&self, i: usize, args: &[&str]) -> Result<redis::Value, redis::RedisError> {
        self.nodes[i].cli(args)
    }

    /// The keys held by node `i` (KEYS *; test data is small), sorted.
    pub fn node_keys(&self, i: usize) -> Vec<String> {
        let mut keys: Vec<String> =
            redis::FromRedisValue::from_redis_value(self.cli(i, &["KEYS", "*"]).expect("KEYS"))
                .expect("KEYS reply");
        keys.sort();
        keys
    }

    /// Which node serves the slot of `key`, by asking node 0 (`CLUSTER KEYSLOT`, `CLUSTER SLOTS`).
    pub fn node_of(&self, key: &str) -> usize {
        let slot: i64 = redis::FromRedisValue::from_redis_value(
            self.cli(0, &["CLUSTER", "KEYSLOT", key]).expect("KEYSLOT"),
        )
        .expect("slot");
        let ranges: Vec<(i64, i64, (String, i64))> = {
            let v = self.cli(0, &["CLUSTER", "SLOTS"]).expect("CLUSTER SLOTS");
            let redis::Value::Array(items) = v else {
                panic!("CLUSTER SLOTS: {v:?}")
            };
            items
                .into_iter()
                .map(|r| {
                    let redis::Value::Array(f) = r else {
                        panic!("slot range {r:?}")
                    };
                    let start: i64 = redis::FromRedisValue::from_redis_value(f[0].clone()).unwrap();
                    let end: i64 = redis::FromRedisValue::from_redis_value(f[1].clone()).unwrap();
                    let redis::Value::Array(master) = f[2].clone() else {
                        panic!("master {:?}", f[2])
                    };
                    let host: String =
                        redis::FromRedisValue::from_redis_value(master[0].clone()).unwrap();
                    let port: i64 =
                        redis::FromRedisValue::from_redis_value(master[1].clone()).unwrap();
                    (start, end, (host, port))
                })
                .collect()
        };
        let (_, _, (_, port)) = ranges
            .iter()
            .find(|(s, e, _)| (*s..=*e).contains(&slot))
            .unwrap_or_else(|| panic!("no node serves slot {slot}"));
        self.nodes
            .iter()
            .position(|n| i64::from(n.port) == *port)
            .expect("a node of this cluster")
    }

    /// Moves the slot of `key`, with every key in it, to node `to`, the way `redis-cli --cluster reshard`
    /// does: the target imports, the source migrates, `MIGRATE` moves the keys in batches, then every node
    /// learns the new owner. Clients see ASK, TRYAGAIN and then MOVED. Returns the slot.
    pub fn migrate_slot_of(&self, key: &str, to: usize) -> u16 {
        let slot: i64 = redis::FromRedisValue::from_redis_value(
            self.cli(0, &["CLUSTER", "KEYSLOT", key]).expect("KEYSLOT"),
        )
        .expect("slot");
        let slot_arg = slot.to_string();
        let from = self.node_of(key);
        assert_ne!(from, to, "the slot of {key:?} is already on node {to}");
        let id = |i: usize| -> String {
            redis::FromRedisValue::from_redis_value(
                self.cli(i, &["CLUSTER", "MYID"]).expect("MYID"),
            )
            .expect("node id")
        };
        let (from_id, to_id) = (id(from), id(to));
        self.cli(
            to,
            &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &from_id],
        )
        .expect("SETSLOT IMPORTING");
        self.cli(
            from,
            &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &to_id],
        )
        .expect("SETSLOT MIGRATING");
        let to_port = self.nodes[to].port.to_string();
        loop {
            let keys: Vec<String> = redis::FromRedisValue::from_redis_value(
                self.cli(from, &["CLUSTER", "GETKEYSINSLOT", &slot_arg, "100"])
                    .expect("GETKEYSINSLOT"),
            )
            .expect("keys");
            if keys.is_empty() {
                break;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            self.cli(from, &args).expect("MIGRATE");
        }
        for i in 0..self.nodes.len() {
            if self.nodes[i].process.lock().unwrap().is_some() {
                self.cli(i, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &to_id])
                    .expect("SETSLOT NODE");
            }
        }
        slot as u16
    }

    /// Node `i`'s log so far.
    pub fn log(&self, i: usize) -> String {
        node_log(self.nodes[i].dir.path())
    }

    fn create(&self) {
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster").arg("create");
        for n in &self.nodes {
            cmd.arg(format!("127.0.0.1:{}", n.port));
        }
        cmd.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = match cmd.output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "redis-cli is not on PATH, and the cluster tests need it to create their cluster. {INSTALL}"
            ),
            Err(e) => panic!("could not run redis-cli: {e}"),
        };
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Waits until every node reports the whole cluster: state ok, all slots assigned, all nodes known.
    fn wait_converged(&self) {
        let deadline = Instant::now() + CONVERGE_TIMEOUT;
        let want_nodes = format!("cluster_known_nodes:{}", self.nodes.len());
        loop {
            let infos: Vec<String> = self
                .nodes
                .iter()
                .map(|n| {
                    n.cli(&["CLUSTER", "INFO"])
                        .ok()
                        .and_then(|v| redis::FromRedisValue::from_redis_value(v).ok())
                        .unwrap_or_default()
                })
                .collect();
            let ok = infos.iter().all(|info: &String| {
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && info.contains(&want_nodes)
            });
            if ok {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the test cluster did not converge within {CONVERGE_TIMEOUT:?}; CLUSTER INFO per node:\n{}",
                infos.join("\n---\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One cluster node, running under its watchdog.
#[derive(Debug)]
struct Node {
    port: u16,
    dir: tempfile::TempDir,
    process: Mutex<Option<Watched>>,
}

/// A redis-server and the `sh` watchdog that started it.
#[derive(Debug)]
struct Watched {
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
    fn start(options: &Builder) -> Node {
        let dir = tempfile::Builder::new()
            .prefix("postpone-cluster-")
            .tempdir()
            .expect("temp dir");
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

    fn url(&self) -> String {
        url(self.port)
    }

    /// Kills the node: closing the watchdog's stdin makes it kill redis-server with SIGKILL and wait.
    fn kill9(&self) {
        if let Some(w) = self.process.lock().unwrap().take() {
            w.kill9();
        }
    }

    /// One command on a fresh connection to this node only.
    fn cli(&self, args: &[&str]) -> Result<redis::Value, redis::RedisError> {
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
fn node_log(dir: &Path) -> String {
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
        if cli(port, &["PING"]).is_ok() {
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
