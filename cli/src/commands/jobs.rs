//! `jobs`, `job`, `dead ls`, `dead show`: listings by state (kept finished jobs too) and one job in
//! full.

use postpone::ops::{Cursor, JobDetail, JobPage, JobQuery, JobSummary, Ops, PageState, MAX_PAGE};
use postpone::JobState;
use serde::Serialize;

use crate::args::{PageArgs, StateArg};
use crate::failure::Failure;
use crate::output::say;
use crate::output::{absolute, cut, relative, Out};

fn page_state(state: StateArg) -> PageState {
    match state {
        StateArg::Scheduled => PageState::Scheduled,
        StateArg::Waiting => PageState::Waiting,
        StateArg::Running => PageState::Running,
        StateArg::Dead => PageState::Dead,
        StateArg::Done => PageState::Done,
    }
}

fn state_name(state: StateArg) -> &'static str {
    match state {
        StateArg::Scheduled => "scheduled",
        StateArg::Waiting => "waiting",
        StateArg::Running => "running",
        StateArg::Dead => "dead",
        StateArg::Done => "kept finished",
    }
}

/// `jobs TOPIC` and `dead ls TOPIC`.
pub(crate) async fn list(
    ops: &Ops,
    out: &Out,
    topic: &str,
    state: StateArg,
    page: &PageArgs,
) -> Result<(), Failure> {
    if state == StateArg::Done && page.id_prefix.is_some() {
        return Err(Failure::Usage(format!(
            "kept finished jobs are not searched by id prefix: `postpone job {topic} ID` shows one \
             by its whole id"
        )));
    }
    let mut query = JobQuery::new(page_state(state)).limit(usize::from(page.limit));
    if page.newest_first {
        query = query.newest_first();
    }
    if let Some(c) = &page.cursor {
        query = query.cursor(c.parse::<Cursor>()?);
    }
    if let Some(p) = &page.id_prefix {
        query = query.id_prefix(p.clone());
    }
    let result = ops.jobs(topic, &query).await?;
    if out.json {
        out.json(&result);
        return Ok(());
    }
    print_page(out, topic, state, &result, page.cursor.is_some());
    Ok(())
}

fn print_page(out: &Out, topic: &str, state: StateArg, page: &JobPage, later_page: bool) {
    let name = state_name(state);
    if page.jobs.is_empty() {
        match (&page.next, later_page) {
            (Some(_), _) => say!("no {name} jobs of topic {topic} on this page"),
            (None, true) => say!("no more {name} jobs of topic {topic}"),
            (None, false) => say!("no {name} jobs in topic {topic}"),
        }
    } else {
        let partitioned = page.jobs.iter().any(|j| j.partition > 0);
        // Keys for fairness, when a job of the page has one.
        let keyed = page.jobs.iter().any(|j| j.key.is_some());
        let mut headers = vec!["ID"];
        if partitioned {
            headers.push("PART");
        }
        if keyed {
            headers.push("KEY");
        }
        headers.extend(match state {
            StateArg::Scheduled => {
                ["DUE", "ATTEMPT", "ENQUEUED", "LAST ERROR", "PAYLOAD"].as_slice()
            }
            // A waiting job has no due time yet; what it waits for is on its own page.
            StateArg::Waiting => ["ENQUEUED", "ATTEMPT", "LAST ERROR", "PAYLOAD"].as_slice(),
            StateArg::Running => {
                ["LEASE UNTIL", "ATTEMPT", "WORKER", "LAST ERROR", "PAYLOAD"].as_slice()
            }
            StateArg::Dead => ["DIED", "ATTEMPTS", "REASON", "LAST ERROR", "PAYLOAD"].as_slice(),
            StateArg::Done => ["FINISHED", "STATE", "ATTEMPTS", "RESULT", "PAYLOAD"].as_slice(),
        });
        let mut table = out.table(&headers);
        for j in &page.jobs {
            table.add_row(row(out, state, j, partitioned, keyed));
        }
        out.print_table(&table);
        if state == StateArg::Waiting {
            say!(
                "{}",
                out.dim(&format!(
                    "`postpone job {topic} ID` shows the jobs one waits for"
                ))
            );
        }
    }
    if let Some(next) = &page.next {
        say!(
            "{} --cursor {next}",
            out.dim("more: run the same command with")
        );
    }
}

