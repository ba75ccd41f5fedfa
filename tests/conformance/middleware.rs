//! Middleware around handlers: its order, short circuits, changed outcomes, per-type layers, the
//! context it sees, and what a handler's panic or timeout looks like to it.

use std::time::Duration;

use postpone::middleware::{Middleware, Next, TraceTiming};
use postpone::{middleware_fn, Error, Job, JobContext, JobError, Worker};
use serde::{Deserialize, Serialize};

use super::*;

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "mw.billing", retry = ["0", "0", "10ms", "20ms", "30ms"])]
pub(crate) struct Bill {
    pub n: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "mw.mail", retry = ["0", "0", "10ms"])]
pub(crate) struct Mail {
    pub n: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "mw.slow", retry = ["0", "0", "10ms"], timeout = "50ms")]
pub(crate) struct Slow;

/// Notes "<name> before" and "<name> after" around the rest of the chain: a trait impl.
struct Note {
    name: &'static str,
    tx: mpsc::UnboundedSender<String>,
}

#[postpone::async_trait]
impl Middleware for Note {
    async fn call(&self, _job: &JobContext, next: Next) -> Result<(), JobError> {
        let _ = self.tx.send(format!("{} before", self.name));
        let result = next.run().await;
        let _ = self.tx.send(format!("{} after", self.name));
        result
    }
}

fn note(name: &'static str, tx: &mpsc::UnboundedSender<String>) -> Note {
    Note {
        name,
        tx: tx.clone(),
    }
}

/// A `Bill` handler that reports each run's id and attempt, then returns what `outcome` says.
fn bill_handler<F>(
    tx: mpsc::UnboundedSender<(String, u32)>,
    outcome: F,
) -> impl postpone::Handler<postpone::__private::WithoutState<Bill>, ()>
where
    F: Fn(&JobContext) -> Result<(), JobError> + Clone + Send + Sync + 'static,
{
    move |_: Bill, ctx: JobContext| {
        let tx = tx.clone();
        let outcome = outcome.clone();
        async move {
            let _ = tx.send((ctx.id().to_owned(), ctx.attempt()));
            outcome(&ctx)
        }
    }
}

pub(crate) async fn middleware_runs_worker_wide_layers_outside_per_type_ones(b: Backend) {
    let (tx, mut rx) = events();
    let in_handler = tx.clone();
    let handler = move |_: Bill, _: JobContext| {
        let tx = in_handler.clone();
        async move {
            let _ = tx.send("handler".to_owned());
            Ok(())
        }
    };
    // Registered interleaved: a job type's own layers still run inside every worker-wide one.
    let worker = spawn(
        Worker::builder(&b.client)
            .middleware(TraceTiming::new())
            .middleware(note("worker 1", &tx))
            .handle(handler)
            .middleware_for::<Bill>(note("type 1", &tx))
            .middleware(note("worker 2", &tx))
            .middleware_for::<Bill>(note("type 2", &tx))
            .build()
            .unwrap(),
    );
    b.client.enqueue(Bill { n: 1 }).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..9 {
        seen.push(next(&mut rx).await);
    }
    assert_eq!(
        seen,
        [
            "worker 1 before",
            "worker 2 before",
            "type 1 before",
            "type 2 before",
            "handler",
            "type 2 after",
            "type 1 after",
            "worker 2 after",
            "worker 1 after",
        ]
    );
    let topic = b.client.topic::<Bill>();
    eventually("processed", || async {
        (topic.counts().await.unwrap().processed == 1).then_some(())
    })
    .await;
    worker.stop().await;
}

