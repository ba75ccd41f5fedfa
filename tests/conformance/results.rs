//! Results, waiting, progress and kept finished jobs, through the client and a worker: a handler's
//! typed result reaches its waiters and the job's lookup, a waiter returns as soon as the job ends
//! (or finds the job that ended before it looked), progress reaches waiters and operators, and the
//! retention keeps finished jobs by count and age.

use std::time::Duration;

use postpone::{Job, JobContext, JobError, JobOutcome, JobState, Worker};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::keyed::async_channel_like::Gate;
use super::*;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Pdf {
    pub url: String,
    pub pages: u32,
}

/// A job with a typed result, kept for an hour (at most 3).
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "invoices.render", output = Pdf, keep = "1h", keep_last = 3, retry = ["0", "0"])]
pub(crate) struct Render {
    pub invoice: u64,
    /// `fail`: fails for good; `slow`: reports progress, then waits at the gate; `huge`: returns a
    /// result over the limit.
    pub how: String,
}

/// A job without a result, and nothing kept.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "emails.send")]
pub(crate) struct Email {
    pub to: String,
}

/// Kept for one second.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "short.kept", keep = "1s")]
pub(crate) struct Brief {
    pub n: u64,
}

fn render(invoice: u64, how: &str) -> Render {
    Render {
        invoice,
        how: how.into(),
    }
}

/// A worker for Render (slow ones wait at `gate`), Email and Brief.
fn renderer(b: &Backend, gate: Gate) -> Running {
    let handler = move |job: Render, ctx: JobContext| {
        let gate = gate.clone();
        async move {
            match job.how.as_str() {
                "fail" => return Err(JobError::fail("the template is broken")),
                "slow" => {
                    ctx.progress(40.0, "page 2 of 5");
                    gate.wait().await;
                }
                "huge" => {
                    let url = "x".repeat(postpone::MAX_RESULT);
                    return Ok(Pdf { url, pages: 1 });
                }
                _ => {}
            }
            Ok(Pdf {
                url: format!("https://files.example/{}.pdf", job.invoice),
                pages: 5,
            })
        }
    };
    spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .handle(|_: Email, _| async { Ok(()) })
            .handle(|_: Brief, _| async { Ok(()) })
            .concurrency(16)
            .build()
            .unwrap(),
    )
}

async fn enqueue(b: &Backend, job: Render, id: &str) {
    b.client.enqueue(job).id(id).await.unwrap();
}

pub(crate) async fn result_typed_round_trip_reaches_the_waiter_and_the_lookup(b: Backend) {
    let running = renderer(&b, Gate::closed());
    enqueue(&b, render(7, "fast"), "invoice:7").await;
    let outcome = b
        .client
        .wait::<Render>("invoice:7", PATIENCE)
        .await
        .unwrap();
    let want = Pdf {
        url: "https://files.example/7.pdf".into(),
        pages: 5,
    };
    assert_eq!(outcome, JobOutcome::Succeeded(want.clone()));
    // Kept: the lookup says it succeeded, with the result as JSON; and a wait after the end finds it.
    let info = b
        .client
        .topic::<Render>()
        .job("invoice:7")
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(info.state, JobState::Succeeded { .. }), "{info:?}");
    let kept: Pdf = serde_json::from_str(info.result.as_deref().unwrap()).unwrap();
    assert_eq!(kept, want);
    let again = b
        .client
        .wait::<Render>("invoice:7", Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(again, JobOutcome::Succeeded(want));
    running.stop().await;
}

