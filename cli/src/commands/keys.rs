//! `keys TOPIC`: a topic's busiest keys (fairness by key), by jobs queued: per key its jobs queued,
//! running (when a max running per key counts them), its limit (its own, or the limits per key the
//! topic's workers claim under) and until when it is held back. `key-limits ls|set|clear`: the keys
//! with limits of their own.

use chrono::{DateTime, Utc};
use postpone::ops::{KeyLoad, KeysPage, Ops};
use postpone::KeyLimits;
use serde::Serialize;

use crate::args::KeyLimitsCommand;
use crate::failure::Failure;
use crate::output::say;
use crate::output::{cut, Out};

/// Characters of a key a table shows (a key is at most 128 bytes): a longer one is cut with `…`.
const KEY_SHOWN: usize = 48;

/// `keys TOPIC --json`.
#[derive(Serialize)]
struct KeysDoc<'a> {
    topic: &'a str,
    keys: Vec<KeyDoc>,
    total: u64,
    sampled: bool,
    running_counted: bool,
    /// The limits per key the topic's workers last claimed under; `null` until a worker claimed.
    limit: Option<LimitDoc>,
}

/// The limits per key in `keys --json`.
#[derive(Serialize)]
struct LimitDoc {
    /// `null`: no max running per key.
    max_running: Option<u32>,
    /// `null`: no rate per key.
    rate: Option<RateDoc>,
}

/// A rate per key in `keys --json`: `jobs` per `per_ms`.
#[derive(Serialize)]
struct RateDoc {
    jobs: u32,
    per_ms: u128,
}

impl LimitDoc {
    fn of(l: KeyLimits) -> Self {
        LimitDoc {
            max_running: Some(l.max_running_per_key()).filter(|n| *n > 0),
            rate: l.rate_per_key().map(|r| RateDoc {
                jobs: r.jobs(),
                per_ms: r.per().as_millis(),
            }),
        }
    }
}

/// One key in `keys --json`.
#[derive(Serialize)]
struct KeyDoc {
    /// `""`: the jobs without a key, in a topic with keyed jobs.
    key: String,
    queued: u64,
    /// `null` when the topic does not count running jobs per key.
    running: Option<u64>,
    held_until: Option<DateTime<Utc>>,
    /// The key's own limits (`key-limits set`), in place of the topic's; `null`: none of its own.
    own_limit: Option<LimitDoc>,
}

impl KeyDoc {
    fn of(k: KeyLoad, running_counted: bool) -> Self {
        KeyDoc {
            own_limit: k.own_limits.map(LimitDoc::of),
            held_until: k.held_until_ms.and_then(DateTime::from_timestamp_millis),
            running: running_counted.then_some(k.running),
            queued: k.queued,
            key: k.key,
        }
    }
}

/// `keys TOPIC`.
pub(crate) async fn keys(ops: &Ops, out: &Out, topic: &str, limit: u16) -> Result<(), Failure> {
    let page = ops.busiest_keys(topic, usize::from(limit)).await?;
    if out.json {
        let KeysPage {
            keys,
            total,
            sampled,
            running_counted,
            limits,
        } = page;
        out.json(&KeysDoc {
            topic,
            keys: keys
                .into_iter()
                .map(|k| KeyDoc::of(k, running_counted))
                .collect(),
            total,
            sampled,
            running_counted,
            limit: limits.map(LimitDoc::of),
        });
        return Ok(());
    }
    if page.keys.is_empty() {
        say!(
            "no keyed jobs queued in topic {topic} (a job gets a key from its type's \
             #[job(key = \"field\")] or from .key(..) when enqueued)"
        );
        return Ok(());
    }
    let mut table = out.table(&["KEY", "QUEUED", "RUNNING", "LIMIT", "HELD UNTIL"]);
    // The same for every key: the limits per key the workers claim under (`-` until one claimed).
    let limit = page
        .limits
        .map_or_else(|| "-".to_owned(), |l| l.to_string());
    for k in &page.keys {
        table.add_row(vec![
            match k.key.as_str() {
                "" => out.dim("(no key)"),
                key => cut(key, KEY_SHOWN),
            },
            k.queued.to_string(),
            match page.running_counted {
                true => k.running.to_string(),
                false => "-".to_owned(),
            },
            match (k.key.is_empty(), k.own_limits, page.limits) {
                // The jobs without a key are under no limit per key.
                (true, _, Some(_)) => "none".to_owned(),
                (false, Some(own), _) => format!("{own} (own)"),
                _ => limit.clone(),
            },
            k.held_until_ms
                .and_then(DateTime::from_timestamp_millis)
                .map_or_else(|| "-".to_owned(), |t| out.warn(&out.time(t))),
        ]);
    }
    Out::numeric(&mut table, &[1, 2]);
    out.print_table(&table);
    let plural = if page.total == 1 { "" } else { "s" };
    let mut footer = format!("{} key{plural} with a job queued", page.total);
    if page.sampled {
        footer.push_str("; busiest of a sample of the topic's keys");
    }
    if !page.running_counted {
        footer.push_str("; RUNNING is counted only under a max running per key");
    }
    say!("{}", out.dim(&footer));
    Ok(())
}

/// `key-limits ls|set|clear --json`.
#[derive(Serialize)]
struct OwnDoc<'a> {
    topic: &'a str,
    keys: Vec<OwnKeyDoc>,
}

/// One key with limits of its own in `key-limits --json`.
#[derive(Serialize)]
struct OwnKeyDoc {
    key: String,
    limit: LimitDoc,
}

/// `key-limits ls|set|clear`.
pub(crate) async fn key_limits(
    ops: &Ops,
    out: &Out,
    command: KeyLimitsCommand,
) -> Result<(), Failure> {
    let topic = match command {
        KeyLimitsCommand::Ls { topic } => topic,
        KeyLimitsCommand::Set {
            topic,
            key,
            max_running,
            rate,
        } => {
            let mut limits = KeyLimits::new().max_running(max_running.unwrap_or(0));
            if let Some(rate) = rate {
                limits = limits.rate(rate);
            }
            ops.set_key_limits(&topic, &key, limits).await?;
            if !out.json {
                let what = match limits.is_none() {
                    true => "no limit, in place of the topic's limits per key".to_owned(),
                    false => format!("{limits} of its own"),
                };
                say!(
                    "key {key:?} of topic {topic} now runs under {what}, from the workers' next \
                     claim on (`postpone key-limits clear {topic} KEY` takes them back)"
                );
            }
            topic
        }
        KeyLimitsCommand::Clear { topic, key } => {
            ops.clear_key_limits(&topic, &key).await?;
            if !out.json {
                say!("key {key:?} of topic {topic} runs under the topic's limits per key again");
            }
            topic
        }
    };
    let own = ops.key_limits(&topic).await?;
    if out.json {
        out.json(&OwnDoc {
            topic: &topic,
            keys: own
                .into_iter()
                .map(|(key, l)| OwnKeyDoc {
                    key,
                    limit: LimitDoc::of(l),
                })
                .collect(),
        });
        return Ok(());
    }
    if own.is_empty() {
        say!("no key of topic {topic} has limits of its own");
        return Ok(());
    }
    let mut table = out.table(&["KEY", "LIMIT"]);
    for (key, l) in &own {
        table.add_row(vec![cut(key, KEY_SHOWN), l.to_string()]);
    }
    out.print_table(&table);
    Ok(())
}
