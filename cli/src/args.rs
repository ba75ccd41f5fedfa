//! The command line: global connection and output options, and one subcommand per operation.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::duration::parse_duration;

/// What `--help` shows after the commands: the JSON output and the exit codes.
const AFTER_HELP: &str = "\
Connection: --cluster (or REDIS_CLUSTER_NODES) wins over --redis (or REDIS_URL); a flag wins over the
environment; with neither, redis://127.0.0.1:6379. Passwords in URLs are never printed.

--json: every command prints one JSON document on stdout, with stable field names (see the README of
the postpone-cli crate); on failure {\"error\": {\"kind\", \"message\", \"hint\", \"exit_code\"}}.

Exit codes: 0 ok, 1 failure (doctor: a check is bad), 2 usage, 3 not found (topic, job, dead letter,
batch).";

/// What `serve --help` shows after its options.
const SERVE_AFTER_HELP: &str = "\
The token: POSTPONE_DASHBOARD_TOKEN=... postpone serve --addr 0.0.0.0:8080 (--token works too, but any
user of the machine sees it in the process list).

Host names: without a token the dashboard answers only to 127.0.0.1:PORT, localhost:PORT and
[::1]:PORT, so that a page of another site whose name resolves to 127.0.0.1 (DNS rebinding) reads and
changes nothing; with a token, to any name unless --allowed-host lists them.";

/// See and steer postpone's job queues on Redis.
#[derive(Debug, Parser)]
#[command(name = "postpone", version, after_help = AFTER_HELP)]
pub(crate) struct Cli {
    /// Redis URL, e.g. redis://:password@host:6379/0
    #[arg(
        long,
        env = "REDIS_URL",
        global = true,
        value_name = "URL",
        hide_env_values = true
    )]
    pub(crate) redis: Option<String>,

    /// Redis Cluster seed URLs, separated by commas
    #[arg(
        long,
        env = "REDIS_CLUSTER_NODES",
        global = true,
        value_name = "URL,...",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub(crate) cluster: Vec<String>,

    /// The application's namespace
    #[arg(
        long,
        env = "POSTPONE_NAMESPACE",
        global = true,
        value_name = "NS",
        default_value = postpone::DEFAULT_NAMESPACE,
        hide_env_values = true
    )]
    pub(crate) namespace: String,

    /// Print one JSON document on stdout instead of tables
    #[arg(long, global = true)]
    pub(crate) json: bool,

    /// Show times as absolute UTC times instead of "in 4m 12s" / "3m ago"
    #[arg(long, global = true)]
    pub(crate) absolute: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Every topic: jobs by state, paused or not, and rates per minute
    Stats {
        /// Redraw every --interval until interrupted (with --json: one document per line each time)
        #[arg(long)]
        watch: bool,
        /// How often --watch redraws
        #[arg(long, default_value = "2s", value_parser = parse_duration)]
        interval: Duration,
        /// Rates are averaged over this many minutes
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1440))]
        minutes: u32,
    },
    /// Every topic of the namespace, with its partitions and counts
    Topics,
    /// Live workers, from their heartbeats
    Workers,
    /// One page of a topic's jobs in one state
    Jobs(JobsArgs),
    /// One job in full: payload, attempts, errors, why it is not running, a running job's progress
    /// and a kept finished job's result
    Job {
        /// The topic
        topic: String,
        /// The job's id
        id: String,
    },
    /// A topic's busiest keys (fairness by key): per key, its jobs queued, running (under a max
    /// running per key) and until when it is held back
    Keys {
        /// The topic
        topic: String,
        /// Most keys shown, busiest first (1 to 1000)
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
        limit: u16,
    },
    /// Limits of one key of its own (fairness by key), in place of the topic's limits per key: list,
    /// set, clear
    #[command(subcommand)]
    KeyLimits(KeyLimitsCommand),
    /// Cancel a job (a running one is not retried)
    Cancel {
        /// The topic
        topic: String,
        /// The job's id
        id: String,
    },
    /// Move a scheduled job to a new due time: --in DURATION or --at TIME
    Reschedule(RescheduleArgs),
    /// Make a scheduled job due now
    RunNow {
        /// The topic
        topic: String,
        /// The job's id
        id: String,
    },
    /// Pause a topic: no worker claims its jobs until it is resumed (running jobs finish)
    Pause {
        /// The topic
        topic: String,
    },
    /// Resume a paused topic
    Resume {
        /// The topic
        topic: String,
    },
    /// Dead letters: list, show, requeue, purge
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Check Redis for what puts jobs at risk: version, eviction, persistence, clock, cluster
    Doctor,
    /// postpone's scripts as Redis function libraries on each server: this build's and other
    /// (earlier or later) builds'
    Scripts {
        /// Delete other builds' libraries (a process of one that still runs loads its own again at
        /// its next call)
        #[arg(long)]
        prune: bool,
    },
    /// Periodic schedules: list, run one now
    #[command(subcommand)]
    Periodic(PeriodicCommand),
    /// The namespace's batches, newest first: counts by member state, open, closed or completed, and
    /// which callbacks fired
    Batches {
        #[command(flatten)]
        page: OffsetArgs,
    },
    /// One batch: its counts and callbacks, then a page of its members with their states
    Batch {
        /// The batch's id
        id: String,
        #[command(flatten)]
        page: OffsetArgs,
    },
    /// Serve the web dashboard until interrupted: loopback unless a token is set (in
    /// POSTPONE_DASHBOARD_TOKEN); without a token it answers only to 127.0.0.1, localhost and [::1]
    #[command(after_help = SERVE_AFTER_HELP)]
    Serve {
        /// Where to listen
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// No actions: every request but GET is refused (403)
        #[arg(long)]
        read_only: bool,
        /// The token every request must carry (HTTP basic auth password, any user, or a bearer
        /// token); needed to listen on an address other than loopback. Set it in the environment
        /// variable POSTPONE_DASHBOARD_TOKEN: --token shows it to anyone who lists processes
        #[arg(
            long,
            env = "POSTPONE_DASHBOARD_TOKEN",
            hide_env_values = true,
            value_name = "TOKEN"
        )]
        token: Option<String>,
        /// With a token: the host names the dashboard answers to (NAME for any port, or NAME:PORT);
        /// repeat it, or separate names with commas. Default: any name
        #[arg(
            long = "allowed-host",
            env = "POSTPONE_DASHBOARD_ALLOWED_HOSTS",
            hide_env_values = true,
            value_name = "NAME[:PORT]",
            value_delimiter = ','
        )]
        allowed_hosts: Vec<String>,
        /// Read the host a request was sent to from X-Forwarded-Host: only behind your own proxy,
        /// which sets that header
        #[arg(long)]
        trust_forwarded_headers: bool,
    },
}

