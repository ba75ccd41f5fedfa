//! The order-timeout example (`examples/apps/order_timeout/`), driven over HTTP against a redis-server of its
//! own and a PostgreSQL schema of its own, with a payment window of seconds: orders are placed, paid,
//! extended and abandoned, and the database, the outbox and the queue show what happened to each. The
//! `outbox` tests show transactional enqueue: a request that rolls back leaves no timer, a payment and
//! its cancel commit together, and an order placed while Redis is away gets its timer when it is back.

#[path = "../order_timeout/api.rs"]
mod api;
#[path = "../order_timeout/app.rs"]
#[allow(dead_code)]
mod app;
#[path = "../order_timeout/observe.rs"]
#[allow(dead_code)]
mod observe;
// The example's own connection code (`support::postgres` is the tests' schemas).
#[path = "../support/postgres.rs"]
mod postgres;
mod support;
#[path = "../order_timeout/timer.rs"]
mod timer;

use std::time::Duration;

use app::{NewOrder, Order, Settings, Status};
use postpone::{Client, JobState, Topic, TopicCounts};
use reqwest::StatusCode;
use support::postgres::TestSchema;
use support::redis_server::RedisServer;
use support::wait::eventually;
use timer::{timer_id, CloseUnpaidOrder};
use tokio::sync::oneshot;

/// The service on a free port, stopped by [`Service::stop`].
struct Service {
    base: String,
    http: reqwest::Client,
    stop: oneshot::Sender<()>,
    running: tokio::task::JoinHandle<Result<(), postpone::BoxError>>,
    rearmed: usize,
}

impl Service {
    async fn start(jobs: &Client, schema: &TestSchema, window: Duration) -> Self {
        let settings = Settings {
            payment_window: window,
            schema: schema.name().to_owned(),
        };
        let app = app::App::connect(&support::postgres::database_url(), jobs.clone(), &settings)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let rearmed = app.rearm_in_memory_timers().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let running = tokio::spawn(app.serve(listener, async {
            let _ = stopped.await;
        }));
        Service {
            base,
            http: reqwest::Client::new(),
            stop,
            running,
            rearmed,
        }
    }

    /// POSTs a new order; the status and the answer's body.
    async fn try_place(&self, item: &str) -> (StatusCode, serde_json::Value) {
        let order = NewOrder {
            item: item.into(),
            amount_cents: 1200,
        };
        let response = self
            .http
            .post(format!("{}/orders", self.base))
            .json(&order)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    }

    async fn place(&self, item: &str) -> Order {
        let (status, body) = self.try_place(item).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        serde_json::from_value(body).unwrap()
    }

    /// POSTs to `/orders/{id}/{action}`; the status, and the order when it succeeded.
    async fn act(&self, id: i64, action: &str) -> (StatusCode, Option<Order>) {
        let response = self
            .http
            .post(format!("{}/orders/{id}/{action}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let order = match status.is_success() {
            true => Some(response.json().await.unwrap()),
            false => None,
        };
        (status, order)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(30), self.running)
            .await
            .expect("the service stops within 30 s")
            .unwrap()
            .expect("the service stops cleanly");
    }
}

/// What the database holds for an order (read directly, not through the API).
#[derive(Debug)]
struct Stored {
    status: Status,
    paid_at: Option<chrono::DateTime<chrono::Utc>>,
    closed_at: Option<chrono::DateTime<chrono::Utc>>,
}

async fn stored(schema: &TestSchema, id: i64) -> Stored {
    let row = schema
        .db()
        .query_one(
            "SELECT status, paid_at, closed_at FROM orders WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    Stored {
        status: match row.get::<_, &str>(0) {
            "pending" => Status::Pending,
            "paid" => Status::Paid,
            _ => Status::Closed,
        },
        paid_at: row.get(1),
        closed_at: row.get(2),
    }
}

async fn closed(schema: &TestSchema, id: i64) -> Stored {
    eventually(&format!("order {id} to be closed"), || async {
        let order = stored(schema, id).await;
        (order.status == Status::Closed).then_some(order)
    })
    .await
}

/// Rows in the service's outbox table: committed timer changes not yet moved to the queue.
async fn outbox_rows(schema: &TestSchema) -> i64 {
    let row = schema
        .db()
        .query_one("SELECT count(*) FROM outbox", &[])
        .await
        .unwrap();
    row.get(0)
}

