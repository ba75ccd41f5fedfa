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

mod node;

use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use node::{node_log, Node};
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

    /// Stops node `i` (SIGSTOP): its connections stay open but nothing answers.
    pub fn pause(&self, i: usize) {
        self.nodes[i].signal("-STOP");
    }

    /// Resumes a paused node (SIGCONT).
    pub fn resume(&self, i: usize) {
        self.nodes[i].signal("-CONT");
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
