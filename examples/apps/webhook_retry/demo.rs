//! The demo: three webhooks to the local receiver, each attempt as it happens, then the dead letters.

use std::time::{Duration, Instant};

use chrono::Utc;
use postpone::{
    BoxError, Client, DeadLetter, JobContext, JobError, Outcome, RetrySchedule, Worker,
};
use tokio::sync::mpsc;

use crate::flags::show_duration;
use crate::receiver::Receiver;
use crate::webhook::{default_schedule_faster, deliver, Webhook};

/// How to run the demo.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// How many deliveries of each event `/flaky` refuses before it accepts one.
    pub(crate) fail_first: u32,
    /// How much faster than the default schedule to retry (1: the real schedule).
    pub(crate) speedup: f64,
    /// Print the attempts as they happen, and the dead letters.
    pub(crate) print: bool,
}

/// One webhook's story.
#[derive(Debug)]
pub(crate) struct Delivery {
    pub(crate) id: String,
    /// `event -> /path`.
    pub(crate) label: String,
    pub(crate) attempts: Vec<Attempt>,
    pub(crate) dead: Option<DeadLetter>,
    /// Requests the receiver got with this job's id as `Idempotency-Key`.
    pub(crate) requests_received: u32,
}

/// One attempt (the first is `attempts[0]`), timed from the enqueue.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub(crate) at: Duration,
    /// `None` when it was delivered.
    pub(crate) error: Option<String>,
}

impl Delivery {
    pub(crate) fn delivered(&self) -> bool {
        self.attempts.last().is_some_and(|a| a.error.is_none())
    }

    fn finished(&self) -> bool {
        self.delivered() || self.dead.is_some()
    }
}

/// What happened.
#[derive(Debug)]
pub(crate) struct Report {
    /// The schedule the webhooks ran on.
    pub(crate) schedule: RetrySchedule,
    /// `order.paid -> /flaky`, `order.shipped -> /down`, `order.refunded -> /gone`.
    pub(crate) deliveries: Vec<Delivery>,
}

enum Event {
    Attempt {
        id: String,
        number: u32,
        started: Instant,
        error: Option<(String, Outcome)>,
    },
    Dead(DeadLetter),
}

/// The worker's state: the HTTP client, and where attempts are reported for the demo's output.
#[derive(Clone)]
struct Sender {
    http: reqwest::Client,
    events: mpsc::UnboundedSender<Event>,
}

/// The registered handler: [`deliver`], noting each attempt for the report.
async fn deliver_and_note(hook: Webhook, ctx: JobContext, sender: Sender) -> Result<(), JobError> {
    let started = Instant::now();
    let result = deliver(&sender.http, &hook, &ctx).await;
    let _ = sender.events.send(Event::Attempt {
        id: ctx.id().to_owned(),
        number: ctx.attempt(),
        started,
        error: result.as_ref().err().map(|e| (e.to_string(), e.outcome())),
    });
    result
}

/// Runs the demo on `client` until every webhook is delivered or dead.
pub(crate) async fn run(client: &Client, options: &Options) -> Result<Report, BoxError> {
    let receiver = Receiver::start(options.fail_first).await?;
    let schedule = default_schedule_faster(options.speedup);
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let dead_tx = events_tx.clone();
    let sink = postpone::sink_fn(move |dead: DeadLetter| {
        let tx = dead_tx.clone();
        // A real sender stores these (see the dead_letters_postgres example) or alerts someone.
        async move {
            let _ = tx.send(Event::Dead(dead));
            Ok(())
        }
    });
    let sender = Sender {
        http: reqwest::Client::new(),
        events: events_tx,
    };
    let worker = Worker::with_state(client, sender)
        .handle(deliver_and_note)
        .dead_letter_sink(sink)
        .build()?;
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    if options.print {
        print_setup(&schedule, options, &receiver);
    }

    let run_tag = Utc::now().timestamp_millis();
    let plan = [
        ("order.paid", "/flaky"),
        ("order.shipped", "/down"),
        ("order.refunded", "/gone"),
    ];
    let started = Instant::now();
    let started_ms = Utc::now().timestamp_millis();
    let mut deliveries = Vec::new();
    for (n, (event, path)) in plan.into_iter().enumerate() {
        let id = format!("webhook:{run_tag}:{}", n + 1);
        let hook = Webhook {
            url: format!("{}{path}", receiver.url),
            event: event.to_owned(),
            payload: serde_json::json!({ "event": event, "order_id": 42 }),
        };
        // The schedule is the job type's default; `.retry(..)` here only makes it faster for the demo.
        client.enqueue(hook).id(&id).retry(schedule.clone()).await?;
        deliveries.push(Delivery {
            id,
            label: format!("{event} -> {path}"),
            attempts: Vec::new(),
            dead: None,
            requests_received: 0,
        });
    }

    let budget = schedule.slots().iter().sum::<Duration>() * 3 + Duration::from_secs(30);
    let deadline = tokio::time::Instant::now() + budget;
    while !deliveries.iter().all(Delivery::finished) {
        let event = match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(event)) => event,
            _ => return Err(format!("the webhooks did not all finish within {budget:?}").into()),
        };
        match event {
            Event::Attempt {
                id,
                number,
                started: attempt_started,
                error,
            } => {
                let Some(d) = deliveries.iter_mut().find(|d| d.id == id) else {
                    continue;
                };
                let at = attempt_started.saturating_duration_since(started);
                if options.print {
                    let error = error.as_ref().map(|(message, outcome)| {
                        // The receiver's address is the same in every line: leave it out.
                        (message.replace(&receiver.url, ""), *outcome)
                    });
                    print_attempt(d, &schedule, number, at, error.as_ref());
                }
                d.attempts.push(Attempt {
                    at,
                    error: error.map(|(message, _)| message),
                });
            }
            Event::Dead(dead) => {
                if let Some(d) = deliveries.iter_mut().find(|d| d.id == dead.id) {
                    d.dead = Some(dead);
                }
            }
        }
    }
    shutdown.shutdown();
    running.await??;

    for d in &mut deliveries {
        d.requests_received = receiver.requests(&d.id);
        if d.dead.is_some() {
            // Dead letters stay until trimmed; the demo removes its own so that it leaves nothing behind.
            let _ = client.topic::<Webhook>().purge_dead(&d.id).await;
        }
    }
    if options.print {
        print_dead_letters(&deliveries, started_ms);
    }
    Ok(Report {
        schedule,
        deliveries,
    })
}

