//! Capturing tracing events with their own fields (not their spans'): what a log filtered at `warn`
//! still shows, for tests of what postpone logs.
//!
//! ```ignore
//! let (log, _guard) = Events::capture(Level::WARN);
//! // ... run a worker on this thread (a current-thread runtime) ...
//! let warnings = log.containing("lease lost");
//! assert_eq!(warnings[0].field("job_id"), Some("order:42"));
//! ```
//!
//! The subscriber is this thread's default: events of tasks on other threads are not captured, so a
//! test that captures runs its worker on a current-thread runtime.
// Each test binary uses only part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// One event, as logged.
#[derive(Debug, Clone)]
pub struct Captured {
    pub level: Level,
    pub message: String,
    /// The event's own fields (`message` excluded), formatted with `Debug` (strings unquoted).
    pub fields: BTreeMap<String, String>,
}

impl Captured {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// The events captured so far.
#[derive(Debug, Clone, Default)]
pub struct Events(Arc<Mutex<Vec<Captured>>>);

impl Events {
    /// Captures the events at `level` or above logged on this thread, until the guard is dropped.
    pub fn capture(level: Level) -> (Self, DefaultGuard) {
        let events = Events::default();
        let layer = Capture(events.clone()).with_filter(LevelFilter::from_level(level));
        let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        // Another test thread may have cached a callsite's interest before this subscriber existed.
        tracing::callsite::rebuild_interest_cache();
        (events, guard)
    }

    pub fn all(&self) -> Vec<Captured> {
        self.0.lock().unwrap().clone()
    }

    /// The events whose message contains `text`.
    pub fn containing(&self, text: &str) -> Vec<Captured> {
        self.all()
            .into_iter()
            .filter(|e| e.message.contains(text))
            .collect()
    }
}

struct Capture(Events);

impl<S: Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut visitor = Fields::default();
        event.record(&mut visitor);
        let message = visitor.fields.remove("message").unwrap_or_default();
        self.0 .0.lock().unwrap().push(Captured {
            level: *event.metadata().level(),
            message,
            fields: visitor.fields,
        });
    }
}

#[derive(Default)]
struct Fields {
    fields: BTreeMap<String, String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.fields
            .insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.fields
            .insert(field.name().to_owned(), format!("{value:?}"));
    }
}
