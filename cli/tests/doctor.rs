//! `postpone doctor` against servers set up well and badly: one line per check, exit 1 when any is bad.

mod support;

use serde_json::Value;
use support::{postpone, RedisServer};

fn check<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name:?} in {doc:#}"))
}

fn line<'a>(stdout: &'a str, name: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no line for {name:?} in:\n{stdout}"))
}

#[test]
fn an_evicting_server_is_bad() {
    let server = RedisServer::builder()
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start();
    let r = postpone(&server.url(), "doctor", &["doctor"]);
    assert_eq!(r.code, 1, "{r:#?}");
    let l = line(&r.stdout, "maxmemory-policy");
    assert!(l.starts_with("bad") && l.contains("allkeys-lru"), "{l}");
    assert!(r.stdout.contains("noeviction"), "says what to do: {r:#?}");
    let r = postpone(&server.url(), "doctor", &["doctor", "--json"]);
    assert_eq!(r.code, 1, "{r:#?}");
    let doc = r.json();
    assert_eq!(doc["level"], "bad");
    let c = check(&doc, "maxmemory-policy");
    assert_eq!(
        (c["level"].as_str(), c["found"].as_str()),
        (Some("bad"), Some("allkeys-lru"))
    );
    assert!(
        c["advice"].as_str().unwrap().contains("noeviction"),
        "{c:#}"
    );
}