fn row(out: &Out, state: StateArg, j: &JobSummary, partitioned: bool, keyed: bool) -> Vec<String> {
    let mut cells = vec![j.id.clone()];
    if partitioned {
        cells.push(j.partition.to_string());
    }
    if keyed {
        cells.push(cut(j.key.as_deref().unwrap_or("-"), 24));
    }
    if state == StateArg::Done {
        let finished = j.finished.map_or("?", |f| f.as_str());
        let result = j.result.as_ref().map(|r| r.to_string()).unwrap_or_default();
        cells.extend([
            out.time(j.at),
            out.state(finished),
            j.attempt.to_string(),
            cut(&result, 40),
            cut(&j.payload.to_string(), 50),
        ]);
        return cells;
    }
    if state == StateArg::Waiting {
        cells.extend([
            j.enqueued_at.map(|t| out.time(t)).unwrap_or_default(),
            j.attempt.to_string(),
            cut(j.last_error.as_deref().unwrap_or(""), 40),
            cut(&j.payload.to_string(), 50),
        ]);
        return cells;
    }
    let third = match state {
        StateArg::Scheduled => j.enqueued_at.map(|t| out.time(t)).unwrap_or_default(),
        StateArg::Running => j.worker.clone().unwrap_or_else(|| "?".into()),
        _ => cut(j.reason.as_deref().unwrap_or(""), 40),
    };
    cells.extend([
        out.time(j.at),
        j.attempt.to_string(),
        third,
        cut(j.last_error.as_deref().unwrap_or(""), 40),
        cut(&j.payload.to_string(), 50),
    ]);
    cells
}

/// `job TOPIC ID`.
pub(crate) async fn show(ops: &Ops, out: &Out, topic: &str, id: &str) -> Result<(), Failure> {
    let Some(job) = ops.job(topic, id).await? else {
        return Err(Failure::NotFound(format!(
            "no job {id:?} in topic {topic:?} (it finished or was cancelled and its topic keeps no \
             finished jobs, or it never existed); `postpone dead show {topic} {id}` looks in the \
             dead letters"
        )));
    };
    if out.json {
        out.json(&job);
    } else {
        print_detail(out, &job);
    }
    Ok(())
}

/// A time, relative and absolute: "in 4m 12s (2026-05-01 09:00:00 UTC)".
fn both(out: &Out, t: chrono::DateTime<chrono::Utc>) -> String {
    format!(
        "{} ({})",
        relative(t.timestamp_millis(), out.now_ms),
        absolute(t)
    )
}

fn print_detail(out: &Out, job: &JobDetail) {
    // A label of 10 or more characters (`meta <key>`) still has a space before its value.
    let line = |label: &str, value: String| {
        let text = format!("  {:<9} {value}", out.bold(label));
        say!("{}", text.trim_end());
    };
    say!("{} {} of topic {}", out.bold("job"), job.id, job.topic);
    let state = match &job.state {
        JobState::Scheduled { due_at } => {
            format!("{}, due {}", out.state("scheduled"), both(out, *due_at))
        }
        JobState::Waiting { waiting_for } => format!(
            "{}, for {} other job{} to succeed",
            out.state("waiting"),
            waiting_for.len(),
            if waiting_for.len() == 1 { "" } else { "s" }
        ),
        JobState::Running { lease_until } => format!(
            "{}, lease ends {}",
            out.state("running"),
            both(out, *lease_until)
        ),
        JobState::Dead { died_at, reason } => format!(
            "{}, died {}: {reason}",
            out.state("dead"),
            both(out, *died_at)
        ),
        JobState::Succeeded { finished_at } => format!(
            "{}, finished {}",
            out.state("succeeded"),
            both(out, *finished_at)
        ),
        JobState::Cancelled { cancelled_at } => format!(
            "{}, cancelled {}",
            out.state("cancelled"),
            both(out, *cancelled_at)
        ),
        other => format!("{other:?}"),
    };
    line("state", state);
    for (n, p) in job.parents().iter().enumerate() {
        let label = if n == 0 { "waits for" } else { "" };
        let partition = match p.partition {
            0 => String::new(),
            n => format!(" (partition {n})"),
        };
        line(
            label,
            format!(
                "{} {}{partition}",
                p.id,
                out.dim(&format!("of topic {}", p.topic))
            ),
        );
    }
    if let Some(p) = &job.progress {
        let text = match p.message.as_str() {
            "" => p.value.to_string(),
            message => format!("{} {}", p.value, cut(message, 200)),
        };
        line("progress", text);
    }
    line("why", job.why.clone());
    if let Some(key) = &job.key {
        line("key", key.clone());
    }
    if let Some(batch) = job.batch_id() {
        line("batch", batch.to_owned());
    }
    if let Some(unique) = job.unique() {
        line("unique", unique.to_owned());
    }
    if let Some(debounce) = job.debounce() {
        line("debounce", debounce.to_owned());
    }
    let attempts = match job.max_attempts {
        Some(n) => format!("{} of {n}", job.attempt),
        None => format!(
            "{} of ? (its retry schedule is unknown: no live worker serves the topic)",
            job.attempt
        ),
    };
    line("attempt", attempts);
    if let Some(retry) = &job.retry_ms {
        let delays: Vec<String> = retry
            .iter()
            .skip(1)
            .map(|ms| match ms {
                0 => "0".to_owned(),
                ms => postpone::ops::human_duration(std::time::Duration::from_millis(*ms)),
            })
            .collect();
        line("schedule", delays.join(", "));
    }
    line("enqueued", both(out, job.enqueued_at));
    if job.partitions > 1 {
        line(
            "partition",
            format!("{} of {}", job.partition, job.partitions),
        );
    }
    if let Some(node) = &job.node {
        line("node", node.clone());
    }
    if job.stalls > 0 {
        line("stalls", job.stalls.to_string());
    }
    if let Some(w) = &job.worker {
        line("worker", w.clone());
    }
    if job.paused {
        line("topic", out.warn("paused"));
    }
    for (key, value) in &job.meta {
        line(&format!("meta {key}"), value.clone());
    }
    if let Some(delivered) = job.hook_delivered {
        line(
            "hook",
            if delivered {
                "delivered".to_owned()
            } else {
                out.warn("pending (the dead-letter hook has not succeeded yet)")
            },
        );
    }
    if job.errors.is_empty() {
        line("errors", out.dim("none"));
    } else {
        line("errors", String::new());
        for e in &job.errors {
            say!(
                "    attempt {}, {}: {}",
                e.attempt,
                relative(e.at_ms, out.now_ms),
                e.message
            );
        }
    }
    line("payload", String::new());
    let pretty = serde_json::to_string_pretty(&job.payload).unwrap_or_default();
    for l in pretty.lines() {
        say!("    {l}");
    }
    if let Some(result) = &job.result {
        line("result", String::new());
        let pretty = serde_json::to_string_pretty(result).unwrap_or_default();
        for l in pretty.lines() {
            say!("    {l}");
        }
    }
}