fn print_setup(schedule: &RetrySchedule, options: &Options, receiver: &Receiver) {
    let real = RetrySchedule::default();
    let row = |s: &RetrySchedule| -> String {
        s.slots()[2..]
            .iter()
            .map(|d| format!("{:>7}", show_duration(*d)))
            .collect()
    };
    println!(
        "retry schedule: postpone's default{}",
        match options.speedup {
            s if s > 1.0 => format!(", {s}x faster for the demo (--speedup)"),
            _ => String::new(),
        }
    );
    println!(
        "  before attempt {}",
        (2..=real.attempts())
            .map(|n| format!("{n:>7}"))
            .collect::<String>()
    );
    println!("  default        {}", row(&real));
    println!("  this run       {}", row(schedule));
    println!(
        "receiver on {}: /flaky refuses {} deliveries of each event (503) before it accepts one, /down always \
         answers 503, /gone always 410\n",
        receiver.url, options.fail_first
    );
    println!(
        "  {:>8}  {:<25} {:>7}  {:>7}  {:>8}  answer",
        "at", "webhook", "attempt", "waited", "schedule"
    );
}

fn print_attempt(
    d: &Delivery,
    schedule: &RetrySchedule,
    number: u32,
    at: Duration,
    error: Option<&(String, Outcome)>,
) {
    let (waited, slot) = match d.attempts.last() {
        Some(previous) => (
            show_duration(at.saturating_sub(previous.at)),
            schedule
                .delay_before(number)
                .map(show_duration)
                .unwrap_or_default(),
        ),
        None => ("-".into(), "-".into()),
    };
    let answer = match error {
        None => "delivered".to_owned(),
        Some((message, Outcome::Fail)) => format!("{message}: refused for good, dead letter now"),
        Some((message, Outcome::RetryAfter(d))) => {
            format!("{message}: retry after {}", show_duration(*d))
        }
        Some((message, _)) => match schedule.delay_before(number + 1) {
            Some(next) => format!("{message}: retry in {}", show_duration(next)),
            None => format!("{message}: schedule exhausted, dead letter"),
        },
    };
    println!(
        "  {:>8}  {:<25} {:>7}  {waited:>7}  {slot:>8}  {answer}",
        format!("+{:.3}s", at.as_secs_f64()),
        d.label,
        format!("{number}/{}", schedule.attempts()),
    );
}

fn print_dead_letters(deliveries: &[Delivery], started_ms: i64) {
    println!("\ndead letters (what a DeadLetterSink receives):");
    for d in deliveries {
        let Some(dead) = &d.dead else { continue };
        println!(
            "  {} ({}), {} attempt(s), enqueued {}, died {}: {}",
            d.label,
            dead.id,
            dead.attempts,
            dead.enqueued_at.format("%H:%M:%S%.3f"),
            dead.died_at.format("%H:%M:%S%.3f"),
            dead.reason
        );
        for e in &dead.errors {
            let at = Duration::from_millis((e.at_ms - started_ms).max(0) as u64);
            println!(
                "    attempt {} failed at +{:.3}s: {}",
                e.attempt,
                at.as_secs_f64(),
                e.message
            );
        }
    }
}
