//! The signal that stops a service: Ctrl-C, or SIGTERM from `kill`, systemd, Docker or Kubernetes.

use std::future::Future;

/// Installs the handlers now (so a signal that comes before the first `.await` is not lost, nor
/// fatal) and returns a future that completes on Ctrl-C (SIGINT) or, on Unix, SIGTERM, with which.
pub(crate) fn signal() -> impl Future<Output = &'static str> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).expect("installing the SIGINT handler");
        let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
        async move {
            tokio::select! {
                _ = int.recv() => "Ctrl-C",
                _ = term.recv() => "SIGTERM",
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