/// Waits until the relay has moved every committed row of the outbox to the queue.
async fn outbox_delivered(schema: &TestSchema) {
    eventually("the outbox to be delivered", || async {
        (outbox_rows(schema).await == 0).then_some(())
    })
    .await
}

/// When the timer of order `id` is due, if it is scheduled.
async fn scheduled(jobs: &Client, id: i64) -> Option<chrono::DateTime<chrono::Utc>> {
    let timer = jobs.topic::<CloseUnpaidOrder>().job(&timer_id(id)).await;
    match timer.unwrap()?.state {
        JobState::Scheduled { due_at } => Some(due_at),
        _ => None,
    }
}

/// Whether the queue holds a timer for order `id`, in any state.
async fn has_timer(jobs: &Client, id: i64) -> bool {
    let timer = jobs.topic::<CloseUnpaidOrder>().job(&timer_id(id)).await;
    timer.unwrap().is_some()
}

/// Makes some commits fail after everything in them was written, the outbox row included: a deferred
/// constraint trigger refuses, at commit, an order with the item `refused at commit`, and the payment
/// of an order with the item `payment refused at commit`.
async fn refuse_some_commits(schema: &TestSchema) {
    schema
        .db()
        .batch_execute(
            "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                 IF NEW.item = 'refused at commit'
                    OR (NEW.item = 'payment refused at commit' AND NEW.status = 'paid') THEN
                     RAISE EXCEPTION 'refused at commit: order %', NEW.id;
                 END IF;
                 RETURN NULL;
             END $$;
             CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT OR UPDATE ON orders
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();",
        )
        .await
        .unwrap();
}

