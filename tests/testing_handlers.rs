//! How an application tests its own handlers, without Redis (the guide is `postpone::guide::testing`,
//! from `docs/guide/testing.md`): call the handler with `JobContext::for_test`; run a worker on
//! `Client::memory()`; drive time with a `MemoryStore` on a `ManualClock`.
//!
//! The application here sends reminders through a mail service. Its handler gets the service through
//! the worker's state, so the tests give it a fake that answers what each test scripts.

#[path = "support/wait.rs"]
mod wait;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use postpone::store::memory::{Clock, ManualClock, MemoryStore};
use postpone::{
    Client, DeadLetter, Job, JobContext, JobError, JobState, Outcome, ShutdownHandle, Worker,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use wait::{eventually, wait_until};

// ---- The application's code ----

/// Send a reminder; retried 1 and 5 minutes after a failure.
#[derive(Debug, Clone, Serialize, Deserialize, Job)]
#[job(topic = "reminders.send", retry = ["0", "0", "1m", "5m"])]
struct SendReminder {
    user_id: u64,
    text: String,
}

/// What the mail service may answer.
#[derive(Debug, Clone, PartialEq)]
enum Mail {
    Sent,
    RateLimited(Duration),
    Down,
    NoSuchUser,
}

/// The mail service, as the handler sees it.
trait Mailer: Send + Sync {
    /// Sends `text` to `user`; `key` lets the service drop a repeat.
    fn send(&self, user: u64, text: &str, key: &str) -> Mail;
    /// Sends `text` to `user`'s phone instead.
    fn text_message(&self, user: u64, text: &str);
}

#[derive(Clone)]
struct App {
    mailer: Arc<dyn Mailer>,
}

async fn send_reminder(job: SendReminder, ctx: JobContext, app: App) -> Result<(), JobError> {
    match app.mailer.send(job.user_id, &job.text, ctx.id()) {
        Mail::Sent => Ok(()),
        // Nothing failed: come back later, without using an attempt.
        Mail::RateLimited(wait) => Err(JobError::snooze(wait)),
        // Down on the last attempt: a text message instead, rather than no reminder at all.
        Mail::Down if ctx.is_last_attempt() => {
            app.mailer.text_message(job.user_id, &job.text);
            Ok(())
        }
        // May recover: retry by the schedule.
        Mail::Down => Err(JobError::msg("mail service down")),
        // Will not recover: to the dead letters now.
        Mail::NoSuchUser => Err(JobError::fail(format!("no user {}", job.user_id))),
    }
}

// ---- Test support: a fake mail service and a few helpers ----

/// Answers from a script (then `Sent`), and records what it sent.
#[derive(Default)]
struct FakeMailer {
    script: Mutex<VecDeque<Mail>>,
    sent: Mutex<Vec<(u64, String, String)>>,
    texted: Mutex<Vec<u64>>,
}

impl FakeMailer {
    fn answering(script: impl IntoIterator<Item = Mail>) -> Arc<Self> {
        Arc::new(FakeMailer {
            script: Mutex::new(script.into_iter().collect()),
            ..FakeMailer::default()
        })
    }

    fn sent(&self) -> Vec<(u64, String, String)> {
        self.sent.lock().unwrap().clone()
    }
}

impl Mailer for FakeMailer {
    fn send(&self, user: u64, text: &str, key: &str) -> Mail {
        let answer = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Mail::Sent);
        if answer == Mail::Sent {
            self.sent
                .lock()
                .unwrap()
                .push((user, text.to_owned(), key.to_owned()));
        }
        answer
    }

    fn text_message(&self, user: u64, _text: &str) {
        self.texted.lock().unwrap().push(user);
    }
}

fn reminder(user_id: u64) -> SendReminder {
    SendReminder {
        user_id,
        text: format!("hello {user_id}"),
    }
}

/// Runs a worker for `send_reminder` with `mailer`; dead letters go to the returned channel.
fn start_worker(
    client: &Client,
    mailer: Arc<FakeMailer>,
) -> (ShutdownHandle, mpsc::UnboundedReceiver<DeadLetter>) {
    let (dead_tx, dead) = mpsc::unbounded_channel();
    let sink = postpone::sink_fn(move |letter: DeadLetter| {
        let tx = dead_tx.clone();
        async move {
            let _ = tx.send(letter);
            Ok(())
        }
    });
    let worker = Worker::with_state(client, App { mailer })
        .handle(send_reminder)
        .concurrency(1)
        .dead_letter_sink(sink)
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    tokio::spawn(worker.run());
    (shutdown, dead)
}