pub(crate) async fn wait_returns_as_soon_as_the_job_ends_and_pending_on_timeout(b: Backend) {
    let gate = Gate::closed();
    let running = renderer(&b, gate.clone());
    enqueue(&b, render(8, "slow"), "invoice:8").await;
    // Not finished within 200 ms: pending, with the progress it reported.
    let mut waiter = b.client.waiter::<Render>("invoice:8").unwrap();
    let progress = waiter
        .next_progress(Instant::now() + PATIENCE)
        .await
        .unwrap()
        .expect("the handler's progress");
    assert_eq!(
        (progress.value, progress.message.as_str()),
        (40.0, "page 2 of 5")
    );
    let pending = b
        .client
        .wait::<Render>("invoice:8", Duration::from_millis(200))
        .await
        .unwrap();
    match pending {
        JobOutcome::Pending { progress: Some(p) } => assert_eq!(p.value, 40.0),
        other => panic!("{other:?}"),
    }
    // Many waiters on the running job: each returns once it ends, soon after the gate opens.
    let waits: Vec<_> = (0..20)
        .map(|_| {
            let client = b.client.clone();
            tokio::spawn(async move { client.wait::<Render>("invoice:8", PATIENCE * 2).await })
        })
        .collect();
    // Operators see the progress too, while it runs.
    let info = b
        .client
        .topic::<Render>()
        .job("invoice:8")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.progress.map(|p| p.value), Some(40.0));
    // Whether a waiter registered before the end (then it is told) or after (then it finds the kept
    // job), it gets the result.
    let opened = Instant::now();
    gate.open();
    for w in waits {
        let outcome = w.await.unwrap().unwrap();
        assert!(
            matches!(outcome, JobOutcome::Succeeded(Pdf { pages: 5, .. })),
            "{outcome:?}"
        );
    }
    assert!(opened.elapsed() < PATIENCE, "the waiters returned late");
    let outcome = waiter.outcome(PATIENCE).await.unwrap();
    assert!(outcome.is_final(), "{outcome:?}");
    running.stop().await;
}

pub(crate) async fn wait_reports_death_cancellation_and_unknown_jobs(b: Backend) {
    let running = renderer(&b, Gate::closed());
    enqueue(&b, render(9, "fail"), "invoice:9").await;
    let dead = b
        .client
        .wait::<Render>("invoice:9", PATIENCE)
        .await
        .unwrap();
    assert_eq!(
        dead,
        JobOutcome::Dead {
            reason: "failed: the template is broken".into()
        }
    );
    // A scheduled job cancelled while a caller waits.
    b.client
        .enqueue(render(10, "fast"))
        .id("invoice:10")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    let mut waiter = b.client.waiter::<Render>("invoice:10").unwrap();
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(
        waiter.next_progress(soon).await.unwrap(),
        None,
        "registered, nothing yet"
    );
    b.client.cancel::<Render>("invoice:10").await.unwrap();
    assert_eq!(
        waiter.outcome(PATIENCE).await.unwrap(),
        JobOutcome::Cancelled
    );
    // Nothing of that id, and a job that succeeded but whose type keeps nothing: unknown.
    let none = b
        .client
        .wait::<Render>("invoice:none", Duration::from_millis(50))
        .await;
    assert_eq!(none.unwrap(), JobOutcome::Unknown);
    // A job whose type keeps nothing: a waiter registered before it ends is told.
    let in_an_hour = Duration::from_secs(3600);
    let email = Email {
        to: "a@example.com".into(),
    };
    b.client
        .enqueue(email)
        .id("mail:1")
        .after(in_an_hour)
        .await
        .unwrap();
    let mut waiter = b.client.waiter::<Email>("mail:1").unwrap();
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(waiter.next_progress(soon).await.unwrap(), None);
    b.client
        .topic::<Email>()
        .reschedule("mail:1", postpone::When::Now)
        .await
        .unwrap();
    assert_eq!(
        waiter.outcome(PATIENCE).await.unwrap(),
        JobOutcome::Succeeded(())
    );
    // Its end is told to lookups while its waiters' time lasts.
    let after = b.client.wait::<Email>("mail:1", Duration::ZERO).await;
    assert_eq!(after.unwrap(), JobOutcome::Succeeded(()));
    // One nobody waited for is not kept: unknown once it ran.
    let email = Email {
        to: "b@example.com".into(),
    };
    b.client.enqueue(email).id("mail:2").await.unwrap();
    eventually("mail:2 to run", || async {
        let c = b.client.topic::<Email>().counts().await.unwrap();
        (c.processed == 2).then_some(())
    })
    .await;
    let gone = b.client.wait::<Email>("mail:2", Duration::ZERO).await;
    assert_eq!(
        gone.unwrap(),
        JobOutcome::Unknown,
        "an email job is not kept"
    );
    assert!(b.client.waiter::<Email>("bad\nid").is_err());
    running.stop().await;
}

