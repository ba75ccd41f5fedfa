//! Trace context across the queue, on a real Redis: an in-memory OpenTelemetry exporter sees the
//! enqueue's span and the handler's span in one trace (child mode), or linked (link mode, the default),
//! with the messaging attributes.

#[path = "../support/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;
#[path = "../support/tempdir.rs"]
#[allow(dead_code, unreachable_pub)]
mod tempdir;
#[path = "../support/wait.rs"]
mod wait;

use std::future::IntoFuture;

use opentelemetry::trace::{SpanId, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use postpone::{Client, Job, JobContext, JobError, TraceParent, Worker};
use redis_server::RedisServer;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use wait::eventually;

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "obs.child")]
struct AsChild {
    n: u32,
}

#[derive(Serialize, Deserialize, Job)]
#[job(topic = "obs.link")]
struct AsLink {
    n: u32,
}

type Seen = mpsc::UnboundedSender<Option<String>>;

/// Reports the `traceparent` its job carried.
async fn child(_job: AsChild, ctx: JobContext, seen: Seen) -> Result<(), JobError> {
    let _ = seen.send(ctx.meta("traceparent").map(str::to_owned));
    Ok(())
}

async fn link(_job: AsLink, ctx: JobContext, seen: Seen) -> Result<(), JobError> {
    let _ = seen.send(ctx.meta("traceparent").map(str::to_owned));
    Ok(())
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    let key = Key::from(key.to_owned());
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .map(|kv| &kv.value)
}

fn find<'a>(spans: &'a [SpanData], name: &str) -> Option<&'a SpanData> {
    spans.iter().find(|s| s.name == name)
}

/// The spans named `send <topic>` (the enqueue) and `process <topic>` (the handler), once both ended.
async fn spans_of(
    provider: &SdkTracerProvider,
    exporter: &InMemorySpanExporter,
    topic: &str,
) -> (SpanData, SpanData) {
    eventually(
        "the enqueue's and the handler's spans to be exported",
        || async {
            provider.force_flush().unwrap();
            let spans = exporter.get_finished_spans().unwrap();
            let send = find(&spans, &format!("send {topic}"))?.clone();
            let process = find(&spans, &format!("process {topic}"))?.clone();
            Some((send, process))
        },
    )
    .await
}

fn assert_messaging(process: &SpanData, topic: &str, id: &str) {
    let s = |v: &str| Value::from(v.to_owned());
    assert_eq!(attribute(process, "messaging.system"), Some(&s("postpone")));
    assert_eq!(
        attribute(process, "messaging.destination.name"),
        Some(&s(topic))
    );
    assert_eq!(attribute(process, "messaging.message.id"), Some(&s(id)));
    assert_eq!(
        attribute(process, "messaging.operation.type"),
        Some(&s("process"))
    );
    assert_eq!(attribute(process, "attempt"), Some(&Value::I64(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_span_is_a_child_of_the_enqueue_or_links_to_it() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let tracer = provider.tracer("observability-test");
    let subscriber =
        tracing_subscriber::registry().with(tracing_opentelemetry::layer().with_tracer(tracer));
    tracing::subscriber::set_global_default(subscriber).unwrap();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());

    let server = RedisServer::start();
    let client = Client::connect(&server.url()).await.unwrap();
    let (seen_tx, mut seen) = mpsc::unbounded_channel();

    // Child mode: one trace from the request to the handler.
    let worker = Worker::with_state(&client, seen_tx.clone())
        .handle(child)
        .trace_parent(TraceParent::Child)
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let request = tracing::info_span!("request");
    client
        .enqueue(AsChild { n: 1 })
        .id("c:1")
        .into_future()
        .instrument(request)
        .await
        .unwrap();
    let carried = seen.recv().await.unwrap();
    assert!(
        carried.is_some_and(|t| t.starts_with("00-")),
        "a W3C traceparent"
    );
    let (send, process) = spans_of(&provider, &exporter, "obs.child").await;
    shutdown.shutdown();
    running.await.unwrap().unwrap();
    assert_eq!(
        process.span_context.trace_id(),
        send.span_context.trace_id()
    );
    assert_eq!(process.parent_span_id, send.span_context.span_id());
    assert!(process.parent_span_is_remote);
    assert_ne!(
        send.parent_span_id,
        SpanId::INVALID,
        "the enqueue is in the request's span"
    );
    let id = Value::from("c:1".to_owned());
    assert_eq!(attribute(&send, "messaging.message.id"), Some(&id));
    assert_eq!(
        attribute(&send, "messaging.system"),
        Some(&Value::from("postpone".to_owned()))
    );
    assert_messaging(&process, "obs.child", "c:1");

    // Link mode (the default): a trace of its own, linked to the enqueue.
    let worker = Worker::with_state(&client, seen_tx)
        .handle(link)
        .build()
        .unwrap();
    let shutdown = worker.shutdown_handle();
    let running = tokio::spawn(worker.run());
    let request = tracing::info_span!("request");
    client
        .enqueue(AsLink { n: 2 })
        .id("l:1")
        .into_future()
        .instrument(request)
        .await
        .unwrap();
    assert!(seen.recv().await.unwrap().is_some());
    let (send, process) = spans_of(&provider, &exporter, "obs.link").await;
    shutdown.shutdown();
    running.await.unwrap().unwrap();
    assert_ne!(
        process.span_context.trace_id(),
        send.span_context.trace_id()
    );
    let links: Vec<_> = process
        .links
        .links
        .iter()
        .map(|l| (l.span_context.trace_id(), l.span_context.span_id()))
        .collect();
    let enqueue = (send.span_context.trace_id(), send.span_context.span_id());
    assert_eq!(links, [enqueue], "one link, to the enqueue's span");
    assert_messaging(&process, "obs.link", "l:1");
}
