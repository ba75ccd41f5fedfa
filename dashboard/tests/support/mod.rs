//! The browser tests' harness: a redis-server of the test's own, a client on it, the dashboard nested at
//! `/jobs` in an axum app on 127.0.0.1:0, and headless Chromium driven through chromedriver.
//!
//! Waits are for DOM conditions with a deadline, never a sleep that hopes.

#![allow(dead_code, unreachable_pub, missing_docs)]

#[path = "../../../tests/support/batches.rs"]
pub mod batches;
#[path = "../../../tests/support/redis_server.rs"]
#[allow(unreachable_pub)]
mod redis_server;
#[path = "../../../tests/support/tempdir.rs"]
#[allow(unreachable_pub)]
mod tempdir;
#[path = "../../../tests/support/workflows.rs"]
pub mod workflows;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client as Browser, ClientBuilder, Locator};
use postpone::Client;
use postpone_dashboard::Dashboard;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use redis_server::RedisServer;

/// How long any one condition may take to hold.
pub const DEADLINE: Duration = Duration::from_secs(20);

const CHROMIUM: &str = "/usr/bin/chromium";
/// The browser's time zone (UTC+9, no daylight saving time).
pub const BROWSER_ZONE: &str = "Asia/Tokyo";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// One test's world.
pub struct Harness {
    pub redis: RedisServer,
    pub client: Client,
    /// `http://127.0.0.1:PORT`
    pub origin: String,
    browser: Option<Browser>,
    driver: Child,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

fn tools_present() {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            std::path::Path::new(tool).exists(),
            "{tool} is missing: the dashboard's browser tests drive headless Chromium. Install it with \
             `apt-get install -y chromium chromium-driver` (or run scripts/test, which does)"
        );
    }
}

impl Harness {
    /// Everything started: Redis, the dashboard (read-only or not) at `/jobs`, the browser.
    pub async fn start(read_only: bool) -> Harness {
        tools_present();
        let redis = RedisServer::start();
        let client = Client::connect(&redis.url())
            .await
            .expect("a client on the test's Redis");

        let app = axum::Router::new().nest(
            "/jobs",
            Dashboard::new(client.clone()).read_only(read_only).router(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });

        let port = free_port();
        let mut command = Command::new(CHROMEDRIVER);
        command
            .arg(format!("--port={port}"))
            // A zone that is not UTC, so that tests see times shown in the browser's zone.
            .env("TZ", BROWSER_ZONE)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // Its own process group, so that Drop ends chromedriver and the browsers it started.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let driver = command.spawn().expect("chromedriver starts");
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < DEADLINE,
                "chromedriver did not listen on {port}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1000", "--hide-scrollbars"]
            }),
        );
        // An alert stays open for the test to see (an XSS would open one).
        caps.insert("unhandledPromptBehavior".into(), json!("ignore"));
        // chromedriver, just listening, has reset a new session's connection now and then (two test
        // binaries starting browsers at once on two cores): a few more tries.
        let mut tries = 0;
        let browser = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(browser) => break browser,
                Err(e) if tries < 3 => {
                    tries += 1;
                    eprintln!("chromedriver session, try {tries}: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("a chromedriver session: {e}"),
            }
        };
        Harness {
            redis,
            client,
            origin,
            browser: Some(browser),
            driver,
        }
    }

    pub fn browser(&self) -> &Browser {
        self.browser.as_ref().expect("the browser is open")
    }

    /// The dashboard's URL for a page (`""` is the overview, at `/jobs`).
    pub fn url(&self, page: &str) -> String {
        match page {
            "" => format!("{}/jobs", self.origin),
            p => format!("{}/jobs/{p}", self.origin),
        }
    }

    pub async fn goto(&self, page: &str) {
        self.browser()
            .goto(&self.url(page))
            .await
            .expect("navigation");
    }

    /// Runs `script` (a function body) in the page.
    pub async fn js(&self, script: &str) -> Value {
        self.browser()
            .execute(script, vec![])
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Waits until the expression `condition` is truthy in the page.
    pub async fn wait_for(&self, what: &str, condition: &str) {
        let script = format!("try {{ return !!({condition}); }} catch (e) {{ return false; }}");
        let started = Instant::now();
        loop {
            if let Ok(Value::Bool(true)) = self.browser().execute(&script, vec![]).await {
                return;
            }
            if started.elapsed() > DEADLINE {
                let body = self
                    .js("return document.body ? document.body.innerText : ''")
                    .await;
                panic!("timed out waiting for {what} ({condition}); the page says:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The text of the first element `css` selects.
    /// A live page re-renders: an element found may be replaced before its text is read, and is then
    /// found again.
    pub async fn text(&self, css: &str) -> String {
        for _ in 0..50 {
            let el = self
                .browser()
                .find(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("no element {css}: {e}"));
            match el.text().await {
                Ok(text) => return text,
                Err(e) if e.is_stale_element_reference() => continue,
                Err(e) => panic!("the text of {css}: {e}"),
            }
        }
        panic!("{css} was replaced 50 times in a row")
    }

    /// How many elements `css` selects.
    pub async fn count(&self, css: &str) -> usize {
        self.browser()
            .find_all(Locator::Css(css))
            .await
            .unwrap()
            .len()
    }

    pub async fn click(&self, css: &str) {
        self.browser()
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("clicking {css}: {e}"));
    }

    /// Whether an alert (or confirm) dialog is open.
    pub async fn alert_open(&self) -> bool {
        self.browser().get_alert_text().await.is_ok()
    }

    /// Saves a screenshot as `<target>/tmp/dashboard-screenshots/<name>.png` for a person to look at.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.browser().screenshot().await.expect("a screenshot");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    /// A POST sent by hand (as a forger would), with these headers: the status code.
    pub async fn raw_post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
        let host = self.origin.trim_start_matches("http://");
        let mut all = vec![("Host", host)];
        all.extend_from_slice(headers);
        http(host, "POST", &format!("/jobs/{path}"), &all, body)
            .await
            .0
    }

    /// Waits until `check` (on the operations API) holds.
    pub async fn until<F, Fut>(&self, what: &str, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        while !check().await {
            assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Closes the browser session (and with it Chromium).
    pub async fn finish(mut self) {
        if let Some(b) = self.browser.take() {
            let _ = b.close().await;
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // The group this harness made: chromedriver and any browser left by a failed test.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.driver.id())])
            .status();
        let _ = self.driver.wait();
    }
}

/// An HTTP/1.1 request sent by hand to `addr` (`127.0.0.1:PORT`) with exactly these headers (a Host of
/// the sender's choosing among them): the status code and the whole response.
pub async fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    (status, response)
}

/// The CSRF token of a page's forms.
pub fn csrf_of(page: &str) -> String {
    let start = page
        .find("name=\"csrf\" value=\"")
        .unwrap_or_else(|| panic!("no CSRF token in the page:\n{page}"))
        + "name=\"csrf\" value=\"".len();
    page[start..].split('"').next().unwrap().to_owned()
}

/// Waits until something listens on `addr`.
pub async fn listening(addr: &str) {
    let started = Instant::now();
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(started.elapsed() < DEADLINE, "nothing listens on {addr}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
