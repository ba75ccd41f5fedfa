//! Key names. One hash tag per topic, so every script touches one slot (Redis Cluster safe):
//!
//! ```text
//! postpone:{<ns>:<topic>}:due           zset  id -> due time (ms)
//! postpone:{<ns>:<topic>}:active        zset  id -> lease deadline (ms); and, scored +inf, markers no
//!                                             id can be: one while any job is active (keeps the key
//!                                             hashed), one while the topic has keyed jobs (`fair` in
//!                                             stats; an enqueue without a key asks for it with the
//!                                             ids it looks up there: prelude_core.lua, fair.lua)
//! postpone:{<ns>:<topic>}:jobs          hash  id -> record (due and active jobs)
//! postpone:{<ns>:<topic>}:history       hash  "<minute % 1500><e|p|r|f|d>" -> minute * 10^8 + count
//!                                             (25 h of per-minute counts: enqueued, processed,
//!                                             retried, failed, dead)
//! postpone:{<ns>:<topic>}:leases        hash  id -> lease "<token>:<due time>:<holder>[:n|:c<k>]" (active jobs)
//! postpone:{<ns>:<topic>}:stalls        hash  id -> expired leases so far
//! postpone:{<ns>:<topic>}:cancels       set   ids cancelled while active
//! postpone:{<ns>:<topic>}:dead          zset  death -> died at (ms): the listed dead letters
//! postpone:{<ns>:<topic>}:dead_jobs     hash  death -> final record
//! postpone:{<ns>:<topic>}:dead_info     hash  death -> "<died at ms> <why it died>"
//! postpone:{<ns>:<topic>}:dead_keys     hash  death -> its job's key for fairness (deaths of keyed
//!                                             jobs, while their record stays; named in prelude.lua;
//!                                             touched only once `dkeys` is set in stats)
//! postpone:{<ns>:<topic>}:dead_pending  zset  death -> when its hook may next run (ms)
//! postpone:{<ns>:<topic>}:stats         hash  counters (`dead` numbers the deaths), `paused`, and
//!                                             flow control: `flow` (the limits claimed under),
//!                                             `rate_tat`, `hold_until`, `full`, `prio` (see claim.lua)
//! postpone:{<ns>:<topic>}:dead_ids      zset  death, score 0 (a listed death's id, ranged by lex)
//! postpone:{<ns>:<topic>}:priority      hash  id -> priority (1-31; live jobs enqueued with one)
//! postpone:{<ns>:<topic>}:prio_ready    zset  id -> due time - priority x 2^48 (due jobs with one)
//! postpone:{<ns>:<topic>}:prio_wait     zset  id -> due time (scheduled jobs with one)
//! postpone:{<ns>:<topic>}:claim:<token> string  the ids a claim took, until its lease would end
//! postpone:{<ns>:<topic>}:delivered     zset  delivery token -> when recorded (ms): jobs an outbox relay
//!                                             delivered (see `delivered.rs`), kept until forgotten
//! postpone:{<ns>:<topic>}:unique        hash  unique key -> "<job id> <window end ms>" (see keyed.rs)
//! postpone:{<ns>:<topic>}:unique_until  zset  unique key -> window end (ms)
//! postpone:{<ns>:<topic>}:debounce      hash  debounce key -> "<pending job id> <created ms>"
//! postpone:{<ns>:<topic>}:debounce_at   zset  debounce key -> last enqueue of the key (ms)
//! postpone:{<ns>:<topic>}:done          zset  id -> when it finished (ms): finished jobs kept while the
//!                                             topic keeps them (`keep` in stats; see outcomes.lua)
//! postpone:{<ns>:<topic>}:done_jobs     hash  id -> "<s|c> <finished ms> <record length>\n<record><result>"
//! postpone:{<ns>:<topic>}:waited        zset  id -> until when a caller waits for it (ms; `waits` in stats)
//! postpone:{<ns>:<topic>}:progress      hash  id -> "<value> <message>" (`progress` in stats)
//! postpone:{<ns>:<topic>}:told          hash  id -> "<ended at ms> <s|c|d><result|reason>": how a waited
//!                                             job ended, kept as long as its id is in `waited`
//! postpone:{<ns>:<topic>}:follows       hash  id -> the refs that follow the job, one per line ("b:<batch
//!                                             id>"; `follow` in stats; see workflow.rs)
//! postpone:{<ns>:<topic>}:ends          zset  end number -> when it may next be delivered (ms): ends of
//!                                             followed jobs not yet delivered (`ends` in stats)
//! postpone:{<ns>:<topic>}:end_info      hash  end number -> "<s|c|d> <id len> <refs len>\n<id><refs><reason>"
//! postpone:{<ns>:<topic>}:waiting       hash  id -> "<nonce> <policy> <parents left> <in|at> <due value>
//!                                             <priority>[ <key>]\n<parent refs>": jobs waiting for jobs, which
//!                                             are in `due` at MAX_DUE_MS + 1 (see deps.lua)
//! postpone:{<ns>:<topic>}:heard         hash  "<id>\n<parent ref>": parent ends counted; "<id>\n<nonce>\n
//!                                             <parent ref>" -> "<s|c|d><reason>": an end that came
//!                                             before its job was parked
//! postpone:{<ns>:<topic>}:preheard      zset  those early ends -> when they came (ms), to drop late
//! postpone:{<ns>:<topic>}:fone          hash  key SHA-1 -> id: the queue of each key with one job (a
//!                                             key's second job moves it to the key's `fq` zset)
//! postpone:{<ns>:<topic>}:fq:<SHA-1>   zset  id -> due time: one key's queue, once it has more than one
//!                                             job (entries checked against `due`; gone with its last
//!                                             entry). A job's key is in its
//!                                             record (record.rs, flag 8); jobs without one are filed
//!                                             under the key '' in a topic with keyed jobs. See
//!                                             fair.lua, which names these from `due`'s name
//! postpone:{<ns>:<topic>}:fskip         hash  key SHA-1 -> how many entries at the front of its `fq`
//!                                             zset a claim passed without removing them (a key taking
//!                                             from the head of `due`); removed before a write to the
//!                                             zset, or with the zset whole (UNLINK)
//! postpone:{<ns>:<topic>}:fready        zset  key SHA-1 -> tag: keys with a job due now, round-robin
//! postpone:{<ns>:<topic>}:fwait         zset  key SHA-1 -> when it may next go (its job, rate or hold)
//! postpone:{<ns>:<topic>}:frun          hash  key SHA-1 -> running jobs (under a max running per key)
//! postpone:{<ns>:<topic>}:ftat          zset  key SHA-1 -> its rate's TAT (while in the future)
//! postpone:{<ns>:<topic>}:fhold         zset  key SHA-1 -> until when a handler's rate_limited holds it
//! postpone:{<ns>:<topic>}:schedules     hash  periodic schedule name -> "<next ms> <last ms|-> <run now
//!                                             ms|-> <definition>" (see periodic.rs; the scripts' last key)
//! postpone:{<ns>}:wake                  pub/sub channel: "<due ms> <topic>"
//! postpone:{<ns>}:ended                 pub/sub channel: "<topic>\n<id>\n<s|c|d|p><result|reason|progress>",
//!                                             how a waited job ended, or its progress
//! postpone:{<ns>}:topics                hash  topic -> partitions (every topic ever used)
//! postpone:{<ns>}:workers               zset  worker id -> when its entry expires (ms)
//! postpone:{<ns>}:worker_info           hash  worker id -> "<beat ms> <json>"
//! postpone:{<ns>}:batches               zset  batch id -> created (ms): the namespace's batches
//! postpone:{<ns>}:batch_check           zset  batch id -> when recovery next looks at it (ms): batches
//!                                             not yet completed with every callback enqueued
//! postpone:{<ns>:batch:<id>}:batch      hash  a batch: counts, `closed`, `created`, `completed`, `desc`,
//!                                             callbacks `cb:<kind>` and `fired:<kind>` (see workflow.rs)
//! postpone:{<ns>:batch:<id>}:members    zset  "<store topic>\t<job id>" -> number x 4 + state (0 pending,
//!                                             1 succeeded, 2 dead, 3 cancelled), numbered as added
//! postpone:{<ns>:batch:<id>}:staged     hash  number -> a member or fired callback committed and not yet
//!                                             known to be in its topic
//! postpone:{<ns>}:outboxes              hash  outbox name -> "<expires ms> <reported ms> <report>": the
//!                                             reports of transactional outboxes' relays
//! ```
//!
//! A job with a priority is also in `due` at its due time (so every lookup, listing and count is the
//! same as for any job), and in one of `prio_wait` (until due) or `prio_ready` (once due: ordered by
//! priority, then due time); the claim moves due ones from `prio_wait` to `prio_ready` and claims from
//! `prio_ready` first. Entries there that no longer match the job's due time are stale and skipped.
//!
//! A death is `<id>\n<sequence, 15 digits>`: each death of a job is a dead letter of its own. Its record
//! and reason stay while it is listed or its hook pending. A lease (in `leases`) is
//! `<token>:<due time>:<holder>`: the claim's random token, the due time the job keeps if the lease
//! expires, and the number of the worker that claimed it; in a topic with keyed jobs, after them
//! `:c<k>` (`<k>`: the key's SHA-1) when the job's key counts it as running (its end frees that key's slot in
//! `frun`), else `:n` (see `fair.lua`).
//!
//! A partition of a partitioned topic is a topic of its own here, named `<topic>#<p>`
//! (`postpone:{<ns>:<topic>#<p>}:due`, ...), so each partition has its own hash tag and slot; partition
//! 0 keeps the topic's own name.
//!
//! Ids are only ever members and fields, never part of a key; namespaces and topics are validated to
//! `[A-Za-z0-9_.-]` (plus exactly one `#<0-1023>` partition suffix), so no input can reach another
//! topic's keys or break the hash tag.

