//! Why a command failed, its exit code, and how it is shown: what went wrong and what to do.

use std::process::ExitCode;

use serde::Serialize;

use crate::output::Out;

/// A failed command.
#[derive(Debug)]
pub(crate) enum Failure {
    /// From the library (its messages never contain a password).
    Lib(postpone::Error),
    /// Nothing by that name (exit 3).
    NotFound(String),
    /// The command line asks for something impossible (exit 2).
    Usage(String),
    /// Anything else (exit 1), e.g. a declined confirmation.
    Other(String),
    /// The command's output (JSON too) already shows what failed, e.g. a bad doctor check (exit 1;
    /// nothing more on stdout).
    Shown(String),
}

impl From<postpone::Error> for Failure {
    fn from(e: postpone::Error) -> Self {
        Failure::Lib(e)
    }
}

/// The JSON of a failure: `{"error": {"kind", "message", "hint", "exit_code"}}`.
#[derive(Serialize)]
struct ErrorDoc<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    kind: &'a str,
    message: String,
    hint: Option<&'a str>,
    exit_code: u8,
}

const CONNECT_HINT: &str = "is Redis running and reachable there? Pass --redis URL (or set \
REDIS_URL), or for a cluster --cluster URL,... (REDIS_CLUSTER_NODES)";

const AUTH_HINT: &str = "Redis wants a password, or another one: put it in the URL, \
redis://:PASSWORD@host:port (or redis://USER:PASSWORD@host:port with ACL users)";

impl Failure {
    /// 0 ok, 1 failure, 2 usage, 3 not found.
    pub(crate) fn exit_code(&self) -> u8 {
        use postpone::Error as E;
        match self {
            Failure::NotFound(_) => 3,
            Failure::Usage(_) => 2,
            Failure::Other(_) | Failure::Shown(_) => 1,
            Failure::Lib(e) => match e {
                E::JobNotFound { .. } | E::TopicNotFound { .. } => 3,
                E::InvalidTopic { .. }
                | E::InvalidId { .. }
                | E::InvalidKey { .. }
                | E::InvalidBatchId { .. }
                | E::InvalidNamespace { .. }
                | E::InvalidCursor { .. }
                | E::InvalidUrl { .. } => 2,
                _ => 1,
            },
        }
    }

    fn kind(&self) -> &'static str {
        use postpone::Error as E;
        match self {
            Failure::NotFound(_) => "not_found",
            Failure::Usage(_) => "usage",
            Failure::Other(_) | Failure::Shown(_) => "failed",
            Failure::Lib(e) => match e {
                E::JobNotFound { .. } | E::TopicNotFound { .. } => "not_found",
                E::Connect { .. } => "connect",
                E::Backend { .. } => "backend",
                E::JobRunning { .. } => "job_running",
                E::JobWaiting { .. } => "job_waiting",
                E::JobExists { .. } => "job_exists",
                _ if self.exit_code() == 2 => "usage",
                _ => "failed",
            },
        }
    }

    fn message(&self) -> String {
        match self {
            Failure::Lib(e) => e.report().to_string(),
            Failure::NotFound(m) | Failure::Usage(m) | Failure::Other(m) | Failure::Shown(m) => {
                m.clone()
            }
        }
    }

    fn hint(&self) -> Option<&'static str> {
        match self {
            Failure::Lib(e @ postpone::Error::Connect { .. }) => {
                let text = e.report().to_string();
                let auth = ["NOAUTH", "WRONGPASS", "uthentication"]
                    .iter()
                    .any(|w| text.contains(w));
                Some(if auth { AUTH_HINT } else { CONNECT_HINT })
            }
            Failure::Lib(postpone::Error::Backend { .. }) => {
                Some("Redis stopped answering: check that it is up, then try again")
            }
            _ => None,
        }
    }

    /// Shows the failure (stderr; with `--json` also the error document on stdout) and gives the
    /// exit code.
    pub(crate) fn show(&self, out: &Out) -> ExitCode {
        let code = self.exit_code();
        let message = self.message();
        if out.json && !matches!(self, Failure::Shown(_)) {
            out.json(&ErrorDoc {
                error: ErrorBody {
                    kind: self.kind(),
                    message: message.clone(),
                    hint: self.hint(),
                    exit_code: code,
                },
            });
        }
        let red = console::Style::new().red().bold().for_stderr();
        eprintln!("{} {message}", red.apply_to("error:"));
        if let Some(hint) = self.hint() {
            eprintln!(
                "{} {hint}",
                console::Style::new().bold().for_stderr().apply_to("hint:")
            );
        }
        ExitCode::from(code)
    }
}