#[test]
fn a_server_with_aof_everysec_is_ok_and_told_how_to_restart_after_a_crash() {
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("everysec")
        .start();
    let r = postpone(&server.url(), "doctor", &["doctor"]);
    assert_eq!(r.code, 0, "{r:#?}");
    for name in ["redis", "maxmemory-policy", "persistence", "clock"] {
        let l = line(&r.stdout, name);
        assert!(l.starts_with("ok"), "{l}\n{}", r.stdout);
    }
    assert!(line(&r.stdout, "persistence").contains("AOF on, appendfsync everysec"));
    let doc = postpone(&server.url(), "doctor", &["doctor", "--json"]).json();
    assert_eq!(doc["level"], "ok");
    let version = check(&doc, "redis version");
    assert!(
        version["found"].as_str().unwrap().starts_with("Redis "),
        "{doc:#}"
    );
    assert_eq!(check(&doc, "clock")["level"], "ok");
    // Redis's default `aof-load-truncated yes` gets the advice on restarting after a crash.
    let advice = check(&doc, "persistence")["advice"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(advice.contains("redis-check-aof --fix"), "{advice}");
    let server = RedisServer::builder()
        .aof(true)
        .appendfsync("everysec")
        .arg("--aof-load-truncated")
        .arg("no")
        .start();
    let doc = postpone(&server.url(), "doctor", &["doctor", "--json"]).json();
    assert_eq!(check(&doc, "persistence")["level"], "ok");
    assert_eq!(check(&doc, "persistence")["advice"], Value::Null);
}

#[test]
fn a_server_without_persistence_is_warned_about() {
    // The test servers run with `save ""` and `appendonly no`.
    let server = RedisServer::start();
    let r = postpone(&server.url(), "doctor", &["doctor"]);
    assert_eq!(r.code, 0, "warnings alone do not fail: {r:#?}");
    let l = line(&r.stdout, "persistence");
    assert!(l.starts_with("warn") && l.contains("none"), "{l}");
    assert!(r.stdout.contains("appendonly yes"), "{r:#?}");
    let server = RedisServer::builder().arg("--save").arg("3600 1").start();
    let doc = postpone(&server.url(), "doctor", &["doctor", "--json"]).json();
    let c = check(&doc, "persistence");
    assert_eq!(c["level"], "warn");
    assert!(
        c["found"].as_str().unwrap().contains("RDB snapshots only"),
        "{c:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_checked_master_by_master() {
    let cluster = support::redis_cluster::RedisCluster::start();
    let nodes = cluster.urls().join(",");
    let doctor = |json: bool| {
        let mut cmd = support::command();
        cmd.args(["--cluster", &nodes, "--namespace", "doctor", "doctor"]);
        if json {
            cmd.arg("--json");
        }
        support::run(cmd)
    };
    let r = doctor(false);
    assert_eq!(r.code, 0, "warnings alone: {r:#?}");
    let slots = r
        .stdout
        .lines()
        .find(|l| l.contains("cluster slots"))
        .expect("a slots line");
    assert!(
        slots.starts_with("ok") && slots.ends_with("all 16384 slots served by 3 masters"),
        "{r:#?}"
    );
    let r = doctor(true);
    let doc = r.json();
    assert_eq!(check(&doc, "cluster slots")["level"], "ok");
    let replicas = check(&doc, "cluster replicas");
    assert_eq!(replicas["level"], "warn");
    assert!(
        replicas["found"]
            .as_str()
            .unwrap()
            .starts_with("3 of 3 masters without a replica"),
        "{doc:#}"
    );
    assert_eq!(
        check(&doc, "maxmemory-policy")["found"],
        "noeviction (all 3 masters)"
    );
    assert!(
        check(&doc, "clock")["found"]
            .as_str()
            .unwrap()
            .contains("furthest of 3 masters"),
        "{doc:#}"
    );

    // The other commands work on a cluster too, and say where a job lives.
    let client = postpone::Client::builder()
        .namespace("doctor")
        .redis_cluster(&cluster.urls())
        .await
        .unwrap();
    client
        .enqueue(support::CloseOrder { order_id: 7 })
        .id("order:7")
        .after(std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let job = |json: bool| {
        let mut cmd = support::command();
        cmd.args(["--cluster", &nodes, "--namespace", "doctor"])
            .args(["job", "cli.orders", "order:7"]);
        if json {
            cmd.arg("--json");
        }
        support::run(cmd)
    };
    let r = job(true);
    assert_eq!(r.code, 0, "{r:#?}");
    let node = r.json()["node"]
        .as_str()
        .expect("the master storing it")
        .to_owned();
    assert!(cluster.urls().iter().any(|u| u.ends_with(&node)), "{node}");
    let r = job(false);
    assert!(r.stdout.contains(&format!("node      {node}")), "{r:#?}");

    // A master that does not answer is bad.
    cluster.kill9(1);
    let r = doctor(true);
    assert_eq!(r.code, 1, "{r:#?}");
    let doc = r.json();
    let down = doc["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().starts_with("master "))
        .unwrap_or_else(|| panic!("a line for the master that is down: {doc:#}"));
    assert_eq!(down["level"], "bad");
    assert!(
        down["found"]
            .as_str()
            .unwrap()
            .starts_with("did not answer"),
        "{doc:#}"
    );
}

// `scripts` shows this build's and other builds' function libraries; `--prune` deletes other builds'
// (and the doctor's line says how many are left).
#[test]
fn scripts_shows_and_prunes_other_builds_libraries() {
    const OTHER_BUILD: &str = "#!lua name=postpone_0123456789012345678901234567890123456789
redis.register_function('postpone_0123456789012345678901234567890123456789', function() return 1 end)";
    let server = RedisServer::start();
    server.cli(&["FUNCTION", "LOAD", OTHER_BUILD]).unwrap();
    let r = postpone(&server.url(), "doctor", &["scripts"]);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(r.stdout.contains("other builds':   1"), "{r:#?}");
    assert!(r.stdout.contains("postpone scripts --prune"), "{r:#?}");
    let l = line(
        &postpone(&server.url(), "doctor", &["doctor"]).stdout,
        "script",
    )
    .to_owned();
    assert!(
        l.starts_with("ok") && l.contains("1 of other builds"),
        "{l}"
    );

    let doc = postpone(&server.url(), "doctor", &["scripts", "--prune", "--json"]).json();
    assert_eq!(
        (&doc["servers"], &doc["others"], &doc["deleted"]),
        (&Value::from(1), &Value::from(0), &Value::from(1)),
        "{doc:#}"
    );
    let r = postpone(&server.url(), "doctor", &["scripts"]);
    assert!(r.stdout.contains("other builds':   0"), "{r:#?}");
    assert!(!r.stdout.contains("--prune"), "{r:#?}");
}