use crate::error::Result;
use crate::partition::validate_store_topic;

/// The suffixes of a topic's keys, in the order every script receives them as `KEYS` (see
/// `scripts/prelude_core.lua`). `enqueue_one.lua` and `enqueue_plain.lua` get only the first four.
const SUFFIXES: [&str; 16] = [
    "due",
    "active",
    "jobs",
    "history",
    "leases",
    "stalls",
    "cancels",
    "dead",
    "dead_jobs",
    "dead_info",
    "dead_pending",
    "stats",
    "dead_ids",
    "priority",
    "prio_ready",
    "prio_wait",
];

/// The suffixes of the keys of finished jobs, waiters, progress, followers and jobs waiting for jobs,
/// after the sixteen (see `scripts/outcomes.lua` and `scripts/deps.lua`).
const OUTCOME_SUFFIXES: [&str; 11] = [
    "done",
    "done_jobs",
    "waited",
    "progress",
    "told",
    "follows",
    "ends",
    "end_info",
    "waiting",
    "heard",
    "preheard",
];

/// Index of `dead_pending` in [`SUFFIXES`].
#[cfg(test)]
const DEAD_PENDING: usize = 10;

/// The keys of one topic, in script order: the sixteen, and the same followed by the eleven of
/// `OUTCOME_SUFFIXES`.
#[derive(Debug, Clone)]
pub(super) struct TopicKeys(pub(super) [String; 16], Vec<String>);

