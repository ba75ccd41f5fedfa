//! A web dashboard for [postpone]: an axum [`Router`] that an application mounts under a
//! path of its choice, behind its own auth.
//!
//! ```no_run
//! use axum::Router;
//! use postpone_dashboard::Dashboard;
//!
//! # async fn app(client: postpone::Client) -> std::io::Result<()> {
//! let dashboard = Dashboard::new(client).read_only(false);
//! let app: Router = Router::new().nest("/jobs", dashboard.router());
//! // .layer(your_auth_layer)
//! // Without a token it answers to 127.0.0.1, localhost and [::1] only: to serve it under other
//! // names, list them with `.allowed_hosts([...])`.
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! Pages (server-rendered, every link relative, so any mount path works; figures live by server-sent
//! events, through one small script the router serves itself):
//! - overview (`./`): every topic with its counts, throughput per minute for the last hour, pause state,
//!   live workers;
//! - topic (`topic?name=…`): scheduled / running / dead jobs paged by cursor, search by id prefix, pause
//!   and resume;
//! - job (`job?topic=…&id=…`): payload, attempt k of n, the retry timeline, why it is not running, and
//!   its actions;
//! - dead letters by error (`dead?topic=…`): grouped by a fingerprint of the reason, with requeue and
//!   purge per group;
//! - workers (`workers`): live workers, and the store's health (the `doctor` checks);
//! - batches (`batches`): the namespace's batches newest first, with their counts by member state and
//!   the callbacks that fired; a batch (`batch?id=…`): its counts, callbacks, and members with their
//!   states, each linked to its job.
//!
//! Actions are POSTs checked for a CSRF token and a same-origin `Origin`/`Referer`; a read-only
//! dashboard refuses them (403) whatever the page showed. Everything shown is HTML-escaped; the
//! message after an action is one the server kept, never text from the address.
//!
//! Host names: a DNS-rebinding page (a name of the attacker's that resolves to the dashboard's
//! address) sends its own name as `Host`. [`Dashboard::allowed_hosts`] lists the names the dashboard
//! answers to (any other gets 403, before any page or action). Its default, mounted with
//! [`Dashboard::router`] or served alone: without a token, only loopback names (`127.0.0.1`,
//! `localhost`, `[::1]`; with any port when mounted, with the bound port when served alone with
//! [`Dashboard::serve`]); with a token ([`Dashboard::with_token`]), any name. An application that
//! serves the dashboard under another name lists its names, e.g.
//! `.allowed_hosts(["jobs.example.com"])` (the list replaces the default). The same-origin check
//! compares `Origin` with `Host`, and trusts `X-Forwarded-Host` only after
//! [`Dashboard::trust_forwarded_headers`].
//!
//! Standalone (what `postpone serve` runs): [`Dashboard::serve`], loopback unless a token is set with
//! [`Dashboard::with_token`].

mod actions;
mod auth;
mod csrf;
mod fingerprint;
mod flash;
mod hosts;
mod links;
mod live;
mod pages;
mod timeline;
mod view;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use postpone::ops::Ops;

pub use fingerprint::fingerprint;

/// The dashboard of one namespace: build it with [`Dashboard::new`], then mount its
/// [`router`](Dashboard::router).
#[derive(Debug, Clone)]
#[must_use]
pub struct Dashboard {
    ops: Ops,
    read_only: bool,
    token: Option<String>,
    allowed_hosts: Option<Vec<String>>,
    trust_forwarded_headers: bool,
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) ops: Ops,
    pub(crate) read_only: bool,
    pub(crate) csrf: csrf::Csrf,
    pub(crate) live: live::Live,
    pub(crate) hosts: Arc<hosts::Hosts>,
    pub(crate) flashes: flash::Flashes,
}

pub(crate) type State = Arc<Shared>;

impl Dashboard {
    /// A dashboard on `client`'s namespace (through its [operations API](postpone::ops)), with actions.
    pub fn new(client: postpone::Client) -> Self {
        Dashboard {
            ops: client.ops(),
            read_only: false,
            token: None,
            allowed_hosts: None,
            trust_forwarded_headers: false,
        }
    }

