//! The command line: `postpone-bench <workload> [--jobs N] [--concurrency C] [--redis URL] ...`.

use std::fmt;

/// The workloads of BENCHMARKS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    Enqueue,
    EnqueueBulk,
    Drain,
    Delayed,
    Memory,
    Backlog,
    Idle,
    EnqueueConcurrent,
    DrainIo,
    Page,
    Outbox,
    Steady,
    Wait,
    Batch,
    Fairness,
    Floor,
}

impl Workload {
    const ALL: [(&'static str, Workload); 16] = [
        ("enqueue", Workload::Enqueue),
        ("enqueue-bulk", Workload::EnqueueBulk),
        ("drain", Workload::Drain),
        ("delayed", Workload::Delayed),
        ("memory", Workload::Memory),
        ("backlog", Workload::Backlog),
        ("idle", Workload::Idle),
        ("enqueue-concurrent", Workload::EnqueueConcurrent),
        ("drain-io", Workload::DrainIo),
        ("page", Workload::Page),
        ("outbox", Workload::Outbox),
        ("steady", Workload::Steady),
        ("wait", Workload::Wait),
        ("batch", Workload::Batch),
        ("fairness", Workload::Fairness),
        ("floor", Workload::Floor),
    ];

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, w)| *w)
    }

    pub(crate) fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, w)| *w == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }

    /// The job count of BENCHMARKS.md.
    fn default_jobs(self) -> u64 {
        match self {
            Workload::Delayed => 2_000,
            Workload::Memory => 100_000,
            Workload::Page => 1_000_000,
            Workload::Idle => 0,
            Workload::EnqueueConcurrent | Workload::DrainIo => 64_000,
            Workload::Outbox => 64 * 500,
            Workload::Wait => 1_000,
            Workload::Batch => 10_000,
            Workload::Fairness => 100_000,
            _ => 50_000,
        }
    }

    /// The seconds of BENCHMARKS.md: `idle` measures 10 s, `steady` enqueues for 60 s.
    fn default_secs(self) -> u64 {
        match self {
            Workload::Steady => 60,
            _ => 10,
        }
    }

    /// The concurrency of BENCHMARKS.md: enqueueing tasks for `enqueue-concurrent`, committing tasks
    /// for `outbox`, the worker's concurrency otherwise.
    fn default_concurrency(self) -> usize {
        match self {
            Workload::EnqueueConcurrent | Workload::Outbox | Workload::Floor => 64,
            _ => 50,
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parsed options.
#[derive(Debug, Clone)]
pub(crate) struct Args {
    pub(crate) workload: Workload,
    pub(crate) jobs: u64,
    pub(crate) concurrency: usize,
    pub(crate) redis: String,
    /// `outbox`: the PostgreSQL to use (`--database`, else `DATABASE_URL`, else [`DEFAULT_DATABASE`]).
    pub(crate) database: String,
    /// `backlog`: jobs due in an hour sitting beside the drained ones; `floor`: the same beside the
    /// floor's jobs (0 unless given).
    pub(crate) backlog: u64,
    /// `floor`: ms from one drain call (claim and acknowledgement) to the next (0: back to back), so
    /// that Redis sleeps between calls, as it does under `drain-io`'s ticks.
    pub(crate) pace_ms: u64,
    /// `idle`: registered topics, and seconds measured; `steady`: seconds of enqueueing.
    pub(crate) topics: usize,
    pub(crate) secs: u64,
    /// `steady`: jobs enqueued per second, over all producers (its `jobs` is `rate x secs`).
    pub(crate) rate: u64,
    /// `drain`, `drain-io`, `backlog`: claim under flow limits that never bind (a rate limit of
    /// 100,000,000/s and max running 1,000,000), to measure what checking them costs.
    pub(crate) flow: bool,
    /// `drain`, `drain-io`, `backlog`: half the drained jobs enqueued with a priority.
    pub(crate) priorities: bool,
    /// `drain`: jobs of a type that keeps finished jobs and their results (`bench.kept`).
    pub(crate) keep: bool,
    /// `fairness`: the same jobs without keys, on a topic of their own (what a plain queue does).
    pub(crate) no_keys: bool,
    /// `fairness`: the quiet keys beside the flood (0: the flood alone, what the layout by key costs
    /// without the quiet keys' load).
    pub(crate) quiet_keys: u64,
    /// `fairness`: the keys the flood's jobs are spread over, round-robin (default 1: one tenant's
    /// flood); many keys measure the claim's cost per job as the number of ready keys grows.
    pub(crate) flood_keys: u64,
    /// `fairness`: ms between two jobs of a quiet producer (default 10). A slower pace keeps the
    /// quiet keys as idle between their jobs under a profiler, where Redis runs some 50 times slower,
    /// as they are at full speed.
    pub(crate) quiet_every_ms: u64,
    /// The worker process records metrics and runs a `tracing` subscriber (the `observe` feature).
    pub(crate) observe: bool,
    /// Delete whatever the Redis holds before the run (without it, a Redis holding keys is refused).
    pub(crate) flush: bool,
}

/// `outbox`'s PostgreSQL when neither `--database` nor `DATABASE_URL` says otherwise.
pub(crate) const DEFAULT_DATABASE: &str = "postgres://postgres@127.0.0.1:5432/test";

pub(crate) const USAGE: &str = "\
usage: postpone-bench <workload> [--jobs N] [--concurrency C] [--redis URL] [--flush]
                      [--backlog N] [--pace MS] [--topics N] [--secs S] [--rate R] [--observe] [--database URL]
                      [--keep] [--no-keys] [--quiet-keys N] [--quiet-every MS]

workloads (see BENCHMARKS.md):
  enqueue             one task enqueues jobs one at a time, each awaited; then 2,000 PINGs and
                      enqueues in turn, each timed (enqueue_per_ping)
  enqueue-bulk        enqueue_many, 1,000 jobs per call
  enqueue-concurrent  C tasks (default 64) enqueue one at a time, each awaited, through one Client;
                      per-enqueue p50/p99/max, errors, Redis CPU and commands per job
  drain               jobs already due; a worker process with a no-op handler
  drain-io            drain with a handler that sleeps 1 ms; share of the C x 1,000 jobs/s ceiling
  delayed             jobs due over 10 s; how late each handler starts, by the Redis clock
  memory              jobs due in an hour; Redis bytes per job
  backlog             drain beside jobs due in an hour; ratio to drain
  idle                a worker with registered topics and no jobs; commands/s it sends
  page                the operations API's listing: a page of a topic of --jobs scheduled jobs
                      (default 1,000,000) against one of 10 (first, middle, last page)
  outbox              C tasks (default 64) each commit PostgreSQL transactions that enqueue one job
                      through postpone-postgres's outbox, a relay moving them to Redis; transactional
                      enqueues/s, commit-to-queued p50/p99/max by the Redis clock (needs PostgreSQL)
  steady              64 producers enqueue at --rate jobs/s for --secs s (10 % delayed 0-5 s, 1 % fail
                      once, retried at once) to a worker process whose handler sleeps 2 ms; start lag
                      p50/p99/max by the Redis clock, enqueue p99, worker and Redis CPU per job
  wait                --jobs N (default 1,000) jobs, a Client::wait on each through one client, then a
                      worker in the same process drains them; ms from each handler's finish to its
                      waiter's return, p50/p99/max (wake_p99_ms)
  batch               one batch of --jobs N members (default 10,000) with a success callback, drained
                      by a worker in the same process; members/s from creation to the callback's
                      start, ms from the last member's end to it (callback_after_last_ms)
  fairness            --jobs N (default 100,000) due jobs of one key, and 50 quiet keys each
                      enqueueing a job every 10 ms, drained by a worker process (as drain's); the quiet
                      jobs' start lag p50/p99/max (quiet_p99_ms) and the flood's jobs/s; with
                      --no-keys the same jobs without keys (a plain queue: what fairness costs)
  floor               the Redis commands of an enqueue and of a drained job sent bare (pipelined, no
                      scripts) on the library's structures: Redis CPU per job, the floor under
                      enqueue-concurrent's and drain's (enqueue_floor_us_per_job,
                      drain_floor_us_per_job); then inside functions that do nothing else
                      (scripted_enqueue_floor_us_per_job, scripted_drain_floor_us_per_job); a
                      PING, an empty script's call and the least scripted enqueue's, awaited

options:
  --jobs N         jobs (defaults: 50,000; enqueue-concurrent and drain-io 64,000; delayed 2,000;
                   memory 100,000; page 1,000,000; outbox 32,000, 500 per task; steady: rate x secs;
                   wait 1,000; batch 10,000; fairness 100,000)
  --concurrency C  worker concurrency (default 50); enqueue-concurrent: enqueueing tasks, outbox:
                   committing tasks (default 64); floor: jobs per drain call (default 64, about what
                   a drain's claims and acknowledgements carry at concurrency 50)
  --redis URL      Redis to use, empty (default redis://127.0.0.1:6379); a run FLUSHALLs it, so one
                   that holds keys is refused unless --flush
  --flush          delete everything the Redis holds before the run (FLUSHALL)
  --database URL   outbox: the PostgreSQL (default $DATABASE_URL, else
                   postgres://postgres@127.0.0.1:5432/test); the run drops and recreates its own
                   table postpone_bench_outbox there, and drops it at the end
  --backlog N      backlog: jobs due in an hour beside the drained ones (default 1,000,000); floor:
                   the same beside the floor's jobs (default none): what Redis pays for them
  --pace MS        floor: one drain call of C jobs (claim, then acknowledgement) every MS ms instead of
                   back to back (default 0): what Redis pays per job when it sleeps between calls, as
                   under drain-io (its runs end together at each millisecond tick)
  --topics N       idle: registered topics (default 10, at most 10)
  --secs S         idle: seconds measured (default 10); steady: seconds of enqueueing (default 60)
  --rate R         steady: jobs enqueued per second over all producers (default 20,000; BENCHMARKS.md
                   asks for half the measured drain capacity, but C slots of a 2 ms handler, which
                   takes ~2.9 ms, run at most C / 2.9 ms: ~17,000/s at 50; above that the lag grows)
  --flow           drain, drain-io, backlog: flow limits on that never bind (rate 100,000,000/s,
                   max running 1,000,000): what checking them in the claim costs
  --priorities     drain, drain-io, backlog: half the jobs enqueued with a priority (1 or 2)
  --no-keys        fairness: the jobs without keys, on a topic of their own (bench.fair_plain)
  --quiet-keys N   fairness: quiet keys beside the flood (default 50; 0: the flood alone)
  --quiet-every MS fairness: ms between two jobs of a quiet key (default 10; slower under a
                   profiler keeps the quiet keys idle between their jobs, as at full speed)
  --flood-keys K   fairness: the flood's jobs spread over K keys, round-robin (default 1); with many
                   keys, what a claim costs per job as the number of ready keys grows
  --keep           drain: jobs of a type that keeps every finished job with its result (keep 1h,
                   keep_last 1,000,000); Redis bytes per kept job (kept_bytes_per_job)
  --observe        the worker process records postpone's metrics (a Prometheus recorder) and logs
                   through a `tracing` subscriber at INFO; needs `--features observe`

Prints human-readable lines, then one line of JSON (its \"allocator\": system, or mimalloc when built
with --features mimalloc); exits 1 if a job was lost or failed.";

impl Args {
    /// Parses `args` (without the program name).
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut it = args.iter();
        let name = it.next().ok_or("no workload given")?;
        let workload = Workload::parse(name).ok_or_else(|| format!("unknown workload {name:?}"))?;
        let mut out = Args {
            workload,
            jobs: workload.default_jobs(),
            concurrency: workload.default_concurrency(),
            redis: "redis://127.0.0.1:6379".into(),
            database: std::env::var("DATABASE_URL")
                .ok()
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| DEFAULT_DATABASE.into()),
            backlog: 1_000_000,
            pace_ms: 0,
            topics: 10,
            secs: workload.default_secs(),
            rate: 20_000,
            flow: false,
            priorities: false,
            observe: false,
            flush: false,
            keep: false,
            no_keys: false,
            quiet_keys: 50,
            flood_keys: 1,
            quiet_every_ms: 10,
        };
        let mut quiet_given = false;
        let mut backlog_given = false;
        while let Some(flag) = it.next() {
            if flag == "--flow" || flag == "--priorities" {
                out.flow |= flag == "--flow";
                out.priorities |= flag == "--priorities";
                continue;
            }
            if flag == "--keep" || flag == "--no-keys" {
                out.keep |= flag == "--keep";
                out.no_keys |= flag == "--no-keys";
                continue;
            }
            if flag == "--observe" || flag == "--flush" {
                out.observe |= flag == "--observe";
                out.flush |= flag == "--flush";
                continue;
            }
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--jobs" => out.jobs = number(flag, value()?)?,
                "--concurrency" => out.concurrency = number(flag, value()?)? as usize,
                "--redis" => out.redis = value()?.clone(),
                "--database" => out.database = value()?.clone(),
                "--backlog" => {
                    out.backlog = number(flag, value()?)?;
                    backlog_given = true;
                }
                "--pace" => out.pace_ms = number(flag, value()?)?,
                "--topics" => out.topics = number(flag, value()?)? as usize,
                "--secs" => out.secs = number(flag, value()?)?,
                "--rate" => out.rate = number(flag, value()?)?,
                "--quiet-keys" => {
                    out.quiet_keys = number(flag, value()?)?;
                    quiet_given = true;
                }
                "--flood-keys" => {
                    out.flood_keys = number(flag, value()?)?;
                    quiet_given = true;
                }
                "--quiet-every" => {
                    out.quiet_every_ms = number(flag, value()?)?;
                    quiet_given = true;
                }
                other => return Err(format!("unknown option {other:?}")),
            }
        }
        if out.concurrency == 0 || !(1..=10).contains(&out.topics) || out.secs == 0 || out.rate == 0
        {
            return Err(
                "--concurrency, --secs, --rate must be at least 1; --topics 1 to 10".into(),
            );
        }
        if workload == Workload::Steady {
            out.jobs = out.rate * out.secs;
        }
        if workload == Workload::Floor && !backlog_given {
            out.backlog = 0;
        }
        if out.pace_ms > 0 && workload != Workload::Floor {
            return Err("--pace applies to floor only".into());
        }
        if out.keep && workload != Workload::Drain {
            return Err("--keep applies to drain only".into());
        }
        if out.no_keys && workload != Workload::Fairness {
            return Err("--no-keys applies to fairness only".into());
        }
        if quiet_given && workload != Workload::Fairness {
            return Err(
                "--quiet-keys, --quiet-every and --flood-keys apply to fairness only".into(),
            );
        }
        if workload == Workload::Fairness && (out.flood_keys == 0 || out.flood_keys > out.jobs) {
            return Err("--flood-keys must be 1 to --jobs".into());
        }
        if out.quiet_every_ms == 0 {
            return Err("--quiet-every must be at least 1 (ms)".into());
        }
        if out.jobs == 0 && workload != Workload::Idle {
            return Err("--jobs must be at least 1".into());
        }
        Ok(out)
    }
}

fn number(flag: &str, s: &str) -> Result<u64, String> {
    s.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("{flag} wants a number, not {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        Args::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn usage_lists_each_workload_once_at_the_start_of_a_line() {
        let (workloads, options) = USAGE
            .split_once("\noptions:\n")
            .expect("a workloads part and an options part");
        for (name, _) in Workload::ALL {
            let entry = format!("\n  {name:<20}");
            assert_eq!(
                workloads.matches(&entry).count(),
                1,
                "{name} in {workloads}"
            );
            assert!(!options.contains(&entry), "{name}");
        }
        // Each line is an entry (two spaces, a name, the text from column 23) or its continuation.
        for line in workloads
            .lines()
            .skip_while(|l| !l.starts_with("workloads"))
            .skip(1)
        {
            let (name, text) = line.split_at(22.min(line.len()));
            assert!(
                line.starts_with("  ") && !text.starts_with(' ') && !name.trim().contains(' '),
                "{line:?}"
            );
        }
    }

    #[test]
    fn defaults_and_flags() {
        let a = parse("drain").unwrap();
        assert_eq!(
            (a.workload, a.jobs, a.concurrency),
            (Workload::Drain, 50_000, 50)
        );
        assert_eq!(a.redis, "redis://127.0.0.1:6379");
        let a = parse("delayed --jobs 1_000 --redis redis://x:1 --concurrency 5").unwrap();
        assert_eq!(
            (a.jobs, a.concurrency, a.redis.as_str()),
            (1000, 5, "redis://x:1")
        );
        assert_eq!(parse("memory").unwrap().jobs, 100_000);
        let a = parse("enqueue-concurrent").unwrap();
        assert_eq!(
            (a.workload, a.jobs, a.concurrency),
            (Workload::EnqueueConcurrent, 64_000, 64)
        );
        let a = parse("drain-io --concurrency 10").unwrap();
        assert_eq!(
            (a.workload, a.jobs, a.concurrency),
            (Workload::DrainIo, 64_000, 10)
        );
        assert!(parse("drain --observe --jobs 5").unwrap().observe);
        assert!(!parse("drain").unwrap().flush);
        assert!(parse("drain --flush").unwrap().flush);
        let a = parse("outbox").unwrap();
        assert_eq!(
            (a.workload, a.jobs, a.concurrency),
            (Workload::Outbox, 32_000, 64)
        );
        let a = parse("outbox --jobs 2000 --database postgres://u@h:1/d").unwrap();
        assert_eq!((a.jobs, a.database.as_str()), (2000, "postgres://u@h:1/d"));
        let a = parse("steady").unwrap();
        assert_eq!(
            (a.workload, a.rate, a.secs, a.jobs, a.concurrency),
            (Workload::Steady, 20_000, 60, 1_200_000, 50)
        );
        let a = parse("steady --rate 8000 --secs 5").unwrap();
        assert_eq!((a.rate, a.secs, a.jobs), (8000, 5, 40_000));
        assert_eq!(parse("idle").unwrap().secs, 10);
        assert!(parse("steady --rate 0").is_err());
        assert!(parse("nope").is_err());
        assert!(parse("drain --jobs").is_err());
        assert!(parse("idle --topics 11").is_err());
        let a = parse("wait").unwrap();
        assert_eq!(
            (a.workload, a.jobs, a.concurrency),
            (Workload::Wait, 1_000, 50)
        );
        let a = parse("fairness").unwrap();
        assert_eq!(
            (a.workload, a.jobs, a.quiet_keys, a.no_keys),
            (Workload::Fairness, 100_000, 50, false)
        );
        let a = parse("fairness --quiet-keys 0 --no-keys").unwrap();
        assert_eq!((a.quiet_keys, a.no_keys, a.flood_keys), (0, true, 1));
        let a = parse("fairness --jobs 1000000 --flood-keys 100,000").unwrap();
        assert_eq!(a.flood_keys, 100_000);
        assert!(parse("fairness --jobs 10 --flood-keys 11").is_err());
        assert!(parse("fairness --flood-keys 0").is_err());
        assert_eq!(
            parse("fairness --quiet-every 500").unwrap().quiet_every_ms,
            500
        );
        assert!(parse("fairness --quiet-every 0").is_err());
        assert!(parse("drain --quiet-every 5").is_err());
        assert!(parse("drain --flood-keys 2").is_err());
        assert!(parse("drain --quiet-keys 0").is_err());
        let a = parse("batch").unwrap();
        assert_eq!((a.workload, a.jobs), (Workload::Batch, 10_000));
        assert!(parse("drain --keep").unwrap().keep);
        assert!(!parse("drain").unwrap().keep);
        assert!(parse("drain-io --keep").is_err());
        let a = parse("floor").unwrap();
        assert_eq!(
            (a.workload, a.jobs, a.concurrency),
            (Workload::Floor, 50_000, 64)
        );
        assert_eq!(a.backlog, 0);
        assert_eq!(parse("floor --backlog 1000").unwrap().backlog, 1000);
        assert_eq!(parse("floor --pace 2").unwrap().pace_ms, 2);
        assert!(parse("drain --pace 2").is_err());
        assert_eq!(parse("backlog").unwrap().backlog, 1_000_000);
    }
}
