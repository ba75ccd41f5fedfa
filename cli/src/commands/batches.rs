//! `batches` and `batch ID`: the namespace's batches newest first, and one batch with its members.

use postpone::ops::{member_state_name, BatchMember, BatchStatus, Ops};
use postpone::store::workflow::BATCH_KEEP_MS;
use serde::Serialize;

use crate::args::OffsetArgs;
use crate::failure::Failure;
use crate::output::say;
use crate::output::{absolute, cut, relative, Out};

/// Where a batch is: `open`, `closed` (its members still running) or `completed`.
fn state(out: &Out, b: &BatchStatus) -> String {
    match (b.completed_at, b.closed) {
        (Some(at), _) => format!("{} {}", out.good("completed"), out.time(at)),
        (None, true) => "closed".to_owned(),
        (None, false) => out.warn("open"),
    }
}

/// The callbacks that fired, by name, or `-`.
fn fired(b: &BatchStatus) -> String {
    let names: Vec<&str> = b
        .callbacks
        .iter()
        .filter(|(_, fired)| *fired)
        .map(|(kind, _)| kind.as_str())
        .collect();
    match names.is_empty() {
        true => "-".to_owned(),
        false => names.join(","),
    }
}

/// The hint printed under a page that has a next one.
fn more(out: &Out, next: Option<usize>) {
    if let Some(next) = next {
        say!(
            "{} --offset {next}",
            out.dim("more: run the same command with")
        );
    }
}

/// `batches`.
pub(crate) async fn list(ops: &Ops, out: &Out, page: &OffsetArgs) -> Result<(), Failure> {
    let result = ops.batches(page.offset, usize::from(page.limit)).await?;
    if out.json {
        out.json(&result);
        return Ok(());
    }
    if result.batches.is_empty() {
        match page.offset {
            0 => say!(
                "no batches in this namespace (a completed batch is kept {} days)",
                BATCH_KEEP_MS / 86_400_000
            ),
            _ => say!("no more batches"),
        }
        return Ok(());
    }
    let mut table = out.table(&[
        "ID",
        "DESCRIPTION",
        "CREATED",
        "TOTAL",
        "SUCCEEDED",
        "DEAD",
        "CANCELLED",
        "PENDING",
        "STATE",
        "FIRED",
    ]);
    for b in &result.batches {
        table.add_row(vec![
            b.id.clone(),
            cut(&b.description, 40),
            out.time(b.created_at),
            b.total.to_string(),
            b.succeeded.to_string(),
            b.dead.to_string(),
            b.cancelled.to_string(),
            b.pending().to_string(),
            state(out, b),
            fired(b),
        ]);
    }
    Out::numeric(&mut table, &[3, 4, 5, 6, 7]);
    out.print_table(&table);
    more(out, result.next);
    Ok(())
}

/// `batch ID --json`.
#[derive(Serialize)]
struct BatchDoc {
    batch: BatchStatus,
    members: Vec<BatchMember>,
    next: Option<usize>,
}

/// `batch ID`: its status, then a page of its members.
pub(crate) async fn show(ops: &Ops, out: &Out, id: &str, page: &OffsetArgs) -> Result<(), Failure> {
    let Some(batch) = ops.batch(id).await? else {
        return Err(Failure::NotFound(format!(
            "no batch {id:?} (a completed batch is kept {} days); `postpone batches` lists them",
            BATCH_KEEP_MS / 86_400_000
        )));
    };
    let members = ops
        .batch_members(id, page.offset, usize::from(page.limit))
        .await?;
    if out.json {
        out.json(&BatchDoc {
            batch,
            members: members.members,
            next: members.next,
        });
        return Ok(());
    }
    let line = |label: &str, value: String| {
        let text = format!("  {:<11}{value}", out.bold(label));
        say!("{}", text.trim_end());
    };
    say!("{} {}", out.bold("batch"), batch.id);
    if !batch.description.is_empty() {
        line("about", cut(&batch.description, 200));
    }
    line("state", state(out, &batch));
    line(
        "created",
        format!(
            "{} ({})",
            relative(batch.created_at.timestamp_millis(), out.now_ms),
            absolute(batch.created_at)
        ),
    );
    line(
        "members",
        format!(
            "{} total: {} succeeded, {} dead, {} cancelled, {} pending",
            batch.total,
            batch.succeeded,
            batch.dead,
            batch.cancelled,
            batch.pending()
        ),
    );
    let callbacks: Vec<String> = batch
        .callbacks
        .iter()
        .map(|&(kind, fired)| {
            let done = if fired { "fired" } else { "not fired" };
            format!("{} ({done})", kind.as_str())
        })
        .collect();
    line(
        "callbacks",
        match callbacks.is_empty() {
            true => out.dim("none"),
            false => callbacks.join(", "),
        },
    );
    say!();
    if members.members.is_empty() {
        match page.offset {
            0 => say!("no members"),
            _ => say!("no more members"),
        }
        return Ok(());
    }
    let partitioned = members.members.iter().any(|m| m.partition > 0);
    let mut headers = vec!["TOPIC"];
    if partitioned {
        headers.push("PART");
    }
    headers.extend(["ID", "STATE"]);
    let mut table = out.table(&headers);
    for m in &members.members {
        let mut cells = vec![m.topic.clone()];
        if partitioned {
            cells.push(m.partition.to_string());
        }
        cells.extend([cut(&m.id, 80), out.state(member_state_name(m.state))]);
        table.add_row(cells);
    }
    out.print_table(&table);
    more(out, members.next);
    Ok(())
}