pub(crate) async fn retention_keeps_the_newest_by_count_and_trims_by_age(b: Backend) {
    let running = renderer(&b, Gate::closed());
    for n in 0..5 {
        let id = format!("invoice:{n}");
        enqueue(&b, render(n, "fast"), &id).await;
        // One at a time, so that their order of finishing is their order here.
        let outcome = b.client.wait::<Render>(&id, PATIENCE).await.unwrap();
        assert!(outcome.is_final());
    }
    let topic = b.client.topic::<Render>();
    for n in 0..5 {
        let found = topic.job(&format!("invoice:{n}")).await.unwrap();
        assert_eq!(found.is_some(), n >= 2, "invoice:{n} (keep_last = 3)");
    }
    // Kept for a second: gone after it, whether or not another job finishes (the worker trims).
    b.client
        .enqueue(Brief { n: 1 })
        .id("brief:1")
        .await
        .unwrap();
    b.client.wait::<Brief>("brief:1", PATIENCE).await.unwrap();
    let kept = b.client.topic::<Brief>().job("brief:1").await.unwrap();
    assert!(matches!(
        kept.map(|j| j.state),
        Some(JobState::Succeeded { .. })
    ));
    let t0 = Instant::now();
    eventually("the kept job to age out", || async {
        let found = b.client.topic::<Brief>().job("brief:1").await.unwrap();
        found.is_none().then_some(())
    })
    .await;
    assert!(
        t0.elapsed() >= Duration::from_millis(500),
        "trimmed before its age"
    );
    running.stop().await;
}

pub(crate) async fn result_over_the_limit_is_dead_lettered_with_the_reason(b: Backend) {
    let running = renderer(&b, Gate::closed());
    enqueue(&b, render(11, "huge"), "invoice:11").await;
    let outcome = b
        .client
        .wait::<Render>("invoice:11", PATIENCE)
        .await
        .unwrap();
    let JobOutcome::Dead { reason } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(
        reason.starts_with("failed: the handler's result is 524"),
        "{reason}"
    );
    assert!(
        reason.contains("more than the 524288 a result may have"),
        "{reason}"
    );
    running.stop().await;
}

pub(crate) async fn wait_registered_by_and_wait_hears_a_job_that_ends_at_once(b: Backend) {
    let running = renderer(&b, Gate::closed());
    // Email keeps nothing: only a wait registered before the job exists can hear it.
    for n in 0..20 {
        let email = Email {
            to: format!("{n}@example.com"),
        };
        let (job, outcome) = b.client.enqueue(email).and_wait(PATIENCE).await.unwrap();
        assert_eq!(outcome, JobOutcome::Succeeded(()), "job {}", job.id);
    }
    let (job, outcome) = b
        .client
        .enqueue(render(12, "fast"))
        .id("invoice:12")
        .and_wait(PATIENCE)
        .await
        .unwrap();
    assert_eq!(job.id, "invoice:12");
    assert!(matches!(
        outcome,
        JobOutcome::Succeeded(Pdf { pages: 5, .. })
    ));
    running.stop().await;
}

/// Kept (at most 100, for an hour), with a result.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "results.listed", output = u64, keep = "1h", keep_last = 100)]
pub(crate) struct Listed {
    pub n: u64,
}

/// Every kept job of `results.listed`, page by page (`limit` a page): (finished at ms, id, how it
/// ended, result); `between` runs after each page.
async fn done_pages(
    b: &Backend,
    query: postpone::ops::JobQuery,
    mut between: impl AsyncFnMut(),
) -> Vec<(
    i64,
    String,
    postpone::ops::Finished,
    Option<serde_json::Value>,
)> {
    let ops = b.client.ops();
    let mut q = query;
    let mut seen = Vec::new();
    for _ in 0..1000 {
        let page = ops.jobs("results.listed", &q).await.unwrap();
        for j in page.jobs {
            assert_eq!(j.state, postpone::ops::PageState::Done);
            let finished = j.finished.expect("a done entry says how it ended");
            seen.push((j.at.timestamp_millis(), j.id, finished, j.result));
        }
        between().await;
        match page.next {
            // Through text, as the command line and the dashboard hand it back.
            Some(c) => q = q.cursor(c.to_string().parse().unwrap()),
            None => return seen,
        }
    }
    panic!("the listing never ended");
}

/// Returns once the store's clock has moved past the ms it showed at the call (so that what happens
/// next is in a later ms than what happened before).
async fn next_ms(client: &postpone::Client) {
    let now = store_now(client).await;
    eventually("the store's clock to tick", || async {
        (store_now(client).await > now).then_some(())
    })
    .await;
}

