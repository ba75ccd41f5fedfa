//! `serve`: the web dashboard (crate `postpone-dashboard`) on its own, at `--addr`.

use std::net::SocketAddr;

use postpone::Client;
use postpone_dashboard::Dashboard;

use crate::failure::Failure;
use crate::output::{say, Out};

/// `serve`'s options.
#[derive(Debug)]
pub(crate) struct Options {
    pub(crate) addr: SocketAddr,
    pub(crate) read_only: bool,
    /// From `POSTPONE_DASHBOARD_TOKEN` or `--token`.
    pub(crate) token: Option<String>,
    /// With a token only: the host names it answers to (empty: any).
    pub(crate) allowed_hosts: Vec<String>,
    pub(crate) trust_forwarded_headers: bool,
}

/// `serve [--addr A] [--read-only] [--allowed-host H]... [--trust-forwarded-headers]`, the token from
/// `POSTPONE_DASHBOARD_TOKEN` (or `--token`): until the process is stopped.
pub(crate) async fn serve(
    client: Client,
    out: &Out,
    where_: &str,
    options: Options,
) -> Result<(), Failure> {
    let Options {
        addr,
        read_only,
        token,
        allowed_hosts,
        trust_forwarded_headers,
    } = options;
    let auth = token.is_some();
    if !auth && !allowed_hosts.is_empty() {
        return Err(Failure::Usage(
            "--allowed-host needs a token (POSTPONE_DASHBOARD_TOKEN): without one, the dashboard \
             answers only to 127.0.0.1, localhost and [::1]"
                .into(),
        ));
    }
    let mut dashboard = Dashboard::new(client)
        .read_only(read_only)
        .trust_forwarded_headers(trust_forwarded_headers);
    if let Some(token) = token {
        dashboard = dashboard.with_token(token);
    }
    if !allowed_hosts.is_empty() {
        dashboard = dashboard.allowed_hosts(allowed_hosts);
    }
    if !out.json {
        say!(
            "dashboard of {where_} at http://{addr}/{}{}; Ctrl-C stops it",
            if read_only { " (read-only)" } else { "" },
            if auth { ", token required" } else { "" }
        );
    }
    dashboard.serve(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied if !auth => Failure::Usage(format!(
            "refusing to serve the dashboard on {addr} without a token: anyone who reaches it could \
             cancel jobs; set POSTPONE_DASHBOARD_TOKEN (or pass --token, which the process list \
             shows), or serve on 127.0.0.1"
        )),
        _ => Failure::Other(format!("cannot serve the dashboard at {addr}: {e}")),
    })
}
