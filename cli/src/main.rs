//! `postpone`: see and steer postpone's job queues on Redis. A thin client of the library's operations
//! API ([`postpone::ops`]); see `postpone --help` and this crate's README.

mod args;
mod commands;
mod connect;
mod duration;
mod failure;
mod output;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::args::{Cli, Command, DeadCommand, PeriodicCommand};
use crate::connect::Target;
use crate::failure::Failure;
use crate::output::Out;

fn main() -> ExitCode {
    let matches = match Cli::command().try_get_matches() {
        Ok(m) => m,
        // Usage errors exit 2; --help and --version exit 0.
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(2);
        }
    };
    let target = Target::choose(&cli, &matches);
    let mut out = Out::new(cli.json, cli.absolute);
    if let Some(problem) = cli.command.usage_problem() {
        return Failure::Usage(problem).show(&out);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a Tokio runtime starts");
    match runtime.block_on(run(cli, &target, &mut out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => failure.show(&out),
    }
}

/// Now by Redis's clock, what relative times are measured against; on a cluster TIME goes to any node,
/// which may be down: a second try, then this machine's clock.
async fn now_ms(ops: &postpone::ops::Ops) -> i64 {
    for _ in 0..2 {
        if let Ok(now) = ops.now_ms().await {
            return now;
        }
    }
    chrono::Utc::now().timestamp_millis()
}

/// Connects and runs the command.
async fn run(cli: Cli, target: &Target, out: &mut Out) -> Result<(), Failure> {
    let client = target.connect(&cli.namespace).await?;
    let ops = client.ops();
    let where_ = format!("namespace {} on {}", cli.namespace, target.shown());
    if let Command::Serve {
        addr,
        read_only,
        token,
        allowed_hosts,
        trust_forwarded_headers,
    } = cli.command
    {
        let options = commands::serve::Options {
            addr,
            read_only,
            token,
            allowed_hosts,
            trust_forwarded_headers,
        };
        return commands::serve::serve(client, out, &where_, options).await;
    }
    out.now_ms = now_ms(&ops).await;
    use commands::{batches, control, dead, doctor, jobs, keys, overview, periodic, scripts};
    match cli.command {
        Command::Stats {
            watch,
            interval,
            minutes,
        } => overview::stats(&ops, out, &where_, watch, interval, minutes).await,
        Command::Topics => overview::topics(&ops, out).await,
        Command::Workers => overview::workers(&ops, out).await,
        Command::Jobs(a) => jobs::list(&ops, out, &a.topic, a.state, &a.page).await,
        Command::Job { topic, id } => jobs::show(&ops, out, &topic, &id).await,
        Command::Keys { topic, limit } => keys::keys(&ops, out, &topic, limit).await,
        Command::KeyLimits(c) => keys::key_limits(&ops, out, c).await,
        Command::Cancel { topic, id } => control::cancel(&ops, out, &topic, &id).await,
        Command::Reschedule(a) => control::reschedule(&ops, out, a).await,
        Command::RunNow { topic, id } => control::run_now(&ops, out, &topic, &id).await,
        Command::Pause { topic } => control::pause(&ops, out, &topic, true).await,
        Command::Resume { topic } => control::pause(&ops, out, &topic, false).await,
        Command::Dead(DeadCommand::Ls { topic, page }) => {
            jobs::list(&ops, out, &topic, args::StateArg::Dead, &page).await
        }
        Command::Dead(DeadCommand::Show { topic, id }) => {
            jobs::show_dead(&ops, out, &topic, &id).await
        }
        Command::Dead(DeadCommand::Requeue(a)) => {
            dead::bulk(&ops, out, dead::Action::Requeue, a).await
        }
        Command::Dead(DeadCommand::Purge(a)) => dead::bulk(&ops, out, dead::Action::Purge, a).await,
        Command::Doctor => doctor::doctor(&ops, out, &where_).await,
        // Function libraries belong to the server, not to a namespace.
        Command::Scripts { prune } => scripts::scripts(&ops, out, &target.shown(), prune).await,
        Command::Periodic(PeriodicCommand::Ls { topic }) => {
            periodic::ls(&ops, out, topic.as_deref()).await
        }
        Command::Periodic(PeriodicCommand::Trigger { name, topic }) => {
            periodic::trigger(&ops, out, &name, topic.as_deref()).await
        }
        Command::Batches { page } => batches::list(&ops, out, &page).await,
        Command::Batch { id, page } => batches::show(&ops, out, &id, &page).await,
        Command::Serve { .. } => unreachable!("served above"),
    }
}
