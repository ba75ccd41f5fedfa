//! `dead requeue` and `dead purge`: one dead letter by id, or all of a topic's (optionally those whose
//! reason contains a text) after a confirmation, with a progress bar.

use std::io::{BufRead, IsTerminal, Write};

use indicatif::{ProgressBar, ProgressStyle};
use postpone::ops::{BulkOutcome, DeadFilter, Ops};
use serde::Serialize;

use crate::args::BulkArgs;
use crate::failure::Failure;
use crate::output::say;
use crate::output::Out;

/// Which bulk action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Requeue,
    Purge,
}

impl Action {
    fn verb(self) -> &'static str {
        match self {
            Action::Requeue => "requeue",
            Action::Purge => "purge",
        }
    }

    fn done(self) -> &'static str {
        match self {
            Action::Requeue => "requeued",
            Action::Purge => "purged",
        }
    }
}

/// `dead requeue --json` and `dead purge --json`.
#[derive(Serialize)]
struct Done<'a> {
    topic: &'a str,
    /// `"requeue"` or `"purge"`.
    action: &'static str,
    /// The id, when one was named.
    id: Option<&'a str>,
    /// The reason filter of `--all --reason`.
    reason: Option<&'a str>,
    /// Dead letters selected, done, and skipped (a live job has the id, or it went meanwhile).
    matched: u64,
    done: u64,
    skipped: u64,
}

/// Asks whether to `what` ("requeue all 3 dead letters of ..."); refuses (exit 2) when stdin is not
/// a terminal to ask on.
fn confirm(what: &str) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        return Err(Failure::Usage(format!(
            "this would {what}, which is asked first, but stdin is not a terminal: pass --yes to go \
             ahead"
        )));
    }
    let mut question = what.to_owned();
    if let Some(first) = question.get(..1) {
        question.replace_range(..1, &first.to_uppercase());
    }
    eprint!("{question}? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::Other(format!("reading the answer: {e}")))?;
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Ok(()),
        _ => Err(Failure::Other("nothing done: not confirmed".into())),
    }
}

fn progress_bar(out: &Out, total: u64, filtered: bool) -> ProgressBar {
    if out.json || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    if filtered {
        // How many the filter selects is known only at the end.
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {pos} dead letters selected so far  {elapsed}")
                .expect("a valid template"),
        );
        bar
    } else {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len}  {elapsed}, {eta} left")
                .expect("a valid template"),
        );
        bar
    }
}

/// `dead requeue TOPIC (ID | --all [--reason TEXT]) [--yes]` and `dead purge ...`.
pub(crate) async fn bulk(ops: &Ops, out: &Out, action: Action, a: BulkArgs) -> Result<(), Failure> {
    let topic = a.topic.as_str();
    let filter = match &a.reason {
        Some(r) => DeadFilter::reason_contains(r.clone()),
        None => DeadFilter::all(),
    };
    let id = if a.all { None } else { a.id.as_deref() };
    let mut bar = ProgressBar::hidden();
    if id.is_none() {
        // Fails with "topic not found" (exit 3) before asking anything.
        ops.topic(topic).await?;
        let dead = ops
            .topics()
            .await?
            .into_iter()
            .find(|t| t.name == topic)
            .map_or(0, |t| t.counts.dead);
        // Without --yes a script is refused even when there is nothing to do, so that it fails the
        // first time it runs rather than the first time there are dead letters.
        if !a.yes && (dead > 0 || !std::io::stdin().is_terminal()) {
            let which = match &a.reason {
                Some(r) => format!(
                    "the dead letters of topic {topic} whose reason contains {r:?} (of {dead})"
                ),
                None => format!("all {dead} dead letters of topic {topic}"),
            };
            let what = match action {
                Action::Requeue => format!("requeue {which}: they run again now, attempts reset"),
                Action::Purge => format!("purge {which} for good"),
            };
            confirm(&what)?;
        }
        bar = progress_bar(out, dead, a.reason.is_some());
    }
    let on_progress = {
        let bar = bar.clone();
        move |o: BulkOutcome| bar.set_position(o.matched)
    };
    let outcome = match action {
        Action::Requeue => ops.requeue_dead(topic, id, &filter, on_progress).await,
        Action::Purge => ops.purge_dead(topic, id, &filter, on_progress).await,
    };
    bar.finish_and_clear();
    let outcome = outcome?;
    if out.json {
        out.json(&Done {
            topic,
            action: action.verb(),
            id,
            reason: a.reason.as_deref(),
            matched: outcome.matched,
            done: outcome.done,
            skipped: outcome.skipped,
        });
        return Ok(());
    }
    match id {
        Some(id) => say!("{} dead letter {id} of topic {topic}", action.done()),
        None => {
            let skipped = match (outcome.skipped, action) {
                (0, _) => String::new(),
                (n, Action::Requeue) => {
                    format!(" ({n} skipped: a live job has the id, or it went meanwhile)")
                }
                (n, Action::Purge) => format!(" ({n} skipped: gone meanwhile)"),
            };
            let noun = if outcome.done == 1 {
                "dead letter"
            } else {
                "dead letters"
            };
            say!(
                "{} {} {noun} of topic {topic}{skipped}",
                action.done(),
                outcome.done
            );
        }
    }
    Ok(())
}
