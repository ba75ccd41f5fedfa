//! The Host a request names, over plain HTTP (no browser) against a redis-server of the test's own: a
//! dashboard without a token, served alone or mounted in an application with `router()`, answers
//! only loopback names (a DNS-rebinding page names its own) unless the application lists its names,
//! and the same-origin check trusts no forwarded header unless the application says so.

use std::time::Duration;

use postpone::Client;
use postpone_dashboard::Dashboard;

use crate::jobs::*;
use crate::support::{csrf_of, free_port, http, listening, RedisServer};

/// A client on a new redis-server, with one timer scheduled an hour ahead.
async fn world() -> (RedisServer, Client) {
    let redis = RedisServer::start();
    let client = Client::connect(&redis.url()).await.unwrap();
    client
        .enqueue(Timer { n: 7 })
        .id("timer:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    (redis, client)
}

/// `dashboard` mounted at `/jobs` in an app on 127.0.0.1 (as an application does): its address.
async fn mount(dashboard: Dashboard) -> String {
    let app = axum::Router::new().nest("/jobs", dashboard.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

async fn paused(client: &Client) -> bool {
    client
        .ops()
        .topics()
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.name == "live.timers")
        .unwrap()
        .counts
        .paused
}

const JOB: &str = "job?topic=live.timers&id=timer%3A1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_on_loopback_without_a_token_refuses_a_rebinding_host() {
    let (_redis, client) = world().await;
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let dashboard = Dashboard::new(client.clone());
    tokio::spawn(dashboard.serve(addr.parse().unwrap()));
    listening(&addr).await;

    // The loopback names, with the port.
    for host in [
        addr.clone(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let (status, page) = http(&addr, "GET", &format!("/{JOB}"), &[("Host", &host)], "").await;
        assert_eq!(status, 200, "{host}: {page}");
        assert!(page.contains("&#34;n&#34;: 7"), "the payload: {page}");
    }
    // A page of another name that resolved to 127.0.0.1 reads nothing, not even the CSRF token.
    let rebound = format!("rebind.attacker.example:{port}");
    for path in [
        "/",
        &format!("/{JOB}"),
        "/events",
        "/topic?name=live.timers",
    ] {
        let (status, page) = http(&addr, "GET", path, &[("Host", &rebound)], "").await;
        assert_eq!(status, 403, "{path}: {page}");
        assert!(
            !page.contains("timer:1") && !page.contains("csrf"),
            "{page}"
        );
    }
    rebinding_pause_is_refused_and_an_honest_one_done(&client, &addr, "", &rebound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_mounted_with_router_without_a_token_refuses_a_rebinding_host() {
    let (_redis, client) = world().await;
    // As an application mounts it, listing no host names: the default.
    let addr = mount(Dashboard::new(client.clone())).await;
    let port = addr.rsplit(':').next().unwrap().to_owned();

    // Loopback names, with the port or without (the router does not know the port it is served on).
    for host in [
        addr.clone(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "127.0.0.1".to_owned(),
        "LOCALHOST".to_owned(),
    ] {
        let (status, page) = http(
            &addr,
            "GET",
            &format!("/jobs/{JOB}"),
            &[("Host", &host)],
            "",
        )
        .await;
        assert_eq!(status, 200, "{host}: {page}");
        assert!(page.contains("&#34;n&#34;: 7"), "the payload: {page}");
    }
    // A rebinding page's name, with the port or without: no page, no event stream, no script, no
    // CSRF token.
    for rebound in [
        format!("rebind.attacker.example:{port}"),
        "rebind.attacker.example".into(),
    ] {
        for path in [
            "/jobs".to_owned(),
            format!("/jobs/{JOB}"),
            "/jobs/events".to_owned(),
            "/jobs/topic?name=live.timers".to_owned(),
            "/jobs/assets/dashboard.js".to_owned(),
        ] {
            let (status, page) = http(&addr, "GET", &path, &[("Host", &rebound)], "").await;
            assert_eq!(status, 403, "{rebound} {path}: {page}");
            assert!(
                !page.contains("timer:1") && !page.contains("csrf"),
                "{page}"
            );
        }
    }
    let rebound = format!("rebind.attacker.example:{port}");
    rebinding_pause_is_refused_and_an_honest_one_done(&client, &addr, "/jobs", &rebound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_mounted_with_router_answers_the_names_the_application_lists() {
    let (_redis, client) = world().await;
    // An application served as jobs.example.com (behind its own auth): the list replaces loopback.
    let addr = mount(Dashboard::new(client.clone()).allowed_hosts(["jobs.example.com"])).await;
    let (status, page) = http(&addr, "GET", "/jobs", &[("Host", "jobs.example.com")], "").await;
    assert_eq!(status, 200, "{page}");
    for host in [addr.as_str(), "localhost", "rebind.attacker.example"] {
        let (status, page) = http(&addr, "GET", "/jobs", &[("Host", host)], "").await;
        assert_eq!(status, 403, "{host}: {page}");
    }
    // With a token and no list: any name, each asked for the token (a rebinding page has none).
    let addr = mount(Dashboard::new(client.clone()).with_token("s3cret")).await;
    for host in ["jobs.example.com", "rebind.attacker.example"] {
        let (status, page) = http(&addr, "GET", "/jobs", &[("Host", host)], "").await;
        assert_eq!(status, 401, "{host}: {page}");
        let (status, page) = http(
            &addr,
            "GET",
            "/jobs",
            &[("Host", host), ("Authorization", "Bearer s3cret")],
            "",
        )
        .await;
        assert_eq!(status, 200, "{host}: {page}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_same_origin_check_ignores_a_forged_forwarded_host() {
    let (_redis, client) = world().await;
    let addr = mount(Dashboard::new(client.clone())).await;
    let (_, page) = http(
        &addr,
        "GET",
        "/jobs/topic?name=live.timers",
        &[("Host", &addr)],
        "",
    )
    .await;
    let body = format!("topic=live.timers&csrf={}", csrf_of(&page));
    let (status, answer) = http(
        &addr,
        "POST",
        "/jobs/action/pause",
        &[
            ("Host", &addr),
            ("Origin", "http://evil.example"),
            ("X-Forwarded-Host", "evil.example"),
        ],
        &body,
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(!paused(&client).await, "a forged X-Forwarded-Host passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_behind_its_own_proxy_reads_the_forwarded_host_when_told() {
    let (_redis, client) = world().await;
    // The proxy serves jobs.example.com and forwards to 127.0.0.1 with X-Forwarded-Host.
    let addr = mount(
        Dashboard::new(client.clone())
            .allowed_hosts(["jobs.example.com"])
            .trust_forwarded_headers(true),
    )
    .await;
    let proxied = [
        ("Host", addr.as_str()),
        ("X-Forwarded-Host", "jobs.example.com"),
    ];
    let (status, page) = http(&addr, "GET", "/jobs/topic?name=live.timers", &proxied, "").await;
    assert_eq!(status, 200, "{page}");
    let body = format!("topic=live.timers&csrf={}", csrf_of(&page));
    // Without the proxy's header, the name is 127.0.0.1: not one it answers to.
    let (status, _) = http(&addr, "GET", "/jobs", &[("Host", &addr)], "").await;
    assert_eq!(status, 403);
    // A name the proxy did not forward is refused, whatever Origin says.
    let (status, _) = http(
        &addr,
        "POST",
        "/jobs/action/pause",
        &[
            ("Host", &addr),
            ("X-Forwarded-Host", "evil.example"),
            ("Origin", "http://evil.example"),
        ],
        &body,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = http(
        &addr,
        "POST",
        "/jobs/action/pause",
        &[
            ("Host", &addr),
            ("X-Forwarded-Host", "jobs.example.com"),
            ("Origin", "http://evil.example"),
        ],
        &body,
    )
    .await;
    assert_eq!(status, 403, "another origin");
    assert!(!paused(&client).await);
    let (status, answer) = http(
        &addr,
        "POST",
        "/jobs/action/pause",
        &[
            ("Host", &addr),
            ("X-Forwarded-Host", "jobs.example.com"),
            ("Origin", "https://jobs.example.com"),
        ],
        &body,
    )
    .await;
    assert_eq!(status, 303, "{answer}");
    assert!(paused(&client).await);
}

/// A pause POSTed under the `rebound` Host, with the CSRF token read the honest way and an Origin that
/// matches its Host, is refused (the topic stays running); the same POST under the name the dashboard
/// serves (`addr`) is done. `base` is where the dashboard is mounted.
async fn rebinding_pause_is_refused_and_an_honest_one_done(
    client: &Client,
    addr: &str,
    base: &str,
    rebound: &str,
) {
    let topic_page = format!("{base}/topic?name=live.timers");
    let (_, page) = http(addr, "GET", &topic_page, &[("Host", addr)], "").await;
    let body = format!("topic=live.timers&csrf={}", csrf_of(&page));
    let pause = format!("{base}/action/pause");
    let origin = format!("http://{rebound}");
    let (status, answer) = http(
        addr,
        "POST",
        &pause,
        &[("Host", rebound), ("Origin", &origin)],
        &body,
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(!paused(client).await, "a rebinding page paused the topic");
    let origin = format!("http://{addr}");
    let (status, answer) = http(
        addr,
        "POST",
        &pause,
        &[("Host", addr), ("Origin", &origin)],
        &body,
    )
    .await;
    assert_eq!(status, 303, "{answer}");
    assert!(paused(client).await);
}
