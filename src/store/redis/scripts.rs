//! The Lua scripts: one per state change, each loaded with `include_str!` behind a shared prelude and
//! run with EVALSHA, falling back to EVAL (which also caches the script) on NOSCRIPT: see `exec.rs`.

use std::sync::LazyLock;

/// What every script starts with: keys, constants, time, hints, history.
const PRELUDE_CORE: &str = include_str!("scripts/prelude_core.lua");
/// What every script but the single enqueue adds: leases, deaths, listings, priorities. Each function a
/// script's source defines is a closure made at every call, so the hottest script leaves these out.
const PRELUDE: &str = include_str!("scripts/prelude.lua");
/// Fairness by key: the helpers, made only when a script needs them (see fair.lua).
const FAIR: &str = include_str!("scripts/fair.lua");
/// Finished jobs kept, waiters and progress, after the prelude, for the scripts that end jobs or read
/// outcomes (they get the five keys of `TopicKeys::with_outcomes`).
const OUTCOMES: &str = include_str!("scripts/outcomes.lua");
/// The keys for fairness of jobs as operators see them (job, page, find_prefix, fair_keys).
const FAIR_LISTED: &str = include_str!("scripts/fair_listed.lua");
/// Jobs waiting for jobs, after outcomes.lua (their keys are three more of `TopicKeys::with_outcomes`).
const DEPS: &str = include_str!("scripts/deps.lua");
/// The batch scripts' helpers, after the core of the prelude (their keys are a batch's, not a topic's).
const BATCH: &str = include_str!("scripts/batch_prelude.lua");
/// The periodic scripts' helpers, after the prelude.
const PERIODIC: &str = include_str!("scripts/periodic_prelude.lua");

/// A script's source and its SHA1 (the EVALSHA name).
pub(super) struct Script {
    pub(super) source: String,
    pub(super) sha1: String,
}

/// Every script of the backend.
pub(super) struct Scripts {
    pub(super) enqueue: Script,
    pub(super) enqueue_one: Script,
    pub(super) enqueue_plain: Script,
    pub(super) enqueue_once: Script,
    pub(super) enqueue_keyed: Script,
    pub(super) claim: Script,
    pub(super) finish: Script,
    pub(super) extend: Script,
    pub(super) cancel: Script,
    pub(super) reschedule: Script,
    pub(super) job: Script,
    pub(super) counts: Script,
    pub(super) dead_list: Script,
    pub(super) dead_requeue: Script,
    pub(super) dead_purge: Script,
    pub(super) dead_trim: Script,
    pub(super) dead_of: Script,
    pub(super) dead_claim: Script,
    pub(super) dead_ack: Script,
    pub(super) dead_retry: Script,
    pub(super) page: Script,
    pub(super) find_prefix: Script,
    pub(super) history: Script,
    pub(super) fair_keys: Script,
    pub(super) set_paused: Script,
    pub(super) hold: Script,
    pub(super) registry: Script,
    pub(super) outboxes: Script,
    pub(super) outcome: Script,
    pub(super) retain: Script,
    pub(super) progress: Script,
    pub(super) periodic_upsert: Script,
    pub(super) periodic_tick: Script,
    pub(super) periodic_trigger: Script,
    pub(super) periodic_list: Script,
    pub(super) enqueue_member: Script,
    pub(super) batch_mark: Script,
    pub(super) batch_add: Script,
    pub(super) batch_count: Script,
    pub(super) batch_unstage: Script,
    pub(super) batch_due: Script,
    pub(super) ends_claim: Script,
    pub(super) ends_ack: Script,
    pub(super) dep_follow: Script,
    pub(super) dep_park: Script,
    pub(super) dep_hear: Script,
}

fn script(body: &str) -> Script {
    with_source(format!("{PRELUDE_CORE}\n{PRELUDE}\n{FAIR}\n{body}"))
}

/// A script that needs only the core of the prelude.
fn lean_script(body: &str) -> Script {
    with_source(format!("{PRELUDE_CORE}\n{body}"))
}

fn with_source(source: String) -> Script {
    let sha1 = redis::Script::new(&source).get_hash().to_owned();
    Script { source, sha1 }
}

/// A script that calls enqueue.lua's body as `enqueue_jobs(ARGV)`.
fn with_enqueue_jobs(body: &str) -> Script {
    script(&format!(
        "local function enqueue_jobs(ARGV)\n{}\nend\n{body}",
        include_str!("scripts/enqueue.lua")
    ))
}

/// A script that ends jobs or reads outcomes: the prelude, outcomes.lua, the body.
fn with_outcomes(body: &str) -> Script {
    script(&format!("{OUTCOMES}\n{body}"))
}

/// A script that shows jobs' keys for fairness: the prelude, outcomes.lua, fair_listed.lua, the body.
fn with_listed_keys(body: &str) -> Script {
    with_outcomes(&format!("{FAIR_LISTED}\n{body}"))
}