    /// Read-only: no action buttons, and every POST is refused with 403 on the server.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Requires a token on every request: HTTP basic auth whose password is `token` (any user name;
    /// browsers ask for it), or `Authorization: Bearer <token>`. For [`serve`](Self::serve) on an
    /// address other than loopback; an application mounting the router usually has its own auth.
    /// With a token, the dashboard answers to any host name unless
    /// [`allowed_hosts`](Self::allowed_hosts) lists them.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The host names the dashboard answers to: each `name` (any port) or `name:port`, IPv6 literals
    /// in brackets (`[::1]:8080`); a request whose `Host` is another name gets 403 (a DNS-rebinding
    /// page reads nothing and can act on nothing). The list replaces the default, which is:
    /// - without a token, loopback names only: `127.0.0.1`, `localhost` and `[::1]`, with any port
    ///   when mounted with [`router`](Self::router), with the bound port when served alone with
    ///   [`serve`](Self::serve);
    /// - with a token ([`with_token`](Self::with_token)), any name.
    ///
    /// So an application that mounts the dashboard and serves it under another name than loopback
    /// (behind its own auth, or a proxy) lists the names it serves:
    ///
    /// ```no_run
    /// # fn app(client: postpone::Client) -> axum::Router {
    /// use postpone_dashboard::Dashboard;
    ///
    /// let dashboard = Dashboard::new(client).allowed_hosts(["jobs.example.com"]);
    /// axum::Router::new().nest("/jobs", dashboard.router())
    /// # }
    /// ```
    pub fn allowed_hosts<I, S>(mut self, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed_hosts = Some(hosts.into_iter().map(Into::into).collect());
        self
    }

    /// Reads the host a request was sent to from `X-Forwarded-Host` (its last value) instead of
    /// `Host`, for the host check and the same-origin check of actions. Only behind your own proxy,
    /// which sets that header (and drops one sent by the client): else a client chooses it. Default:
    /// false.
    pub fn trust_forwarded_headers(mut self, trust: bool) -> Self {
        self.trust_forwarded_headers = trust;
        self
    }

    /// The router, with its own state: mount it with `Router::nest("/any/path", ...)` (or serve it
    /// as it is). Each call makes a new CSRF secret. Without a token it answers only to loopback host
    /// names unless [`allowed_hosts`](Self::allowed_hosts) lists others (see there).
    pub fn router(self) -> Router {
        let allowed = match (self.allowed_hosts, &self.token) {
            (Some(names), _) => Some(names),
            // A DNS-rebinding page names its own host: without a token, loopback names only.
            (None, None) => Some(hosts::LOOPBACK.iter().map(|&n| n.to_owned()).collect()),
            (None, Some(_)) => None,
        };
        let hosts = Arc::new(hosts::Hosts::new(
            allowed.as_deref(),
            self.trust_forwarded_headers,
        ));
        let shared = Arc::new(Shared {
            ops: self.ops,
            read_only: self.read_only,
            csrf: csrf::Csrf::new(),
            live: live::Live::new(),
            hosts: hosts.clone(),
            flashes: flash::Flashes::default(),
        });
        let router = Router::new()
            .route("/", get(pages::overview::page))
            .route("/topic", get(pages::topic::page))
            .route("/job", get(pages::job::page))
            .route("/dead", get(pages::dead::page))
            .route("/workers", get(pages::workers::page))
            .route("/batches", get(pages::batches::list))
            .route("/batch", get(pages::batches::page))
            .route("/events", get(live::events))
            .route("/assets/dashboard.js", get(view::script))
            .route("/assets/dashboard.css", get(view::stylesheet))
            .route("/action/{name}", post(actions::act))
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                actions::guard,
            ))
            .with_state(shared);
        let router = match self.token {
            Some(token) => router.layer(axum::middleware::from_fn_with_state(
                Arc::new(auth::Token::new(token)),
                auth::require,
            )),
            None => router,
        };
        // Outermost: a host it does not answer to gets neither a page nor an auth challenge.
        router.layer(axum::middleware::from_fn_with_state(hosts, hosts::guard))
    }

    /// Serves the dashboard alone at `addr` until the process ends (what `postpone serve` runs).
    /// Refuses an address other than loopback unless [`with_token`](Self::with_token) was set: put
    /// it behind your own auth instead, or set a token. Without a token (and without
    /// [`allowed_hosts`](Self::allowed_hosts)) it answers only to loopback names with the bound port:
    /// `127.0.0.1:PORT`, `localhost:PORT`, `[::1]:PORT` (and the bound address itself).
    pub async fn serve(mut self, addr: SocketAddr) -> std::io::Result<()> {
        if !addr.ip().is_loopback() && self.token.is_none() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "refusing to serve the dashboard on {addr} without a token: anyone who reaches \
                     it could cancel jobs; set one with Dashboard::with_token (or serve on 127.0.0.1)"
                ),
            ));
        }
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        if self.token.is_none() && self.allowed_hosts.is_none() {
            let port = bound.port();
            let mut names = vec![
                format!("127.0.0.1:{port}"),
                format!("localhost:{port}"),
                format!("[::1]:{port}"),
            ];
            // SocketAddr shows an IPv6 address in brackets, as a Host header names it.
            names.push(bound.to_string());
            self.allowed_hosts = Some(names);
        }
        tracing::info!(addr = %bound, "postpone dashboard serving");
        axum::serve(listener, self.router()).await
    }
}
