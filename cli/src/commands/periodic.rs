//! `periodic ls [TOPIC]` and `periodic trigger NAME [--topic TOPIC]`: periodic schedules.

use chrono::{DateTime, Utc};
use postpone::ops::Ops;
use postpone::{Missed, Overlap, ScheduleInfo};
use serde::Serialize;

use crate::failure::Failure;
use crate::output::say;
use crate::output::{absolute, Out};

/// A schedule in `periodic ls --json`.
#[derive(Serialize)]
struct ScheduleDoc {
    topic: String,
    #[serde(flatten)]
    schedule: ScheduleInfo,
}

/// `periodic trigger --json`.
#[derive(Serialize)]
struct Triggered<'a> {
    topic: &'a str,
    name: &'a str,
    run_at: DateTime<Utc>,
}

fn missed(m: Option<Missed>) -> String {
    match m {
        Some(Missed::Skip) => "skip".into(),
        Some(Missed::Last) => "last".into(),
        Some(Missed::UpTo(n)) => format!("up to {n}"),
        _ => "?".into(),
    }
}

fn overlap(o: Option<Overlap>) -> &'static str {
    match o {
        Some(Overlap::Allow) => "allow",
        Some(Overlap::Skip) => "skip",
        _ => "?",
    }
}

/// `periodic ls [TOPIC]`: one topic's schedules, or those of every registered topic.
pub(crate) async fn ls(ops: &Ops, out: &Out, topic: Option<&str>) -> Result<(), Failure> {
    let list = match topic {
        Some(t) => ops
            .schedules(t)
            .await?
            .into_iter()
            .map(|s| (t.to_owned(), s))
            .collect(),
        None => ops.all_schedules().await?,
    };
    if out.json {
        #[derive(Serialize)]
        struct Doc {
            schedules: Vec<ScheduleDoc>,
        }
        let schedules = list
            .into_iter()
            .map(|(topic, schedule)| ScheduleDoc { topic, schedule })
            .collect();
        out.json(&Doc { schedules });
        return Ok(());
    }
    if list.is_empty() {
        say!("no periodic schedules: a worker stores the schedules it declares when it starts");
        return Ok(());
    }
    let mut table = out.table(&[
        "TOPIC", "NAME", "SCHEDULE", "ZONE", "NEXT", "LAST", "MISSED", "OVERLAP", "RUN NOW",
    ]);
    for (topic, s) in &list {
        table.add_row(vec![
            topic.clone(),
            s.name.clone(),
            s.expression.clone(),
            s.zone.clone().unwrap_or_else(|| "-".into()),
            out.time(s.next),
            s.last.map_or_else(|| "-".into(), |t| out.time(t)),
            missed(s.missed),
            overlap(s.overlap).into(),
            s.triggered.map_or_else(|| "-".into(), |t| out.time(t)),
        ]);
    }
    out.print_table(&table);
    Ok(())
}

/// `periodic trigger NAME [--topic TOPIC]`: runs a schedule now. Without `--topic`, the one topic
/// that has a schedule of that name.
pub(crate) async fn trigger(
    ops: &Ops,
    out: &Out,
    name: &str,
    topic: Option<&str>,
) -> Result<(), Failure> {
    let topic = match topic {
        Some(t) => t.to_owned(),
        None => {
            let topics: Vec<String> = ops
                .all_schedules()
                .await?
                .into_iter()
                .filter(|(_, s)| s.name == name)
                .map(|(t, _)| t)
                .collect();
            match &topics[..] {
                [] => {
                    return Err(Failure::NotFound(format!(
                        "no periodic schedule named {name:?} (`postpone periodic ls` lists them)"
                    )))
                }
                [one] => one.clone(),
                many => {
                    return Err(Failure::Usage(format!(
                        "topics {} each have a schedule named {name:?}: pass --topic",
                        many.join(", ")
                    )))
                }
            }
        }
    };
    let Some(run_at) = ops.trigger_schedule(&topic, name).await? else {
        return Err(Failure::NotFound(format!(
            "topic {topic} has no periodic schedule named {name:?}"
        )));
    };
    if out.json {
        out.json(&Triggered {
            topic: &topic,
            name,
            run_at,
        });
    } else {
        say!(
            "periodic schedule {name} of topic {topic} runs now ({}): a worker running it enqueues the job",
            absolute(run_at)
        );
    }
    Ok(())
}