/// A client on a store whose clock only moves when the test moves it, starting at `start`.
fn client_at(start: DateTime<Utc>) -> (Client, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(start.timestamp_millis()));
    let client = Client::builder().store(MemoryStore::with_clock(clock.clone()));
    (client, clock)
}

/// Waits until the reminder is scheduled for `attempt` at a time still to come (it ran and came back);
/// returns how long from the clock's now.
async fn scheduled_in(client: &Client, clock: &ManualClock, id: &str, attempt: u32) -> Duration {
    let topic = &client.topic::<SendReminder>();
    let what = format!("{id} to be scheduled again for attempt {attempt}");
    eventually(&what, || async move {
        let job = topic.job(id).await.unwrap()?;
        let JobState::Scheduled { due_at } = job.state else {
            return None;
        };
        let wait = due_at.timestamp_millis() - clock.now_ms();
        (job.attempt == attempt && wait > 0).then(|| Duration::from_millis(wait as u64))
    })
    .await
}

// ---- The tests ----

#[tokio::test]
async fn the_handler_called_directly_maps_each_answer_to_an_outcome() {
    let mailer = FakeMailer::answering([
        Mail::RateLimited(Duration::from_secs(30)),
        Mail::Down,
        Mail::NoSuchUser,
    ]);
    let app = App {
        mailer: mailer.clone(),
    };
    let ctx = || JobContext::for_test(SendReminder::TOPIC, "reminder:7");
    let outcome = |r: Result<(), JobError>| r.map_err(|e| e.outcome());

    let answers = [
        outcome(send_reminder(reminder(7), ctx(), app.clone()).await),
        outcome(send_reminder(reminder(7), ctx(), app.clone()).await),
        outcome(send_reminder(reminder(7), ctx(), app.clone()).await),
        outcome(send_reminder(reminder(7), ctx(), app.clone()).await),
    ];
    assert_eq!(
        answers,
        [
            Err(Outcome::Snooze(Duration::from_secs(30))),
            Err(Outcome::Retry),
            Err(Outcome::Fail),
            Ok(()),
        ]
    );
    // The job id goes to the mail service as the key that drops repeats.
    assert_eq!(
        mailer.sent(),
        [(7, "hello 7".to_owned(), "reminder:7".to_owned())]
    );
}

#[tokio::test]
async fn on_its_last_attempt_the_handler_falls_back_to_a_text_message() {
    let mailer = FakeMailer::answering([Mail::Down, Mail::Down]);
    let app = App {
        mailer: mailer.clone(),
    };
    let on_attempt = |n| JobContext::for_test_attempt(SendReminder::TOPIC, "reminder:7", n, 3);

    let second = send_reminder(reminder(7), on_attempt(2), app.clone()).await;
    assert_eq!(second.unwrap_err().outcome(), Outcome::Retry);
    assert!(mailer.texted.lock().unwrap().is_empty());
    send_reminder(reminder(7), on_attempt(3), app.clone())
        .await
        .expect("the last attempt sends a text message instead");
    assert_eq!(*mailer.texted.lock().unwrap(), [7]);
    assert!(mailer.sent().is_empty());
}

#[tokio::test]
async fn a_worker_in_memory_sends_an_enqueued_reminder() {
    let client = Client::memory();
    let mailer = FakeMailer::answering([]);
    let (shutdown, _dead) = start_worker(&client, mailer.clone());

    client.enqueue(reminder(1)).id("reminder:1").await.unwrap();
    wait_until("the reminder to be sent", || mailer.sent().len() == 1).await;
    let counts = client.topic::<SendReminder>().counts().await.unwrap();
    assert_eq!(counts.processed, 1);
    shutdown.shutdown();
}