impl TopicKeys {
    /// The keys of `topic` (a topic or one partition of it) in namespace `ns` (already validated);
    /// fails on an invalid name.
    pub(super) fn new(ns: &str, topic: &str) -> Result<Self> {
        validate_store_topic(topic)?;
        let key = |s: &str| format!("postpone:{{{ns}:{topic}}}:{s}");
        let keys = SUFFIXES.map(key);
        let mut with_outcomes = keys.to_vec();
        with_outcomes.extend(OUTCOME_SUFFIXES.map(key));
        Ok(TopicKeys(keys, with_outcomes))
    }

    /// The key of the record of the claim with `token` (in the topic's slot).
    pub(super) fn claim(&self, token: u64) -> String {
        self.other(&format!("claim:{token}"))
    }

    /// The topic's sixteen keys and the eleven of finished jobs, waiters, progress, followers and
    /// jobs waiting for jobs (`done`, `done_jobs`, `waited`, `progress`, `told`, `follows`, `ends`,
    /// `end_info`, `waiting`, `heard`, `preheard`), for the scripts that include outcomes.lua.
    pub(super) fn with_outcomes(&self) -> &[String] {
        &self.1
    }

    /// Another key of the topic (in its slot): `postpone:{<ns>:<topic>}:<suffix>`.
    pub(super) fn other(&self, suffix: &str) -> String {
        let due = &self.0[0];
        format!("{}{suffix}", &due[..due.len() - "due".len()])
    }
}

/// The namespace's wake-up channel.
pub(super) fn wake_channel(ns: &str) -> String {
    format!("postpone:{{{ns}}}:wake")
}

/// The namespace's channel of announcements to waiters (see outcomes.lua).
pub(super) fn ended_channel(ns: &str) -> String {
    format!("postpone:{{{ns}}}:ended")
}

/// The namespace's registries: topics, live workers and their entries (one slot).
pub(super) fn registries(ns: &str) -> [String; 3] {
    ["topics", "workers", "worker_info"].map(|s| format!("postpone:{{{ns}}}:{s}"))
}

/// The namespace's outbox reports (in the registries' slot).
pub(super) fn outboxes(ns: &str) -> String {
    format!("postpone:{{{ns}}}:outboxes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let k = TopicKeys::new("shop", "orders.close").unwrap();
        assert_eq!(k.0[0], "postpone:{shop:orders.close}:due");
        assert_eq!(
            k.0[DEAD_PENDING],
            "postpone:{shop:orders.close}:dead_pending"
        );
        assert_eq!(k.0[11], "postpone:{shop:orders.close}:stats");
        assert_eq!(k.0[3], "postpone:{shop:orders.close}:history");
        assert_eq!(wake_channel("shop"), "postpone:{shop}:wake");
        assert_eq!(registries("shop")[1], "postpone:{shop}:workers");
        assert_eq!(k.claim(7), "postpone:{shop:orders.close}:claim:7");
        assert_eq!(k.with_outcomes().len(), 27);
        assert_eq!(k.with_outcomes()[..16], k.0[..]);
        assert_eq!(
            k.with_outcomes()[17],
            "postpone:{shop:orders.close}:done_jobs"
        );
        assert_eq!(ended_channel("shop"), "postpone:{shop}:ended");
        assert!(TopicKeys::new("shop", "a}b").is_err());
        let p = TopicKeys::new("shop", "orders.close#2").unwrap();
        assert_eq!(p.0[0], "postpone:{shop:orders.close#2}:due");
        for bad in [
            "orders#",
            "orders#01",
            "orders#1024",
            "orders#1}x",
            "orders#1#1",
        ] {
            assert!(TopicKeys::new("shop", bad).is_err(), "{bad}");
        }
    }
}
