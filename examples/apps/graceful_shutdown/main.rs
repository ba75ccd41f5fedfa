//! Graceful shutdown on SIGTERM or Ctrl-C: running jobs finish, or are handed back.
//!
//! A worker renders three reports that take 1 s, 3 s and 60 s. On SIGTERM (what `kill`, systemd,
//! Docker and Kubernetes send) or Ctrl-C it stops claiming jobs, gives the running ones `--grace` to
//! finish, then stops those still running and hands their jobs back: due again at once, on the same
//! attempt, for the next worker. Then it prints where each report is.
//!
//! ```text
//! cargo run -p postpone-examples --example graceful_shutdown -- --stop-after 500ms  # SIGTERM itself, ~4 s
//! cargo run -p postpone-examples --example graceful_shutdown     # stop it: Ctrl-C, or kill -TERM <pid>
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p postpone-examples --example graceful_shutdown -- --stop-after 500ms
//! ```
//!
//! In memory, a job handed back is lost with the process; on Redis it waits, and the next run takes it
//! (it enqueues report 3 again, finds it scheduled, and runs it). A service does the same with
//! `worker.run_until(signal)` and stops its HTTP server first (see the `order_timeout` example).
//! `examples/apps/tests/graceful_shutdown.rs` sends the process a real SIGTERM and checks where the jobs
//! are.

#[path = "../support/flags.rs"]
mod flags;
#[path = "../support/shutdown.rs"]
mod shutdown;

mod reports;

use std::process::ExitCode;
use std::time::Duration;

use reports::Fate;

const USAGE: &str = "\
usage: graceful_shutdown [--grace DURATION] [--stop-after DURATION]

  --grace DURATION        how long running jobs may take to finish after the signal (default 3s;
                          postpone's default is 20s)
  --stop-after DURATION   send this process SIGTERM after DURATION (default: wait for a signal)

environment: REDIS_URL (default: in memory), POSTPONE_NAMESPACE";

#[tokio::main]
async fn main() -> ExitCode {
    // First of all, so that a signal from now on is handled, not fatal.
    let signal = shutdown::signal();
    let flags = flags::Flags::from_env(USAGE, &["grace", "stop-after"]);
    let grace = flags.duration("grace", Duration::from_secs(3));
    let stop_after = flags.optional_duration("stop-after");
    let client = match postpone::Client::from_env().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("graceful_shutdown: {e}");
            return ExitCode::FAILURE;
        }
    };
    let pid = std::process::id();
    println!(
        "report worker on {}, pid {pid}: stop it with Ctrl-C or `kill -TERM {pid}`",
        client.backend_name()
    );
    let stop = async move {
        if let Some(after) = stop_after {
            tokio::time::sleep(after).await;
            send_sigterm_to_self(pid);
        }
        signal.await
    };
    let fates = match reports::run(&client, grace, stop).await {
        Ok(fates) => fates,
        Err(e) => {
            eprintln!("graceful_shutdown: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("where the reports are:");
    for (id, fate) in fates {
        let text = match fate {
            Fate::Done => "done".to_owned(),
            Fate::HandedBack { attempt } => format!(
                "handed back: due now, still attempt {attempt}; {}",
                match client.backend_name() {
                    "memory" => "in memory it goes with this process (use REDIS_URL to keep it)",
                    _ => "the next worker runs it",
                }
            ),
            Fate::Other(state) => state,
        };
        println!("  {id}: {text}");
    }
    ExitCode::SUCCESS
}

/// What an orchestrator would do: `kill -TERM <pid>`.
fn send_sigterm_to_self(pid: u32) {
    println!("--stop-after: sending SIGTERM to {pid}");
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    if !sent.is_ok_and(|s| s.success()) {
        eprintln!("could not run `kill -TERM {pid}`: stop with Ctrl-C");
    }
}