pub(crate) async fn done_jobs_are_listed_newest_first_by_cursor_and_say_how_they_ended(b: Backend) {
    use postpone::ops::{Finished, JobQuery, PageState};

    let running = spawn(
        Worker::builder(&b.client)
            .handle(|job: Listed, _| async move { Ok(job.n * 10) })
            .build()
            .unwrap(),
    );
    // The worker records the retention before it claims: its first job is kept.
    let topic = b.client.topic::<Listed>();
    let warm = "warm:0".to_owned();
    b.client.enqueue(Listed { n: 0 }).id(&warm).await.unwrap();
    b.client.wait::<Listed>(&warm, PATIENCE).await.unwrap();
    assert!(
        topic.job(&warm).await.unwrap().is_some(),
        "the first job is kept"
    );
    next_ms(&b.client).await;
    // One at a time, each in a later ms than the one before: their finishing order is n's.
    for n in 0..20u64 {
        let id = format!("listed:{n:02}");
        b.client.enqueue(Listed { n }).id(&id).await.unwrap();
        let outcome = b.client.wait::<Listed>(&id, PATIENCE).await.unwrap();
        assert_eq!(outcome, JobOutcome::Succeeded(n * 10));
        next_ms(&b.client).await;
    }
    // Three cancelled before they ran: kept too, after the others.
    for n in 20..23u64 {
        let id = format!("listed:{n:02}");
        let later = b.client.enqueue(Listed { n }).id(&id);
        later.after(Duration::from_secs(3600)).await.unwrap();
        b.client.cancel::<Listed>(&id).await.unwrap();
        next_ms(&b.client).await;
    }
    assert_eq!(topic.counts().await.unwrap().done, 24);

    // Newest first, 7 a page; between pages another job finishes (it is newer than every page to
    // come, so no page repeats or skips one).
    let mut extra = 0u64;
    let newest = done_pages(
        &b,
        JobQuery::new(PageState::Done).newest_first().limit(7),
        async || {
            let id = format!("later:{extra}");
            b.client
                .enqueue(Listed { n: 100 + extra })
                .id(&id)
                .await
                .unwrap();
            b.client.wait::<Listed>(&id, PATIENCE).await.unwrap();
            extra += 1;
        },
    )
    .await;
    let ids: Vec<&str> = newest.iter().map(|(_, id, ..)| id.as_str()).collect();
    let mut want: Vec<String> = (0..23).rev().map(|n| format!("listed:{n:02}")).collect();
    want.push(warm);
    assert_eq!(ids, want, "newest first, each once, none of the later ones");
    for (at, id, finished, result) in &newest[..23] {
        let n: u64 = id["listed:".len()..].parse().unwrap();
        if n >= 20 {
            assert_eq!((*finished, result), (Finished::Cancelled, &None), "{id}");
        } else {
            let want = serde_json::json!(n * 10);
            assert_eq!(
                (*finished, result),
                (Finished::Succeeded, &Some(want)),
                "{id}"
            );
        }
        assert!(*at > 0);
    }
    let mut by_time = newest.clone();
    by_time.sort_by(|a, b| (b.0, &b.1).cmp(&(a.0, &a.1)));
    assert_eq!(by_time, newest, "by (finished at, id), newest first");

    // Oldest first: every kept job, the same order reversed (with the later ones).
    let oldest = done_pages(&b, JobQuery::new(PageState::Done).limit(5), async || {}).await;
    assert_eq!(oldest.len() as u64, 24 + extra);
    let mut reversed: Vec<_> = oldest
        .into_iter()
        .filter(|(_, id, ..)| !id.starts_with("later:"))
        .collect();
    reversed.reverse();
    assert_eq!(reversed, newest);

    // One kept job in full: its result; and a search by prefix is refused, saying what to do.
    let ops = b.client.ops();
    let job = ops
        .job("results.listed", "listed:03")
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(job.state, JobState::Succeeded { .. }), "{job:?}");
    assert_eq!(job.result, Some(serde_json::json!(30)));
    let job = ops
        .job("results.listed", "listed:21")
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(job.state, JobState::Cancelled { .. }), "{job:?}");
    assert_eq!(job.result, None);
    let search = JobQuery::new(PageState::Done).id_prefix("listed:1");
    let err = ops.jobs("results.listed", &search).await.unwrap_err();
    assert!(err.to_string().contains("Ops::job"), "{err}");
    running.stop().await;
}
