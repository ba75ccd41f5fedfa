//! Spans of the queue, and, with the `opentelemetry` feature, the W3C trace context carried from an
//! enqueue to the handler in the job's metadata.
//!
//! An enqueue stores the context of its span (`enqueue`, at DEBUG, a child of the caller's span; the
//! caller's own span when DEBUG is off for postpone) through the global propagator
//! (`opentelemetry::global::set_text_map_propagator`, usually `TraceContextPropagator`: the
//! `traceparent` and `tracestate` entries). The handler's span (`job`, at INFO) then links to that
//! context ([`TraceParent::Link`], the default) or is its child ([`TraceParent::Child`]). Both carry the
//! OpenTelemetry messaging attributes: `messaging.system` = `postpone`, `messaging.destination.name` (the
//! topic), `messaging.message.id` (the job id), `messaging.operation.type`, and `attempt`. They are set
//! on the OpenTelemetry span only (not as `tracing` fields), so that logs stay as they were; the spans'
//! `otel.name` (`send <topic>`, `process <topic>`) and `otel.kind` (producer, consumer) are fields.

use tracing::Span;

use crate::meta::Meta;

/// How a handler's span relates to the span that enqueued its job (the `opentelemetry` feature).
#[cfg(feature = "opentelemetry")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TraceParent {
    /// The handler's span starts a trace of its own, with a link to the enqueue's span: what the
    /// OpenTelemetry messaging conventions advise, since a job may run long after (and many times
    /// after) the request that enqueued it ended.
    #[default]
    Link,
    /// The handler's span is a child of the enqueue's span: one trace from the request to the handler.
    Child,
}

/// The span of an enqueue of `jobs` jobs to `topic` (DEBUG).
pub(crate) fn enqueue_span(topic: &'static str, jobs: usize) -> Span {
    #[cfg(feature = "opentelemetry")]
    {
        let span = tracing::debug_span!(
            "enqueue",
            topic,
            jobs,
            otel.name = %format_args!("send {topic}"),
            otel.kind = "producer",
        );
        otel::messaging(&span, topic, None, "send");
        otel::attribute(&span, "messaging.batch.message_count", jobs as i64);
        span
    }
    #[cfg(not(feature = "opentelemetry"))]
    tracing::debug_span!("enqueue", topic, jobs)
}

/// Notes the id of a single enqueued job on its enqueue span.
pub(crate) fn enqueued_id(span: &Span, id: &str) {
    #[cfg(feature = "opentelemetry")]
    otel::attribute(span, "messaging.message.id", id.to_owned());
    #[cfg(not(feature = "opentelemetry"))]
    let _ = (span, id);
}

/// The trace context to store with the jobs of an enqueue, taken in `span` (empty without the
/// `opentelemetry` feature, or when there is no valid context to carry).
pub(crate) fn context_meta(span: &Span) -> Meta {
    #[cfg(feature = "opentelemetry")]
    return span.in_scope(otel::inject_current);
    #[cfg(not(feature = "opentelemetry"))]
    {
        let _ = span;
        Meta::new()
    }
}

/// The span of one run of a job (INFO).
pub(crate) fn job_span(
    topic: &'static str,
    partition: Option<u16>,
    id: &str,
    attempt: u32,
) -> Span {
    #[cfg(feature = "opentelemetry")]
    {
        let span = tracing::info_span!(
            "job",
            topic,
            partition,
            job_id = %id,
            // As i64: an OpenTelemetry integer attribute (a u32 field is exported as a string).
            attempt = i64::from(attempt),
            otel.name = %format_args!("process {topic}"),
            otel.kind = "consumer",
        );
        otel::messaging(&span, topic, partition, "process");
        otel::attribute(&span, "messaging.message.id", id.to_owned());
        span
    }
    #[cfg(not(feature = "opentelemetry"))]
    tracing::info_span!("job", topic, partition, job_id = %id, attempt)
}

/// Ties a job's span to the context its enqueue stored, if any.
#[cfg(feature = "opentelemetry")]
pub(crate) fn follow(span: &Span, meta: &Meta, parent: TraceParent) {
    otel::follow(span, meta, parent)
}

#[cfg(feature = "opentelemetry")]
mod otel {
    use opentelemetry::propagation::{Extractor, Injector};
    use opentelemetry::trace::TraceContextExt;
    use opentelemetry::Value;
    use tracing::Span;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    use super::TraceParent;
    use crate::meta::{validate_entry, Meta};

    struct Inject<'a>(&'a mut Meta);

    impl Injector for Inject<'_> {
        fn set(&mut self, key: &str, value: String) {
            // A propagator's entry that breaks the metadata limits is left out, not an error.
            if validate_entry(key, &value).is_ok() {
                self.0.insert(key.to_owned(), value);
            }
        }
    }

    struct Extract<'a>(&'a Meta);

    impl Extractor for Extract<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            self.0.get(key).map(String::as_str)
        }

        fn keys(&self) -> Vec<&str> {
            self.0.keys().map(String::as_str).collect()
        }
    }

    /// The current span's context, through the global propagator.
    pub(super) fn inject_current() -> Meta {
        let cx = Span::current().context();
        let mut meta = Meta::new();
        if cx.span().span_context().is_valid() {
            opentelemetry::global::get_text_map_propagator(|p| {
                p.inject_context(&cx, &mut Inject(&mut meta))
            });
        }
        meta
    }

    /// An attribute of the OpenTelemetry span behind `span` (nothing when it has none).
    pub(super) fn attribute(span: &Span, key: &'static str, value: impl Into<Value>) {
        if !span.is_disabled() {
            span.set_attribute(key, value);
        }
    }

    /// The messaging attributes of a span about `topic`.
    pub(super) fn messaging(
        span: &Span,
        topic: &'static str,
        partition: Option<u16>,
        operation: &'static str,
    ) {
        if span.is_disabled() {
            return;
        }
        span.set_attribute("messaging.system", "postpone");
        span.set_attribute("messaging.destination.name", topic);
        span.set_attribute("messaging.operation.type", operation);
        if let Some(p) = partition {
            span.set_attribute("messaging.destination.partition.id", p.to_string());
        }
    }

    pub(super) fn follow(span: &Span, meta: &Meta, parent: TraceParent) {
        if meta.is_empty() {
            return;
        }
        let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&Extract(meta)));
        let remote = cx.span().span_context().clone();
        if !remote.is_valid() {
            return;
        }
        match parent {
            TraceParent::Child => {
                let _ = span.set_parent(cx);
            }
            TraceParent::Link => span.add_link(remote),
        }
    }
}