pub(crate) async fn middleware_that_fails_fast_skips_the_handler(b: Backend) {
    let (tx, mut rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let skip_deleted = middleware_fn(|job, next| async move {
        if job.meta("tenant") == Some("deleted-co") {
            return Err(JobError::fail("tenant deleted"));
        }
        next.run().await
    });
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(bill_handler(tx, |_| Ok(())))
            .middleware(skip_deleted)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    b.client
        .enqueue(Bill { n: 1 })
        .id("of-deleted")
        .meta("tenant", "deleted-co")
        .await
        .unwrap();
    b.client
        .enqueue(Bill { n: 2 })
        .id("of-live")
        .meta("tenant", "live-co")
        .await
        .unwrap();
    let dead = next(&mut dead_rx).await;
    assert_eq!((dead.id.as_str(), dead.attempts), ("of-deleted", 1));
    assert_eq!(dead.reason, "failed: tenant deleted");
    assert_eq!(next(&mut rx).await, ("of-live".to_owned(), 1));
    none_within(&mut rx, Duration::from_millis(200)).await;
    let c = b.client.topic::<Bill>().counts().await.unwrap();
    assert_eq!((c.processed, c.failed, c.retried), (1, 1, 0));
    worker.stop().await;
}

pub(crate) async fn middleware_error_retries_by_schedule_without_the_handler(b: Backend) {
    let (tx, mut rx) = events();
    let (seen_tx, mut seen_rx) = events();
    let (dead_tx, mut dead_rx) = events();
    let tenant_db_down = middleware_fn(move |job, _next| {
        let seen = seen_tx.clone();
        async move {
            let _ = seen.send(job.attempt());
            Err(JobError::msg(format!("tenant db down ({})", job.attempt())))
        }
    });
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(bill_handler(tx, |_| Ok(())))
            .middleware_for::<Bill>(tenant_db_down)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    b.client.enqueue(Bill { n: 1 }).id("b").await.unwrap();
    for attempt in 1..=4 {
        assert_eq!(next(&mut seen_rx).await, attempt);
    }
    let dead = next(&mut dead_rx).await;
    assert_eq!(dead.attempts, 4);
    assert!(
        dead.reason.contains("exhausted 4 attempts"),
        "{}",
        dead.reason
    );
    let messages: Vec<_> = dead.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "tenant db down (1)",
            "tenant db down (2)",
            "tenant db down (3)",
            "tenant db down (4)"
        ]
    );
    none_within(&mut rx, Duration::from_millis(100)).await;
    let c = b.client.topic::<Bill>().counts().await.unwrap();
    assert_eq!((c.processed, c.retried, c.failed), (0, 3, 1));
    worker.stop().await;
}

pub(crate) async fn middleware_turns_a_handler_error_into_success(b: Backend) {
    let (tx, mut rx) = events();
    let (seen_tx, mut seen_rx) = events();
    let forgive = middleware_fn(move |_job, next| {
        let seen = seen_tx.clone();
        async move {
            match next.run().await {
                Err(e) => {
                    let _ = seen.send(e.to_string());
                    Ok(())
                }
                ok => ok,
            }
        }
    });
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(bill_handler(tx, |_| Err(JobError::msg("already billed"))))
            .middleware(forgive)
            .build()
            .unwrap(),
    );
    b.client.enqueue(Bill { n: 1 }).id("b").await.unwrap();
    assert_eq!(next(&mut rx).await, ("b".to_owned(), 1));
    assert_eq!(next(&mut seen_rx).await, "already billed");
    let topic = b.client.topic::<Bill>();
    let c = eventually("processed", || async {
        let c = topic.counts().await.unwrap();
        (c.processed == 1).then_some(c)
    })
    .await;
    assert_eq!((c.retried, c.failed, c.dead), (0, 0, 0));
    none_within(&mut rx, Duration::from_millis(100)).await;
    worker.stop().await;
}

pub(crate) async fn middleware_sees_a_handler_panic_or_timeout_as_an_error(b: Backend) {
    let (seen_tx, mut seen_rx) = events();
    let (dead_tx, mut dead_rx) = events();
    // A panic policy: a handler that panicked has a bug; retrying will not fix it.
    let panic_policy = middleware_fn(move |job, next| {
        let seen = seen_tx.clone();
        async move {
            let result = next.run().await;
            if let Err(e) = &result {
                let _ = seen.send((job.topic(), e.to_string()));
                if e.to_string().starts_with("handler panicked") {
                    return Err(JobError::fail(e.to_string()));
                }
            }
            result
        }
    });
    let bill = |_: Bill, _: JobContext| async { panic!("bug in billing") };
    let slow = |_: Slow, _: JobContext| async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok::<(), JobError>(())
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(bill)
            .handle(slow)
            .middleware(panic_policy)
            .dead_letter_sink(channel_sink(dead_tx))
            .build()
            .unwrap(),
    );
    b.client.enqueue(Bill { n: 1 }).id("b").await.unwrap();
    let dead = next(&mut dead_rx).await;
    assert_eq!((dead.id.as_str(), dead.attempts), ("b", 1));
    assert_eq!(dead.reason, "failed: handler panicked: bug in billing");
    assert_eq!(
        next(&mut seen_rx).await,
        (Bill::TOPIC, "handler panicked: bug in billing".to_owned())
    );
    b.client.enqueue(Slow).id("s").await.unwrap();
    let (topic, error) = next(&mut seen_rx).await;
    assert_eq!(topic, Slow::TOPIC);
    assert!(error.starts_with("timed out after"), "{error}");
    // A timeout is not a panic: the policy lets it retry by schedule.
    let (_, error) = next(&mut seen_rx).await;
    assert!(error.starts_with("timed out after"), "{error}");
    worker.stop().await;
}

