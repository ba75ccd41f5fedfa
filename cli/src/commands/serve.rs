//! `serve`: the web dashboard (crate `postpone-dashboard`) on its own, at `--addr`.

use std::net::SocketAddr;

use postpone::Client;
use postpone_dashboard::Dashboard;

use crate::failure::Failure;
use crate::output::{say, Out};

/// `serve [--addr A] [--read-only] [--token T]`: until the process is stopped.
pub(crate) async fn serve(
    client: Client,
    out: &Out,
    where_: &str,
    addr: SocketAddr,
    read_only: bool,
    token: Option<String>,
) -> Result<(), Failure> {
    let mut dashboard = Dashboard::new(client).read_only(read_only);
    let auth = token.is_some();
    if let Some(token) = token {
        dashboard = dashboard.with_token(token);
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
             cancel jobs; pass --token (or POSTPONE_DASHBOARD_TOKEN), or serve on 127.0.0.1"
        )),
        _ => Failure::Other(format!("cannot serve the dashboard at {addr}: {e}")),
    })
}