/// A script of jobs that wait for jobs: the prelude, outcomes.lua, deps.lua, the body.
fn with_deps(body: &str) -> Script {
    with_outcomes(&format!("{DEPS}\n{body}"))
}

/// A batch script: the core of the prelude, the batch helpers, the body (see batch_prelude.lua).
fn batch_script(body: &str) -> Script {
    lean_script(&format!("{BATCH}\n{body}"))
}

/// A periodic script: the prelude, the periodic helpers, the body.
fn periodic(body: &str) -> Script {
    script(&format!("{PERIODIC}\n{body}"))
}

/// The scripts, built once per process.
pub(super) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    enqueue: script(include_str!("scripts/enqueue.lua")),
    enqueue_one: lean_script(&format!(
        "{FAIR}\n{}",
        include_str!("scripts/enqueue_one.lua")
    )),
    enqueue_plain: lean_script(&format!(
        "{FAIR}\n{}",
        include_str!("scripts/enqueue_plain.lua")
    )),
    // enqueue.lua's body as a function of its arguments, for the jobs not delivered before, and for
    // the jobs whose keys let them through.
    enqueue_once: with_enqueue_jobs(include_str!("scripts/enqueue_once.lua")),
    enqueue_keyed: with_enqueue_jobs(include_str!("scripts/enqueue_keyed.lua")),
    claim: with_outcomes(include_str!("scripts/claim.lua")),
    finish: with_outcomes(include_str!("scripts/finish.lua")),
    extend: script(include_str!("scripts/extend.lua")),
    cancel: with_outcomes(include_str!("scripts/cancel.lua")),
    reschedule: script(include_str!("scripts/reschedule.lua")),
    job: with_listed_keys(include_str!("scripts/job.lua")),
    counts: with_outcomes(include_str!("scripts/counts.lua")),
    dead_list: script(include_str!("scripts/dead_list.lua")),
    dead_requeue: script(include_str!("scripts/dead_requeue.lua")),
    dead_purge: script(include_str!("scripts/dead_purge.lua")),
    dead_trim: script(include_str!("scripts/dead_trim.lua")),
    dead_of: script(include_str!("scripts/dead_of.lua")),
    dead_claim: script(include_str!("scripts/dead_claim.lua")),
    dead_ack: script(include_str!("scripts/dead_ack.lua")),
    dead_retry: script(include_str!("scripts/dead_retry.lua")),
    page: with_listed_keys(include_str!("scripts/page.lua")),
    find_prefix: with_listed_keys(include_str!("scripts/find_prefix.lua")),
    history: script(include_str!("scripts/history.lua")),
    fair_keys: script(&format!(
        "{FAIR_LISTED}\n{}",
        include_str!("scripts/fair_keys.lua")
    )),
    set_paused: script(include_str!("scripts/set_paused.lua")),
    hold: script(include_str!("scripts/hold.lua")),
    registry: script(include_str!("scripts/registry.lua")),
    outboxes: lean_script(include_str!("scripts/outboxes.lua")),
    outcome: with_outcomes(include_str!("scripts/outcome.lua")),
    retain: with_outcomes(include_str!("scripts/retain.lua")),
    progress: with_outcomes(include_str!("scripts/progress.lua")),
    periodic_upsert: periodic(include_str!("scripts/periodic_upsert.lua")),
    periodic_tick: periodic(include_str!("scripts/periodic_tick.lua")),
    periodic_trigger: periodic(include_str!("scripts/periodic_trigger.lua")),
    periodic_list: periodic(include_str!("scripts/periodic_list.lua")),
    // enqueue_once.lua's body as a function of its arguments, wrapping enqueue.lua's likewise.
    enqueue_member: with_enqueue_jobs(&format!(
        "local function enqueue_once_jobs(ARGV)\n{}\nend\n{}",
        include_str!("scripts/enqueue_once.lua"),
        include_str!("scripts/enqueue_member.lua")
    )),
    batch_mark: lean_script(include_str!("scripts/batch_mark.lua")),
    batch_add: batch_script(include_str!("scripts/batch_add.lua")),
    batch_count: batch_script(include_str!("scripts/batch_count.lua")),
    batch_unstage: batch_script(include_str!("scripts/batch_unstage.lua")),
    batch_due: lean_script(include_str!("scripts/batch_due.lua")),
    ends_claim: lean_script(include_str!("scripts/ends_claim.lua")),
    ends_ack: lean_script(include_str!("scripts/ends_ack.lua")),
    dep_follow: with_outcomes(include_str!("scripts/dep_follow.lua")),
    dep_park: with_deps(include_str!("scripts/dep_park.lua")),
    dep_hear: with_deps(include_str!("scripts/dep_hear.lua")),
});

#[cfg(test)]
mod tests {
    #[test]
    fn the_scripts_cap_due_times_like_the_seam() {
        let line = format!("local MAX_MS = {}\n", crate::store::MAX_DUE_MS);
        assert!(
            super::PRELUDE_CORE.contains(&line),
            "prelude_core.lua must say {line:?}"
        );
    }
}