async fn redis_client(server: &RedisServer) -> Client {
    Client::builder()
        .namespace("shop")
        .redis(&server.url())
        .await
        .expect("connecting to the test redis-server")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paid_orders_stay_paid_abandoned_ones_close_and_extensions_move_the_deadline() {
    let server = RedisServer::start();
    let schema = TestSchema::create("order_timeout").await;
    let jobs = redis_client(&server).await;
    let timers = jobs.topic::<CloseUnpaidOrder>();
    let window = Duration::from_secs(3);
    // Before the worker starts, as the example does: `/metrics` then serves postpone's metrics.
    observe::install_metrics();
    let service = Service::start(&jobs, &schema, window).await;
    // On Redis nothing is set again at start: a committed order's timer is in Redis or in the outbox.
    assert_eq!(service.rearmed, 0);

    let paid = service.place("paid").await;
    let abandoned = service.place("abandoned").await;
    let extended = service.place("extended").await;
    // The relay moves the committed timers from the outbox to the queue.
    outbox_delivered(&schema).await;
    for order in [&paid, &abandoned, &extended] {
        assert_eq!(order.status, Status::Pending);
        assert_eq!((order.pay_by - order.placed_at).to_std().unwrap(), window);
        // The timer is set for the deadline, under the order's id.
        let timer = timers.job(&timer_id(order.id)).await.unwrap().unwrap();
        assert_eq!(timer.job::<CloseUnpaidOrder>().unwrap().order_id, order.id);
        match timer.state {
            JobState::Scheduled { due_at } => {
                assert_eq!(due_at.timestamp_millis(), order.pay_by.timestamp_millis())
            }
            other => panic!("the timer of order {} is {other:?}", order.id),
        }
    }

    // Paying records the payment and cancels the timer; paying again changes nothing.
    let (status, order) = service.act(paid.id, "pay").await;
    assert_eq!(
        (status, order.unwrap().status),
        (StatusCode::OK, Status::Paid)
    );
    outbox_delivered(&schema).await;
    assert!(!has_timer(&jobs, paid.id).await);
    let (status, again) = service.act(paid.id, "pay").await;
    assert_eq!(
        (status, again.unwrap().status),
        (StatusCode::OK, Status::Paid)
    );

    // Extending moves the deadline by one window, and the timer with it.
    let (status, order) = service.act(extended.id, "extend").await;
    assert_eq!(status, StatusCode::OK);
    let new_deadline = order.unwrap().pay_by;
    assert_eq!((new_deadline - extended.pay_by).to_std().unwrap(), window);
    outbox_delivered(&schema).await;
    let due_at = scheduled(&jobs, extended.id).await;
    assert_eq!(
        due_at.map(|t| t.timestamp_millis()),
        Some(new_deadline.timestamp_millis())
    );

    // The abandoned order is closed at its deadline, not before; then it can be neither paid nor
    // extended.
    let closed_order = closed(&schema, abandoned.id).await;
    assert!(closed_order.closed_at.unwrap() >= abandoned.pay_by);
    assert_eq!(closed_order.paid_at, None);
    assert_eq!(
        service.act(abandoned.id, "pay").await.0,
        StatusCode::CONFLICT
    );
    assert_eq!(
        service.act(abandoned.id, "extend").await.0,
        StatusCode::CONFLICT
    );

    // The extended order is closed at its new deadline.
    let closed_order = closed(&schema, extended.id).await;
    assert!(closed_order.closed_at.unwrap() >= new_deadline);

    // The paid order is still paid, and was never closed.
    let paid_row = stored(&schema, paid.id).await;
    assert_eq!(paid_row.status, Status::Paid);
    assert!(paid_row.paid_at.unwrap() < paid.pay_by);
    assert_eq!(paid_row.closed_at, None);
    assert_eq!(service.act(paid.id, "extend").await.0, StatusCode::CONFLICT);

    // Two timers fired and closed their orders; one was cancelled; none is left, in the queue or in
    // the outbox.
    let counts = at_rest(&timers).await;
    assert_eq!(
        (counts.processed, counts.cancelled, counts.dead),
        (2, 1, 0),
        "{counts:?}"
    );
    assert_eq!(
        (counts.scheduled, counts.ready, counts.active),
        (0, 0, 0),
        "{counts:?}"
    );
    assert_eq!(outbox_rows(&schema).await, 0);

    // Bad requests say what is wrong.
    let missing = service.act(i64::MAX, "pay").await.0;
    assert_eq!(missing, StatusCode::NOT_FOUND);
    let bad = service
        .http
        .post(format!("{}/orders", service.base))
        .json(&serde_json::json!({"item": "free", "amount_cents": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    // `/metrics` shows the timers and the outbox's relay in the Prometheus text format (the recorder
    // is the process's: the other tests of this binary may add to its counts).
    let scrape = service
        .http
        .get(format!("{}/metrics", service.base))
        .send()
        .await
        .unwrap();
    assert_eq!(scrape.status(), StatusCode::OK);
    let text = scrape.text().await.unwrap();
    let value = |series: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(series));
        let value = line.and_then(|l| l.rsplit(' ').next()?.parse().ok());
        value.unwrap_or_else(|| panic!("no {series} in the scrape:\n{text}"))
    };
    let topic = r#"topic="orders.close_unpaid""#;
    // Three enqueues, a cancel and a reschedule went through the outbox.
    assert!(value("postpone_outbox_delivered_total") >= 5.0);
    assert!(
        value(&format!(
            r#"postpone_jobs_finished_total{{{topic},outcome="done"}}"#
        )) >= 2.0
    );
    assert!(value(&format!("postpone_job_start_lag_seconds_count{{{topic}}}")) >= 2.0);

    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_a_rolled_back_order_leaves_no_timer_and_a_payment_commits_with_its_cancel() {
    let server = RedisServer::start();
    let schema = TestSchema::create("order_outbox").await;
    let jobs = redis_client(&server).await;
    let window = Duration::from_secs(6);
    let service = Service::start(&jobs, &schema, window).await;
    refuse_some_commits(&schema).await;

    // An order whose transaction fails at its commit, after the order's row and its timer's outbox
    // row were written: neither is kept.
    let before = service.place("placed before").await;
    let (status, body) = service.try_place("refused at commit").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let after = service.place("placed after").await;
    // The refused order took the id between the two (a sequence does not roll back).
    let refused = before.id + 1;
    assert_eq!(after.id, refused + 1);

    // A payment that commits takes its cancel with it.
    let (status, order) = service.act(before.id, "pay").await;
    assert_eq!(
        (status, order.unwrap().status),
        (StatusCode::OK, Status::Paid)
    );

    // The relay delivers the outbox in order: once it is empty, the timers of the orders placed
    // before and after are in the queue, and so would the refused order's be.
    outbox_delivered(&schema).await;
    assert!(scheduled(&jobs, after.id).await.is_some());
    assert!(
        !has_timer(&jobs, before.id).await,
        "cancelled with the payment"
    );
    assert!(
        !has_timer(&jobs, refused).await,
        "no timer for a rolled-back order"
    );
    let rows = schema
        .db()
        .query_one("SELECT count(*) FROM orders WHERE id = $1", &[&refused])
        .await
        .unwrap();
    assert_eq!(rows.get::<_, i64>(0), 0, "no row for a rolled-back order");

    // A payment whose transaction fails at its commit, after its cancel was written to the outbox:
    // the order stays pending and keeps its timer, which closes it at its deadline.
    let unpaid = service.place("payment refused at commit").await;
    outbox_delivered(&schema).await;
    let due_at = scheduled(&jobs, unpaid.id).await;
    assert!(due_at.is_some());
    assert_eq!(
        service.act(unpaid.id, "pay").await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(outbox_rows(&schema).await, 0, "the cancel rolled back");
    assert_eq!(stored(&schema, unpaid.id).await.status, Status::Pending);
    assert_eq!(scheduled(&jobs, unpaid.id).await, due_at);
    let closed_order = closed(&schema, unpaid.id).await;
    assert!(closed_order.closed_at.unwrap() >= unpaid.pay_by);
    assert_eq!(closed_order.paid_at, None);

    // The order placed after is closed by its timer too; the paid one never is.
    closed(&schema, after.id).await;
    let paid_row = stored(&schema, before.id).await;
    assert_eq!((paid_row.status, paid_row.closed_at), (Status::Paid, None));
    let counts = at_rest(&jobs.topic::<CloseUnpaidOrder>()).await;
    assert_eq!(
        (counts.processed, counts.cancelled, counts.dead),
        (2, 1, 0),
        "{counts:?}"
    );
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_keeps_the_timer_of_an_order_placed_while_redis_is_away() {
    let server = RedisServer::start();
    let schema = TestSchema::create("order_outbox_redis_away").await;
    let jobs = redis_client(&server).await;
    let window = Duration::from_secs(2);
    let service = Service::start(&jobs, &schema, window).await;
    // Redis goes away once the service's worker runs (it is in the registry of live workers).
    eventually("the worker to start", || async {
        let workers = jobs.ops().workers().await.unwrap();
        (!workers.is_empty()).then_some(())
    })
    .await;

    // Placing an order touches only PostgreSQL: it succeeds, and its timer waits in the outbox.
    server.kill9();
    let order = service.place("placed while Redis is away").await;
    assert_eq!(outbox_rows(&schema).await, 1);

    // Redis is back (empty): the relay delivers the timer, and the timer closes the order.
    server.restart();
    let closed_order = closed(&schema, order.id).await;
    assert!(closed_order.closed_at.unwrap() >= order.pay_by);
    assert_eq!(outbox_rows(&schema).await, 0);
    let counts = at_rest(&jobs.topic::<CloseUnpaidOrder>()).await;
    assert_eq!((counts.processed, counts.dead), (1, 0), "{counts:?}");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_memory_the_timers_of_pending_orders_are_set_again_at_the_next_start() {
    let schema = TestSchema::create("order_timeout_memory").await;
    let window = Duration::from_secs(3);
    let service = Service::start(&Client::memory(), &schema, window).await;
    assert_eq!(service.rearmed, 0);
    let order = service.place("placed before a restart").await;
    outbox_delivered(&schema).await;
    service.stop().await;
    assert_eq!(stored(&schema, order.id).await.status, Status::Pending);

    // The next process has a new, empty queue in memory: it sets the pending order's timer again,
    // and that timer closes the order.
    let service = Service::start(&Client::memory(), &schema, window).await;
    assert_eq!(service.rearmed, 1);
    let closed_order = closed(&schema, order.id).await;
    assert!(closed_order.closed_at.unwrap() >= order.pay_by);
    service.stop().await;
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error_that_names_the_url() {
    let url = "postgres://postgres:secret@127.0.0.1:1/test";
    let error = postgres::pool(url, "orders").await.unwrap_err();
    assert!(
        error.contains("postgres://postgres:***@127.0.0.1:1/test"),
        "{error}"
    );
    assert!(!error.contains("secret"), "{error}");
    assert!(error.contains("DATABASE_URL"), "{error}");
}

/// The timers' counts once none is running. A timer's handler commits the closed order before its
/// worker acknowledges the job in Redis, so right after `closed` sees the row the job may still count
/// as active, and not yet as processed.
async fn at_rest(timers: &Topic) -> TopicCounts {
    eventually("no timer to be running", || async {
        let counts = timers.counts().await.unwrap();
        (counts.active == 0).then_some(counts)
    })
    .await
}
