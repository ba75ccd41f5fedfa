//! Retrying a notification: a webhook sender on postpone's default retry schedule.
//!
//! Three events go to a local receiver that this example starts on a free port: one to `/flaky`, which
//! refuses the first `--fail` deliveries (503) and then accepts; one to `/down`, which always answers
//! 503, so the webhook exhausts the schedule's eight attempts and goes to the dead letters; and one to
//! `/gone`, which answers 410, a refusal that retrying cannot fix, so it goes to the dead letters at
//! once. Each attempt is printed as it happens, with how long it waited against the schedule, and each
//! dead letter with its error history.
//!
//! ```text
//! cargo run -p postpone-examples --example webhook_retry                             # in memory, about 9 s
//! cargo run -p postpone-examples --example webhook_retry -- --fail 5 --speedup 1000  # about 90 s
//! REDIS_URL=redis://127.0.0.1:6379 cargo run -p postpone-examples --example webhook_retry
//! ```
//!
//! The default schedule retries 2m, 10m, 10m, 1h, 2h, 6h and 15h after each failure; `--speedup N`
//! divides every delay by N (default 10000, so 2m becomes 12ms) and `--speedup 1` keeps the real one.
//! `webhook.rs` is the part to copy: the job type and a handler that turns each HTTP answer into
//! delivered, retry, or dead letter now. `examples/apps/tests/webhook_retry.rs` runs this demo on a
//! redis-server of its own and checks the attempts, their spacing and the dead letters.

#[path = "../support/flags.rs"]
mod flags;

mod demo;
mod receiver;
mod webhook;

use std::process::ExitCode;

const USAGE: &str = "\
usage: webhook_retry [--fail N] [--speedup N]

  --fail N       deliveries of each event that /flaky refuses before it accepts one (default 3)
  --speedup N    divide the default schedule's delays by N (default 10000; 1 = the real schedule)

environment: REDIS_URL (default: in memory), POSTPONE_NAMESPACE, RUST_LOG (default off)";

#[tokio::main]
async fn main() -> ExitCode {
    // postpone logs each failed attempt at warn level; the demo prints its own account instead.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "off".into()),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .init();
    let flags = flags::Flags::from_env(USAGE, &["fail", "speedup"]);
    let options = demo::Options {
        fail_first: flags.get("fail", 3),
        speedup: flags.get("speedup", 10_000.0),
        print: true,
    };
    let client = match postpone::Client::from_env().await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("webhook_retry: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("webhook sender on {}", client.backend_name());
    let report = match demo::run(&client, &options).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("webhook_retry: {e}");
            return ExitCode::FAILURE;
        }
    };

    let attempts = report.schedule.attempts();
    let [flaky, down, gone] = &report.deliveries[..] else {
        unreachable!("the demo sends three webhooks")
    };
    let flaky_ok = match options.fail_first < attempts {
        true => flaky.delivered() && flaky.attempts.len() as u32 == options.fail_first + 1,
        false => flaky.dead.as_ref().is_some_and(|d| d.attempts == attempts),
    };
    let checks = [
        (flaky_ok, "/flaky: delivered once its endpoint recovered"),
        (
            down.dead.as_ref().is_some_and(|d| d.attempts == attempts),
            "/down: dead-lettered after the schedule's last attempt",
        ),
        (
            gone.dead.as_ref().is_some_and(|d| d.attempts == 1),
            "/gone: dead-lettered after one attempt (410 is not worth retrying)",
        ),
    ];
    println!();
    let mut ok = true;
    for (passed, what) in checks {
        println!("{} {what}", if passed { "ok:" } else { "FAILED:" });
        ok &= passed;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
