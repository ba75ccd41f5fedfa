//! The order-timeout example (`examples/apps/order_timeout/`), driven over HTTP against a redis-server of its
//! own and a PostgreSQL schema of its own, with a payment window of seconds: orders are placed, paid,
//! extended and abandoned, and the database shows what happened to each.

#[path = "../order_timeout/api.rs"]
mod api;
#[path = "../order_timeout/app.rs"]
#[allow(dead_code)]
mod app;
#[path = "../support/postgres.rs"]
#[allow(dead_code)]
mod example_postgres;
#[path = "../order_timeout/observe.rs"]
#[allow(dead_code)]
mod observe;
mod support;
#[path = "../order_timeout/timer.rs"]
mod timer;

use std::time::Duration;

use app::{NewOrder, Order, Settings, Status};
use postpone::{Client, JobState};
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
        let db = example_postgres::connect(&support::postgres::database_url())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let settings = Settings {
            payment_window: window,
            schema: schema.name().to_owned(),
        };
        let app = app::App::new(db, jobs.clone(), &settings).await.unwrap();
        let rearmed = app.rearm_timers().await.unwrap();
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

    async fn place(&self, item: &str) -> Order {
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
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json().await.unwrap()
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

    let paid = service.place("paid").await;
    let abandoned = service.place("abandoned").await;
    let extended = service.place("extended").await;
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
    assert!(timers.job(&timer_id(paid.id)).await.unwrap().is_none());
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
    match timers
        .job(&timer_id(extended.id))
        .await
        .unwrap()
        .unwrap()
        .state
    {
        JobState::Scheduled { due_at } => {
            assert_eq!(due_at.timestamp_millis(), new_deadline.timestamp_millis())
        }
        other => panic!("the extended order's timer is {other:?}"),
    }

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

    // Two timers fired and closed their orders; one was cancelled; none is left.
    let counts = timers.counts().await.unwrap();
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

    // `/metrics` shows the timers in the Prometheus text format (the recorder is the process's: the
    // other tests of this binary may add to its counts).
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
    assert!(
        value(&format!(
            r#"postpone_jobs_enqueued_total{{{topic},status="created"}}"#
        )) >= 3.0
    );
    assert!(
        value(&format!(
            r#"postpone_jobs_finished_total{{{topic},outcome="done"}}"#
        )) >= 2.0
    );
    assert!(value(&format!("postpone_job_start_lag_seconds_count{{{topic}}}")) >= 2.0);

    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_timer_is_set_again_by_an_extension_or_at_the_next_start() {
    let server = RedisServer::start();
    let schema = TestSchema::create("order_timeout_rearm").await;
    let jobs = redis_client(&server).await;
    let timers = jobs.topic::<CloseUnpaidOrder>();
    let window = Duration::from_secs(2);
    let service = Service::start(&jobs, &schema, window).await;
    assert_eq!(service.rearmed, 0);

    // A timer lost while its order is pending: extending the order sets a new one.
    let order = service.place("extended after its timer was lost").await;
    jobs.cancel::<CloseUnpaidOrder>(&timer_id(order.id))
        .await
        .unwrap();
    let (status, extended) = service.act(order.id, "extend").await;
    assert_eq!(status, StatusCode::OK);
    let timer = timers.job(&timer_id(order.id)).await.unwrap().unwrap();
    assert!(
        matches!(timer.state, JobState::Scheduled { due_at } if due_at.timestamp_millis() == extended.unwrap().pay_by.timestamp_millis()),
        "{timer:?}"
    );

    // A timer lost while the service is down (a crash between the INSERT and the enqueue): the next
    // start sets it again, and that instance closes the order.
    let crashed = service.place("placed just before a crash").await;
    service.stop().await;
    jobs.cancel::<CloseUnpaidOrder>(&timer_id(crashed.id))
        .await
        .unwrap();
    let service = Service::start(&jobs, &schema, window).await;
    assert_eq!(service.rearmed, 1, "only the missing timer is set again");
    let closed_order = closed(&schema, crashed.id).await;
    assert!(closed_order.closed_at.unwrap() >= crashed.pay_by);
    closed(&schema, order.id).await;
    service.stop().await;
}

#[tokio::test]
async fn an_unreachable_database_is_a_clear_error_that_names_the_url() {
    let url = "postgres://postgres:secret@127.0.0.1:1/test";
    let error = example_postgres::connect(url).await.unwrap_err();
    assert!(
        error.contains("postgres://postgres:***@127.0.0.1:1/test"),
        "{error}"
    );
    assert!(!error.contains("secret"), "{error}");
    assert!(error.contains("DATABASE_URL"), "{error}");
}
