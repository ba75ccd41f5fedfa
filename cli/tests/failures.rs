//! How the `postpone` binary fails: usage errors (exit 2), connection errors that say what to do
//! (exit 1), and never a password in what it prints.

mod support;

use std::net::TcpListener;

use support::{command, postpone, run, RedisServer};

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["frobnicate"][..],
        &["jobs"],
        &["jobs", "t", "--limit", "0"],
        &["jobs", "t", "--limit", "1001"],
        &["jobs", "t", "--state", "sleeping"],
        &["stats", "--interval", "soon"],
        &["dead"],
    ] {
        let mut cmd = command();
        cmd.args(args);
        let r = run(cmd);
        assert_eq!(r.code, 2, "{args:?}: {r:#?}");
        assert!(
            r.stderr.contains("Usage") || r.stderr.contains("--help"),
            "{args:?}: {r:#?}"
        );
    }
    // Checked before connecting: no Redis needed to be told.
    for args in [
        &["reschedule", "t", "x"][..],
        &[
            "reschedule",
            "t",
            "x",
            "--in",
            "1m",
            "--at",
            "2030-01-01T00:00:00Z",
        ],
        &["dead", "purge", "t"],
        &["dead", "purge", "t", "x", "--all"],
        &["dead", "requeue", "t", "x", "--reason", "boom"],
    ] {
        let mut cmd = command();
        cmd.args(["--redis", &format!("redis://127.0.0.1:{}", closed_port())])
            .args(args);
        let r = run(cmd);
        assert_eq!(r.code, 2, "{args:?}: {r:#?}");
        assert!(r.stderr.starts_with("error: "), "{args:?}: {r:#?}");
    }
    let mut cmd = command();
    cmd.arg("--help");
    let r = run(cmd);
    assert_eq!(r.code, 0, "{r:#?}");
    for name in [
        "stats",
        "topics",
        "workers",
        "jobs",
        "job",
        "cancel",
        "reschedule",
        "run-now",
        "pause",
        "resume",
        "dead",
        "doctor",
        "Exit codes",
    ] {
        assert!(r.stdout.contains(name), "{name} in --help: {r:#?}");
    }
}

#[test]
fn bad_names_are_usage_errors() {
    let server = RedisServer::start();
    let r = postpone(&server.url(), "names", &["jobs", "not a topic!"]);
    assert_eq!(r.code, 2, "{r:#?}");
    assert!(r.stderr.contains("invalid topic name"), "{r:#?}");
    let r = postpone(&server.url(), "bad namespace!", &["topics"]);
    assert_eq!(r.code, 2, "{r:#?}");
}

#[test]
fn connection_errors_say_what_to_do_and_never_show_a_password() {
    let url = format!("redis://admin:hunter2-secret@127.0.0.1:{}/0", closed_port());
    for json in [false, true] {
        let mut cmd = command();
        cmd.args(["--redis", &url, "topics"]);
        if json {
            cmd.arg("--json");
        }
        let r = run(cmd);
        assert_eq!(r.code, 1, "{r:#?}");
        assert!(
            r.stderr
                .contains("could not connect to Redis at 127.0.0.1:"),
            "{r:#?}"
        );
        assert!(r.stderr.contains("hint: is Redis running"), "{r:#?}");
        assert!(
            !format!("{r:?}").contains("hunter2"),
            "a password in the output: {r:#?}"
        );
        if json {
            let doc = r.json();
            assert_eq!(doc["error"]["kind"], "connect");
            assert_eq!(doc["error"]["exit_code"], 1);
        }
    }
    // Nor in --help, when it comes from the environment.
    let mut cmd = command();
    cmd.env("REDIS_URL", &url).arg("--help");
    let r = run(cmd);
    assert_eq!(r.code, 0);
    assert!(!format!("{r:?}").contains("hunter2"), "{r:#?}");
}

#[test]
fn a_wrong_password_is_refused_without_showing_it() {
    let server = RedisServer::builder()
        .arg("--requirepass")
        .arg("right-pass-42")
        .start();
    let port = server.port();
    let wrong = format!("redis://:wrong-pass-17@127.0.0.1:{port}");
    let r = postpone(&wrong, "auth", &["topics"]);
    assert_eq!(r.code, 1, "{r:#?}");
    assert!(r.stderr.contains("hint: Redis wants a password"), "{r:#?}");
    assert!(!format!("{r:?}").contains("wrong-pass-17"), "{r:#?}");
    let right = format!("redis://:right-pass-42@127.0.0.1:{port}");
    for args in [
        &["topics"][..],
        &["doctor"],
        &["doctor", "--json"],
        &["stats", "--json"],
    ] {
        let r = postpone(&right, "auth", args);
        assert!(r.code == 0, "{args:?}: {r:#?}");
        assert!(
            !format!("{r:?}").contains("right-pass-42"),
            "{args:?}: {r:#?}"
        );
    }
}

#[test]
fn the_environment_names_the_server_and_namespace() {
    let server = RedisServer::start();
    let mut cmd = command();
    cmd.env("REDIS_URL", server.url())
        .env("POSTPONE_NAMESPACE", "from-env")
        .args(["doctor"]);
    let r = run(cmd);
    assert_eq!(r.code, 0, "{r:#?}");
    assert!(
        r.stdout
            .contains(&format!("namespace from-env on {}", server.url())),
        "{r:#?}"
    );
    // A flag wins over the environment.
    let mut cmd = command();
    cmd.env("REDIS_URL", format!("redis://127.0.0.1:{}", closed_port()))
        .args(["--redis", &server.url(), "topics"]);
    assert_eq!(run(cmd).code, 0);
}