#[tokio::test]
async fn a_reminder_for_nine_tomorrow_is_sent_at_nine_not_before() {
    let evening = Utc.with_ymd_and_hms(2030, 1, 1, 20, 0, 0).unwrap();
    let nine_tomorrow = Utc.with_ymd_and_hms(2030, 1, 2, 9, 0, 0).unwrap();
    let (client, clock) = client_at(evening);
    let mailer = FakeMailer::answering([]);
    let (shutdown, _dead) = start_worker(&client, mailer.clone());
    let topic = client.topic::<SendReminder>();

    client
        .enqueue(reminder(1))
        .id("reminder:1")
        .at(nine_tomorrow)
        .await
        .unwrap();
    clock.set((nine_tomorrow - chrono::Duration::minutes(1)).timestamp_millis());
    // Not due by the store's clock: no worker can have it.
    let counts = topic.counts().await.unwrap();
    assert_eq!((counts.scheduled, counts.ready), (1, 0));
    assert!(mailer.sent().is_empty());

    clock.advance(Duration::from_secs(60));
    wait_until("the reminder at nine", || mailer.sent().len() == 1).await;
    shutdown.shutdown();
}

#[tokio::test]
async fn rate_limits_snooze_without_an_attempt_and_failures_retry_by_the_schedule() {
    let (client, clock) = client_at(Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap());
    let mailer = FakeMailer::answering([
        Mail::RateLimited(Duration::from_secs(30)),
        Mail::Down,
        Mail::Down,
    ]);
    let (shutdown, _dead) = start_worker(&client, mailer.clone());
    let id = "reminder:1";
    client.enqueue(reminder(1)).id(id).await.unwrap();

    // Rate limited: back in 30 s, still on attempt 1.
    let wait = scheduled_in(&client, &clock, id, 1).await;
    assert_eq!(wait, Duration::from_secs(30));
    clock.advance(wait);
    // Down on attempt 1: attempt 2 in 1 minute, by the schedule.
    let wait = scheduled_in(&client, &clock, id, 2).await;
    assert_eq!(wait, Duration::from_secs(60));
    let job = client
        .topic::<SendReminder>()
        .job(id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.errors.len(), 1);
    assert_eq!(job.errors[0].message, "mail service down");
    clock.advance(wait);
    // Down on attempt 2: attempt 3 in 5 minutes.
    let wait = scheduled_in(&client, &clock, id, 3).await;
    assert_eq!(wait, Duration::from_secs(5 * 60));
    clock.advance(wait);

    wait_until("the reminder on attempt 3", || mailer.sent().len() == 1).await;
    let counts = client.topic::<SendReminder>().counts().await.unwrap();
    assert_eq!((counts.processed, counts.retried), (1, 2), "{counts:?}");
    shutdown.shutdown();
}

#[tokio::test]
async fn an_unknown_user_goes_to_the_dead_letters_at_once() {
    let client = Client::memory();
    let mailer = FakeMailer::answering([Mail::NoSuchUser]);
    let (shutdown, mut dead) = start_worker(&client, mailer.clone());

    client
        .enqueue(reminder(404))
        .id("reminder:404")
        .await
        .unwrap();
    let letter = tokio::time::timeout(Duration::from_secs(10), dead.recv())
        .await
        .expect("a dead letter")
        .unwrap();
    assert_eq!((letter.id.as_str(), letter.attempts), ("reminder:404", 1));
    assert_eq!(letter.reason, "failed: no user 404");
    assert_eq!(letter.job::<SendReminder>().unwrap().user_id, 404);
    assert!(mailer.sent().is_empty());
    shutdown.shutdown();
}

#[tokio::test]
async fn a_cancelled_reminder_never_runs() {
    let (client, clock) = client_at(Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap());
    let mailer = FakeMailer::answering([]);
    let (shutdown, _dead) = start_worker(&client, mailer.clone());
    let topic = client.topic::<SendReminder>();

    client
        .enqueue(reminder(1))
        .id("reminder:1")
        .after(Duration::from_secs(3600))
        .await
        .unwrap();
    client.cancel::<SendReminder>("reminder:1").await.unwrap();
    // Gone from the store: nothing can run it.
    assert!(topic.job("reminder:1").await.unwrap().is_none());
    assert_eq!(topic.counts().await.unwrap().cancelled, 1);

    // Past its time, a reminder due later than it runs, alone (one at a time, earliest first).
    clock.advance(Duration::from_secs(2 * 3600));
    client.enqueue(reminder(2)).id("reminder:2").await.unwrap();
    wait_until("the later reminder", || mailer.sent().len() == 1).await;
    assert_eq!(mailer.sent()[0].0, 2);
    shutdown.shutdown();
}
