//! Metrics and traces of the order service.
//!
//! - Metrics: postpone's (built with its `metrics` feature) go to a Prometheus recorder, served as text
//!   at `GET /metrics`. The recorder is installed before the worker starts: a worker registers its
//!   metrics when it starts.
//! - Traces: `--trace stdout` sends spans to an OpenTelemetry exporter that prints them on stdout. The
//!   request that places an order (`POST /orders`) writes its timer to the outbox inside its span, so
//!   the job carries that trace context through the outbox row (postpone's `opentelemetry` feature);
//!   when the timer fires, the handler's span `process orders.close_unpaid` links to the request's
//!   span: follow the printed `trace_id`s and `links`.

use std::sync::OnceLock;
use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Histogram buckets for the `_seconds` metrics (run time, start lag): 1 ms to 30 min.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0, 1800.0,
];

static SCRAPE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder (once per process; later calls do nothing), and keeps its
/// histograms compact. Call it inside the Tokio runtime, before the worker starts.
pub(crate) fn install_metrics() {
    SCRAPE.get_or_init(|| {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)
            .expect("buckets are given")
            .install_recorder()
            .expect("the only metrics recorder of this process");
        let upkeep = handle.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                upkeep.run_upkeep();
            }
        });
        handle
    });
}

/// `GET /metrics`: the Prometheus text format (404 when no recorder was installed).
pub(crate) async fn scrape() -> Response {
    match SCRAPE.get() {
        Some(handle) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        )
            .into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Logs to stdout (filtered by `RUST_LOG`, default `info`), and with `trace_stdout` spans to an
/// OpenTelemetry exporter that prints them, postpone's DEBUG spans (enqueue, claim, ack) included.
/// Returns the tracer provider to flush at exit.
pub(crate) fn init_tracing(trace_stdout: bool) -> Option<SdkTracerProvider> {
    // Colours only on a terminal: logs sent to a file stay plain text.
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
        .with_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()));
    let provider = trace_stdout.then(|| {
        SdkTracerProvider::builder()
            .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
            .build()
    });
    let otel = provider.as_ref().map(|p| {
        // W3C `traceparent` / `tracestate`: what postpone stores with each job.
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("order_timeout"))
            .with_filter(EnvFilter::new("info,postpone=debug"))
    });
    tracing_subscriber::registry().with(fmt).with(otel).init();
    provider
}