/// `dead show TOPIC ID` as JSON: every death of the id, and the newest in full when the id has no
/// live job (a live job of the same id hides it from the lookup by id).
#[derive(Serialize)]
struct DeadDoc {
    topic: String,
    id: String,
    deaths: Vec<JobSummary>,
    job: Option<JobDetail>,
}

/// `dead show TOPIC ID`.
pub(crate) async fn show_dead(ops: &Ops, out: &Out, topic: &str, id: &str) -> Result<(), Failure> {
    let mut deaths = Vec::new();
    let mut query = JobQuery::new(PageState::Dead).id_prefix(id).limit(MAX_PAGE);
    // Dead letters are searched in id order: a few pages at most reach past this id.
    for _ in 0..16 {
        let page = ops.jobs(topic, &query).await?;
        deaths.extend(page.jobs.into_iter().filter(|j| j.id == id));
        match page.next {
            Some(next) => query = query.cursor(next),
            None => break,
        }
    }
    let job = ops
        .job(topic, id)
        .await?
        .filter(|j| matches!(j.state, JobState::Dead { .. }));
    if deaths.is_empty() && job.is_none() {
        return Err(Failure::NotFound(format!(
            "no dead letter {id:?} in topic {topic:?}; `postpone dead ls {topic}` lists them"
        )));
    }
    if out.json {
        out.json(&DeadDoc {
            topic: topic.to_owned(),
            id: id.to_owned(),
            deaths,
            job,
        });
        return Ok(());
    }
    if let Some(job) = &job {
        print_detail(out, job);
    }
    if deaths.len() > 1 || job.is_none() {
        if job.is_some() {
            say!();
        }
        say!("{} of {id} in topic {topic}:", out.bold("deaths"));
        let mut table = out.table(&[
            "DEATH",
            "DIED",
            "ATTEMPTS",
            "REASON",
            "LAST ERROR",
            "PAYLOAD",
        ]);
        for d in &deaths {
            table.add_row(vec![
                d.death.map(|n| n.to_string()).unwrap_or_default(),
                out.time(d.at),
                d.attempt.to_string(),
                cut(d.reason.as_deref().unwrap_or(""), 40),
                cut(d.last_error.as_deref().unwrap_or(""), 40),
                cut(&d.payload.to_string(), 50),
            ]);
        }
        out.print_table(&table);
    }
    Ok(())
}
