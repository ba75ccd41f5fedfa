//! Read-only mode, escaping, CSRF.

use std::time::Duration;

use crate::jobs::*;
use crate::support::Harness;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_shows_no_buttons_and_refuses_a_forged_post() {
    let h = Harness::start(true).await;
    h.client
        .enqueue(Timer { n: 1 })
        .id("timer:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    for page in [
        "",
        "topic?name=live.timers",
        "job?topic=live.timers&id=timer%3A1",
        "topic?name=live.timers&state=dead",
        "dead?topic=live.timers",
    ] {
        h.goto(page).await;
        assert_eq!(h.count("form[method=post]").await, 0, "{page}");
        let actions = "#pause, #resume, #run-now, #reschedule, #cancel, #requeue, #purge, #requeue-all, #purge-all, .requeue-group, .purge-group";
        assert_eq!(h.count(actions).await, 0, "{page}");
        assert_eq!(h.count("input[name=csrf]").await, 0, "{page}");
    }
    // From the page itself (same origin), and by hand.
    let status = h
        .js("return fetch('action/pause', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'topic=live.timers'}).then(r => r.status)")
        .await;
    assert_eq!(status, 403);
    let origin = h.origin.clone();
    for action in ["pause", "cancel", "no-such-action"] {
        let status = h
            .raw_post(
                &format!("action/{action}"),
                &[("Origin", &origin)],
                "topic=live.timers&id=timer%3A1",
            )
            .await;
        assert_eq!(status, 403, "{action}");
    }
    let c = counts(&h, "live.timers").await;
    assert!(!c.paused);
    assert_eq!(c.scheduled, 1);
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_in_a_payload_id_or_error_renders_as_text() {
    let h = Harness::start(false).await;
    let shutdown = worker(&h, &Flags::default());
    let id = format!("evil/{XSS}");
    h.client
        .enqueue(Evil { html: XSS.into() })
        .id(&id)
        .await
        .unwrap();
    h.until("it to die", || async {
        counts(&h, "xss.payloads").await.dead == 1
    })
    .await;
    h.client
        .enqueue(Evil { html: XSS.into() })
        .id(format!("later/{XSS}"))
        .after(Duration::from_secs(3600))
        .await
        .unwrap();

    let job = format!(
        "job?topic=xss.payloads&id={}",
        id.replace('/', "%2F")
            .replace('<', "%3C")
            .replace('>', "%3E")
            .replace('(', "%28")
            .replace(')', "%29")
    );
    for page in [
        job.as_str(),
        "topic?name=xss.payloads&state=dead",
        "topic?name=xss.payloads",
        "dead?topic=xss.payloads",
    ] {
        h.goto(page).await;
        assert!(!h.alert_open().await, "{page}: an alert opened");
        // The only script is the dashboard's own.
        assert_eq!(h.count("script").await, 1, "{page}");
        let text = h
            .js("return document.querySelector('main').innerText")
            .await;
        assert!(
            text.as_str().unwrap().contains(XSS),
            "{page}: the text is not shown:\n{text}"
        );
    }
    h.goto(&job).await;
    assert_eq!(h.text("h1.id").await, format!("{id} dead"));
    assert!(h
        .text("#payload")
        .await
        .contains(&format!("\"html\": \"{XSS}\"")));
    assert!(h
        .text("#reason")
        .await
        .contains(&format!("partner said {XSS}")));
    assert!(!h.alert_open().await);
    shutdown.shutdown();
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_without_the_csrf_token_or_from_another_origin_is_refused() {
    let h = Harness::start(false).await;
    h.client
        .enqueue(Timer { n: 1 })
        .id("timer:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    h.goto("topic?name=live.timers").await;
    let post = |body: &str| {
        format!(
            "return fetch('action/pause', {{method: 'POST', redirect: 'manual', headers: {{'Content-Type': 'application/x-www-form-urlencoded'}}, body: '{body}'}}).then(r => r.status)"
        )
    };
    assert_eq!(h.js(&post("topic=live.timers")).await, 403, "no token");
    assert_eq!(
        h.js(&post("topic=live.timers&csrf=0123")).await,
        403,
        "a wrong token"
    );
    let token = h
        .js("return document.querySelector('input[name=csrf]').value")
        .await;
    let token = token.as_str().unwrap().to_owned();
    let body = format!("topic=live.timers&csrf={token}");
    let evil = h
        .raw_post("action/pause", &[("Origin", "http://evil.example")], &body)
        .await;
    assert_eq!(evil, 403, "the right token from another origin");
    let referer = h
        .raw_post(
            "action/pause",
            &[("Referer", "http://evil.example/x")],
            &body,
        )
        .await;
    assert_eq!(referer, 403, "the right token, referred by another origin");
    assert!(
        !counts(&h, "live.timers").await.paused,
        "a refused POST changed something"
    );
    // The page's own form works.
    h.click("#pause").await;
    h.wait_for("the pause's message", "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('paused')").await;
    assert!(counts(&h, "live.timers").await.paused);
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_banner_shows_only_messages_the_server_set() {
    let h = Harness::start(false).await;
    h.client
        .enqueue(Timer { n: 1 })
        .id("timer:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    // A link anyone can send: its text is not shown as if the dashboard said it.
    let spoof = "Session%20expired%3A%20sign%20in%20again%20at%20evil.example";
    for page in [
        format!("topic?name=live.timers&done={spoof}"),
        format!("dead?topic=live.timers&done={spoof}"),
        format!("workers?done={spoof}"),
    ] {
        h.goto(&page).await;
        assert_eq!(h.count(".flash").await, 0, "{page}");
        let text = h.js("return document.body.innerText").await;
        assert!(
            !text.as_str().unwrap().contains("evil.example"),
            "{page}: {text}"
        );
    }
    // An action's own message is shown, and the address does not carry its text.
    h.goto("topic?name=live.timers").await;
    h.click("#pause").await;
    h.wait_for(
        "the pause's message",
        "document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('paused live.timers')",
    )
    .await;
    let url = h.browser().current_url().await.unwrap();
    assert!(!url.as_str().contains("paused"), "{url}");
    h.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_overview_skips_an_invalid_name_in_the_topics_registry() {
    let h = Harness::start(false).await;
    h.client
        .enqueue(Timer { n: 1 })
        .id("timer:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    // Written by something else than postpone (an older version, a hand): not a valid topic name.
    h.redis
        .cli(&["HSET", "postpone:{default}:topics", "bad name!", "1"])
        .unwrap();
    let host = h.origin.trim_start_matches("http://");
    let (status, page) = crate::support::http(host, "GET", "/jobs", &[("Host", host)], "").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("live.timers"), "{page}");
    assert!(!page.contains("bad name!"), "{page}");
    h.goto("").await;
    h.wait_for(
        "the live figures (read through the same registry)",
        "document.body.hasAttribute('data-live-at')",
    )
    .await;
    h.finish().await;
}
