//! `page`: how long a page of the operations API's listing takes on a topic of `--jobs` scheduled jobs
//! (default 1,000,000) against one of 10: the first page, a page from the middle (by cursor), the last
//! page (newest first), 10 jobs each (a full page of the small topic). A listing is O(log n + page):
//! the big topic's pages should take about as long as the small one's.

use std::time::{Duration, Instant};

use postpone::ops::{Cursor, JobQuery, PageState};

use super::{client, enqueue_bulk, warm_up};
use crate::args::Args;
use crate::jobs::{Idle0, Order};
use crate::probe::Probe;
use crate::report::{round, Report};
use crate::BoxResult;

/// Calls timed per kind of page.
const SAMPLES: usize = 200;
const PAGE: usize = 10;

/// Median and 99th percentile of `SAMPLES` calls of `query` on `topic`, in ms.
async fn time_pages(
    client: &postpone::Client,
    topic: &str,
    query: &JobQuery,
) -> BoxResult<(f64, f64)> {
    let ops = client.ops();
    let mut took: Vec<Duration> = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let page = ops.jobs(topic, query).await?;
        took.push(start.elapsed());
        if page.jobs.is_empty() {
            return Err(format!("{topic}: an empty page").into());
        }
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok((ms(took[SAMPLES / 2]), ms(took[SAMPLES * 99 / 100])))
}

pub(super) async fn run(args: &Args, _probe: &mut Probe) -> BoxResult<Report> {
    let client = client(args).await?;
    warm_up(&client).await?;
    let jobs = args.jobs;
    let items =
        (0..10).map(|_| postpone::EnqueueItem::new(Idle0 {}).after(Duration::from_secs(3600)));
    client.enqueue_many(items).await?;
    let started = Instant::now();
    let ok = enqueue_bulk(&client, 0, jobs, |k| 3_600_000 + k).await?;
    outln!(
        "  {jobs} jobs enqueued in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let first = JobQuery::new(PageState::Scheduled).limit(PAGE);
    let newest = JobQuery::new(PageState::Scheduled)
        .newest_first()
        .limit(PAGE);
    let head = client.ops().jobs("bench", &first).await?;
    let start_ms = head.jobs[0].at.timestamp_millis();
    let middle: Cursor = format!("a.{}.", start_ms + jobs as i64 / 2).parse()?;
    let middle = first.clone().cursor(middle);

    let small = time_pages(
        &client,
        "bench.idle.0",
        &JobQuery::new(PageState::Scheduled).limit(PAGE),
    )
    .await?;
    let big_first = time_pages(&client, "bench", &first).await?;
    let big_middle = time_pages(&client, "bench", &middle).await?;
    let big_last = time_pages(&client, "bench", &newest).await?;
    for (what, (p50, p99)) in [
        ("10 jobs, first page", small),
        ("big, first page", big_first),
        ("big, page from the middle", big_middle),
        ("big, last page (newest first)", big_last),
    ] {
        outln!(
            "  {what:32} p50 {p50:.3} ms  p99 {p99:.3} ms ({:.2}x the small topic's p50)",
            p50 / small.0
        );
    }
    let counts = client.topic::<Order>().counts().await?;
    let ok = ok && counts.scheduled == jobs;
    Ok(Report {
        jobs,
        p50_ms: Some(round(big_middle.0, 3)),
        p99_ms: Some(round(big_middle.1, 3)),
        ok,
        ..Report::default()
    })
}