pub(crate) async fn middleware_that_panics_fails_the_attempt(b: Backend) {
    let (tx, mut rx) = events();
    let buggy = middleware_fn(|job, next| async move {
        if job.attempt() == 1 {
            panic!("bug in middleware");
        }
        next.run().await
    });
    let handler = move |_: Bill, ctx: JobContext| {
        let tx = tx.clone();
        async move {
            let errors: Vec<_> = ctx
                .previous_errors()
                .iter()
                .map(|e| e.message.clone())
                .collect();
            let _ = tx.send((ctx.attempt(), errors));
            Ok(())
        }
    };
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(handler)
            .middleware(buggy)
            .build()
            .unwrap(),
    );
    b.client.enqueue(Bill { n: 1 }).id("b").await.unwrap();
    let (attempt, errors) = next(&mut rx).await;
    assert_eq!(attempt, 2, "the attempt whose middleware panicked failed");
    assert_eq!(errors, ["middleware panicked: bug in middleware"]);
    worker.stop().await;
}

pub(crate) async fn middleware_for_one_job_type_leaves_other_types_alone(b: Backend) {
    let (tx, mut rx) = events();
    let (seen_tx, mut seen_rx) = events();
    let only_bills = middleware_fn(move |job, next| {
        let seen = seen_tx.clone();
        async move {
            let _ = seen.send(job.topic());
            next.run().await
        }
    });
    let to_bills = tx.clone();
    let bill = move |_: Bill, _: JobContext| {
        let tx = to_bills.clone();
        async move {
            let _ = tx.send(Bill::TOPIC);
            Ok(())
        }
    };
    let mail = move |_: Mail, _: JobContext| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(Mail::TOPIC);
            Ok(())
        }
    };
    let unknown = Worker::builder(&b.client)
        .handle(mail.clone())
        .middleware_for::<Bill>(middleware_fn(|_, next| next.run()))
        .build()
        .unwrap_err();
    assert!(
        matches!(&unknown, Error::UnknownTopic { topic } if topic == Bill::TOPIC),
        "{unknown}"
    );
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(bill)
            .handle(mail)
            .middleware_for::<Bill>(only_bills)
            .build()
            .unwrap(),
    );
    b.client.enqueue(Mail { n: 1 }).await.unwrap();
    assert_eq!(next(&mut rx).await, Mail::TOPIC);
    b.client.enqueue(Bill { n: 2 }).await.unwrap();
    assert_eq!(next(&mut rx).await, Bill::TOPIC);
    assert_eq!(next(&mut seen_rx).await, Bill::TOPIC);
    none_within(&mut seen_rx, Duration::from_millis(100)).await;
    worker.stop().await;
}

pub(crate) async fn middleware_sees_the_job_context(b: Backend) {
    let (tx, mut rx) = events();
    let (seen_tx, mut seen_rx) = events();
    let watch = middleware_fn(move |job, next| {
        let seen = seen_tx.clone();
        async move {
            let before = (
                job.topic(),
                job.id().to_owned(),
                job.attempt(),
                job.attempts_allowed(),
                job.meta("tenant").map(str::to_owned),
                job.previous_errors().len(),
                job.is_stopped(),
            );
            let result = next.run().await;
            let _ = seen.send((before, result.as_ref().err().map(|e| e.to_string())));
            result
        }
    });
    let worker = spawn(
        Worker::builder(&b.client)
            .handle(bill_handler(tx, |ctx| match ctx.attempt() {
                1 => Err(JobError::msg("first try fails")),
                _ => Ok(()),
            }))
            .middleware(watch)
            .build()
            .unwrap(),
    );
    b.client
        .enqueue(Bill { n: 1 })
        .id("invoice:7")
        .meta("tenant", "acme")
        .await
        .unwrap();
    let tenant = Some("acme".to_owned());
    let id = "invoice:7".to_owned();
    assert_eq!(
        next(&mut seen_rx).await,
        (
            (Bill::TOPIC, id.clone(), 1, 4, tenant.clone(), 0, false),
            Some("first try fails".to_owned())
        )
    );
    assert_eq!(
        next(&mut seen_rx).await,
        ((Bill::TOPIC, id.clone(), 2, 4, tenant, 1, false), None)
    );
    assert_eq!(next(&mut rx).await, (id.clone(), 1));
    assert_eq!(next(&mut rx).await, (id, 2));
    worker.stop().await;
}