/// Which jobs a listing walks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum StateArg {
    /// Waiting for their due time (or for a worker), by due time
    Scheduled,
    /// Waiting for other jobs to succeed before they become due, by id
    Waiting,
    /// Leased to a worker, by lease deadline
    Running,
    /// In the dead letters, by time of death
    Dead,
    /// Finished (succeeded or cancelled) and kept by the topic's retention, by when they finished
    Done,
}

/// A page of a listing.
#[derive(Debug, Args)]
pub(crate) struct PageArgs {
    /// Most jobs on the page (1 to 1000)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) limit: u16,
    /// Start after the page that printed this cursor
    #[arg(long, value_name = "C")]
    pub(crate) cursor: Option<String>,
    /// Only jobs whose id starts with this
    #[arg(long, value_name = "P")]
    pub(crate) id_prefix: Option<String>,
    /// Newest (latest) first
    #[arg(long)]
    pub(crate) newest_first: bool,
}

/// A page of a listing by offset (batches, a batch's members).
#[derive(Debug, Args)]
pub(crate) struct OffsetArgs {
    /// Most entries on the page (1 to 1000)
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) limit: u16,
    /// Skip this many entries (the page before printed the offset of the next)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) offset: usize,
}

/// `jobs`.
#[derive(Debug, Args)]
pub(crate) struct JobsArgs {
    /// The topic
    pub(crate) topic: String,
    /// Which jobs
    #[arg(long, value_enum, default_value_t = StateArg::Scheduled)]
    pub(crate) state: StateArg,
    #[command(flatten)]
    pub(crate) page: PageArgs,
}

/// `reschedule`.
#[derive(Debug, Args)]
pub(crate) struct RescheduleArgs {
    /// The topic
    pub(crate) topic: String,
    /// The job's id
    pub(crate) id: String,
    /// Due after this delay from now (by Redis's clock), e.g. 10m, 1h30m, 500ms
    #[arg(long = "in", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) in_: Option<Duration>,
    /// Due at this time, RFC 3339, e.g. 2026-05-01T09:00:00Z
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub(crate) at: Option<DateTime<Utc>>,
}

