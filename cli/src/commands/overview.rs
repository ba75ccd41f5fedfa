//! `stats`, `topics`, `workers`: the namespace at a glance.

use std::io::IsTerminal;
use std::time::Duration;

use futures_util::future::join_all;
use postpone::ops::{Ops, TopicInfo, WorkerInfo};
use postpone::TopicCounts;
use serde::Serialize;

use crate::failure::Failure;
use crate::output::say;
use crate::output::{absolute, Out};

/// Per-minute rates, averaged over the last minutes.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Rates {
    enqueued: f64,
    processed: f64,
    retried: f64,
    failed: f64,
    dead: f64,
}

/// A topic in `stats --json`.
#[derive(Debug, Serialize)]
struct TopicStats {
    name: String,
    partitions: u16,
    paused: bool,
    counts: TopicCounts,
    /// Per minute, averaged over `minutes`.
    rates: Rates,
    unreadable: Vec<Unreadable>,
}

/// A partition that could not be read (a cluster master down), in `stats` and `topics`.
#[derive(Debug, Serialize)]
struct Unreadable {
    partition: u16,
    error: String,
}

fn unreadable(list: Vec<(u16, String)>) -> Vec<Unreadable> {
    list.into_iter()
        .map(|(partition, error)| Unreadable { partition, error })
        .collect()
}

/// A topic in `topics --json`.
#[derive(Debug, Serialize)]
struct TopicDoc {
    name: String,
    partitions: u16,
    counts: TopicCounts,
    unreadable: Vec<Unreadable>,
}

impl From<TopicInfo> for TopicDoc {
    fn from(t: TopicInfo) -> Self {
        TopicDoc {
            name: t.name,
            partitions: t.partitions,
            counts: t.counts,
            unreadable: unreadable(t.unreadable),
        }
    }
}

/// `stats --json`.
#[derive(Debug, Serialize)]
struct Stats {
    /// Now, by Redis's clock.
    now: chrono::DateTime<chrono::Utc>,
    /// The minutes the rates are averaged over.
    minutes: u32,
    topics: Vec<TopicStats>,
}