/// `key-limits ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum KeyLimitsCommand {
    /// The keys of a topic with limits of their own
    Ls {
        /// The topic
        topic: String,
    },
    /// Give one key limits of its own, which replace the topic's limits per key for it alone (every
    /// worker, from its next claim on); with neither option the key runs with no limit
    Set {
        /// The topic
        topic: String,
        /// The key (as the jobs carry it)
        key: String,
        /// At most this many of the key's jobs running at once
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        max_running: Option<u32>,
        /// At most this many of the key's jobs started per period: JOBS/PERIOD, e.g. 10/1s, 600/1m
        #[arg(long, value_parser = parse_rate)]
        rate: Option<postpone::RateLimit>,
    },
    /// Take back one key's own limits: it claims under the topic's limits per key again
    Clear {
        /// The topic
        topic: String,
        /// The key
        key: String,
    },
}

/// A rate as `JOBS/PERIOD` (`10/1s`, `600/1m`).
fn parse_rate(text: &str) -> Result<postpone::RateLimit, String> {
    const FORM: &str = "write JOBS/PERIOD, e.g. 10/1s or 600/1m";
    let (jobs, per) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not a rate: {FORM}"))?;
    let jobs: u32 = jobs
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{jobs:?} is not a number of jobs above 0: {FORM}"))?;
    let per = parse_duration(per.trim())?;
    if per.is_zero() {
        return Err(format!("the period must be above 0: {FORM}"));
    }
    Ok(postpone::RateLimit::new(jobs, per))
}

/// `dead ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum DeadCommand {
    /// List a topic's dead letters (oldest death first)
    Ls {
        /// The topic
        topic: String,
        #[command(flatten)]
        page: PageArgs,
    },
    /// Show the dead letters of one id
    Show {
        /// The topic
        topic: String,
        /// The job's id
        id: String,
    },
    /// Run dead letters again (due now, attempts reset): one id, or --all
    Requeue(BulkArgs),
    /// Delete dead letters for good: one id (every death of it), or --all
    Purge(BulkArgs),
}

/// `periodic ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum PeriodicCommand {
    /// List periodic schedules (every registered topic's, or one topic's): expression, zone, next and
    /// last tick, policies
    Ls {
        /// Only this topic's
        topic: Option<String>,
    },
    /// Run a periodic schedule now (a worker running it enqueues a job for the current time)
    Trigger {
        /// The schedule's name
        name: String,
        /// Its topic (needed only when several topics have a schedule of that name)
        #[arg(long)]
        topic: Option<String>,
    },
}

/// `dead requeue` and `dead purge`.
#[derive(Debug, Args)]
pub(crate) struct BulkArgs {
    /// The topic
    pub(crate) topic: String,
    /// The job's id
    pub(crate) id: Option<String>,
    /// Every dead letter of the topic (or those --reason selects)
    #[arg(long)]
    pub(crate) all: bool,
    /// With --all: only dead letters whose reason contains this text
    #[arg(long, value_name = "TEXT")]
    pub(crate) reason: Option<String>,
    /// Do not ask for confirmation (needed with --all when stdin is not a terminal)
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
}

impl Command {
    /// What the command line asks that cannot be done, checked before connecting (clap's own checks
    /// cannot say these without a usage line that puts ID before TOPIC).
    pub(crate) fn usage_problem(&self) -> Option<String> {
        match self {
            Command::Reschedule(a) => match (a.in_, a.at) {
                (None, None) => Some("pass --in DURATION or --at TIME".into()),
                (Some(_), Some(_)) => Some("pass --in DURATION or --at TIME, not both".into()),
                _ => None,
            },
            Command::Dead(DeadCommand::Requeue(a) | DeadCommand::Purge(a)) => {
                match (&a.id, a.all, &a.reason) {
                    (None, false, _) => Some("name a dead letter (ID) or pass --all".into()),
                    (Some(_), true, _) => {
                        Some("name one dead letter or pass --all, not both".into())
                    }
                    (Some(_), false, Some(_)) => {
                        Some("--reason selects among all dead letters: pass it with --all".into())
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("{e}: write an RFC 3339 time such as 2026-05-01T09:00:00Z"))
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