async fn gather(ops: &Ops, minutes: u32) -> Result<Stats, Failure> {
    let now_ms = ops.now_ms().await?;
    let topics = ops.topics().await?;
    let histories = join_all(topics.iter().map(|t| ops.history(&t.name, minutes))).await;
    let mut out = Vec::with_capacity(topics.len());
    for (t, history) in topics.into_iter().zip(histories) {
        let mut sum = Rates::default();
        for m in history? {
            sum.enqueued += m.enqueued as f64;
            sum.processed += m.processed as f64;
            sum.retried += m.retried as f64;
            sum.failed += m.failed as f64;
            sum.dead += m.dead as f64;
        }
        let n = f64::from(minutes);
        let rates = Rates {
            enqueued: round(sum.enqueued / n),
            processed: round(sum.processed / n),
            retried: round(sum.retried / n),
            failed: round(sum.failed / n),
            dead: round(sum.dead / n),
        };
        out.push(TopicStats {
            paused: t.counts.paused,
            name: t.name,
            partitions: t.partitions,
            counts: t.counts,
            rates,
            unreadable: unreadable(t.unreadable),
        });
    }
    Ok(Stats {
        now: chrono::DateTime::from_timestamp_millis(now_ms).unwrap_or_default(),
        minutes,
        topics: out,
    })
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn rate(x: f64) -> String {
    if x == 0.0 {
        "0".to_owned()
    } else if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn print_stats(out: &Out, stats: &Stats, where_: &str, clear: &str) {
    say!(
        "{clear}{}  {}",
        out.bold(where_),
        out.dim(&format!(
            "{} (Redis clock); rates per minute over the last {} min",
            absolute(stats.now),
            stats.minutes
        ))
    );
    if stats.topics.is_empty() {
        say!("no topics yet: nothing was enqueued to or served from this namespace");
        return;
    }
    let mut table = out.table(&[
        "TOPIC",
        "STATE",
        "SCHEDULED",
        "READY",
        "RUNNING",
        "WAITING",
        "DEAD",
        "ENQUEUED/MIN",
        "PROCESSED/MIN",
        "FAILED/MIN",
    ]);
    for t in &stats.topics {
        let c = &t.counts;
        let state = if t.paused {
            out.warn("paused")
        } else {
            "active".to_owned()
        };
        let dead = if c.dead > 0 {
            out.bad(&c.dead.to_string())
        } else {
            "0".to_owned()
        };
        table.add_row(vec![
            t.name.clone(),
            state,
            c.scheduled.to_string(),
            c.ready.to_string(),
            c.active.to_string(),
            c.waiting.to_string(),
            dead,
            rate(t.rates.enqueued),
            rate(t.rates.processed),
            rate(t.rates.failed),
        ]);
    }
    Out::numeric(&mut table, &[2, 3, 4, 5, 6, 7, 8, 9]);
    out.print_table(&table);
    for t in &stats.topics {
        for Unreadable {
            partition: p,
            error: e,
        } in &t.unreadable
        {
            say!(
                "{} partition {p} of {} could not be read: {e}",
                out.warn("note:"),
                t.name
            );
        }
    }
}

/// `stats [--watch]`.
pub(crate) async fn stats(
    ops: &Ops,
    out: &mut Out,
    where_: &str,
    watch: bool,
    interval: Duration,
    minutes: u32,
) -> Result<(), Failure> {
    let redraw = watch && !out.json && std::io::stdout().is_terminal();
    loop {
        let stats = gather(ops, minutes).await?;
        out.now_ms = stats.now.timestamp_millis();
        match (out.json, watch) {
            (true, true) => out.json_line(&stats),
            (true, false) => out.json(&stats),
            (false, _) => {
                // Redrawing: clear the screen and go home first.
                let clear = if redraw { "\x1b[2J\x1b[H" } else { "" };
                print_stats(out, &stats, where_, clear);
                if watch && !redraw {
                    say!();
                }
            }
        }
        if !watch {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// `topics`.
pub(crate) async fn topics(ops: &Ops, out: &Out) -> Result<(), Failure> {
    #[derive(Serialize)]
    struct Doc {
        topics: Vec<TopicDoc>,
    }
    let topics = ops.topics().await?;
    if out.json {
        out.json(&Doc {
            topics: topics.into_iter().map(TopicDoc::from).collect(),
        });
        return Ok(());
    }
    if topics.is_empty() {
        say!("no topics yet: nothing was enqueued to or served from this namespace");
        return Ok(());
    }
    let mut table = out.table(&[
        "TOPIC",
        "PARTITIONS",
        "SCHEDULED",
        "READY",
        "RUNNING",
        "WAITING",
        "DEAD",
        "PROCESSED",
        "FAILED",
        "PAUSED",
        "FLOW CONTROL",
    ]);
    for t in &topics {
        let c = &t.counts;
        table.add_row(vec![
            t.name.clone(),
            t.partitions.to_string(),
            c.scheduled.to_string(),
            c.ready.to_string(),
            c.active.to_string(),
            c.waiting.to_string(),
            c.dead.to_string(),
            c.processed.to_string(),
            c.failed.to_string(),
            if c.paused {
                out.warn("yes")
            } else {
                "no".to_owned()
            },
            flow_text(out, &c.flow),
        ]);
    }
    Out::numeric(&mut table, &[1, 2, 3, 4, 5, 6, 7, 8]);
    out.print_table(&table);
    Ok(())
}

/// `workers`.
pub(crate) async fn workers(ops: &Ops, out: &Out) -> Result<(), Failure> {
    #[derive(Serialize)]
    struct Doc {
        workers: Vec<WorkerInfo>,
    }
    let workers = ops.workers().await?;
    if out.json {
        out.json(&Doc { workers });
        return Ok(());
    }
    if workers.is_empty() {
        say!("no live workers in this namespace");
        return Ok(());
    }
    let mut table = out.table(&[
        "ID",
        "HOST",
        "PID",
        "VERSION",
        "TOPICS",
        "RUNNING",
        "STARTED",
        "LAST BEAT",
    ]);
    for w in &workers {
        let topics: Vec<&str> = w.topics.iter().map(|t| t.name.as_str()).collect();
        table.add_row(vec![
            w.id.clone(),
            w.host.clone(),
            w.pid.to_string(),
            w.version.clone(),
            topics.join(","),
            format!("{} of {}", w.running, w.concurrency),
            out.time(w.started_at),
            out.time(w.last_beat),
        ]);
    }
    Out::numeric(&mut table, &[2]);
    out.print_table(&table);
    Ok(())
}

/// A topic's limits as one cell: `100/s (5 may go now), at most 4 running, held 2s more`, or `-`.
fn flow_text(out: &Out, flow: &postpone::store::FlowCounts) -> String {
    let mut parts = Vec::new();
    if let Some(rate) = flow.rate {
        let budget = flow.rate_budget.unwrap_or(0);
        parts.push(format!("{rate} ({budget} may go now)"));
    }
    if let Some(n) = flow.max_running {
        parts.push(format!("at most {n} running"));
    }
    if let Some(until) = flow.held_until_ms {
        let left = until.saturating_sub(out.now_ms);
        let left = std::time::Duration::from_millis(u64::try_from(left).unwrap_or(0));
        parts.push(out.warn(&format!(
            "held by the provider {} more",
            postpone::ops::human_duration(left)
        )));
    }
    match parts.is_empty() {
        true => "-".to_owned(),
        false => parts.join(", "),
    }
}
