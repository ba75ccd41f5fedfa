//! Unique jobs and debounce: a key on an enqueue, checked and set atomically in the store (see
//! [`JobStore::enqueue_keyed`](crate::store::JobStore::enqueue_keyed)).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::store::{Keyed, UniqueStates};
use crate::time::millis;

/// Keeps a job unique by key for a window: while the key's last job, created within `window` of now, is
/// in one of the chosen states, another enqueue of the key creates nothing and says so
/// ([`EnqueueStatus::Duplicate`](crate::EnqueueStatus::Duplicate) naming that job, or
/// [`EnqueueStatus::Throttled`](crate::EnqueueStatus::Throttled) when it has finished).
///
/// The states (default all three): scheduled, running, finished (done, cancelled or dead). So:
/// - "at most one reindex of this product per 10 minutes, even after the last one finished"
///   (throttle): `Unique::new(key, 10 min)`;
/// - "no second pending reindex, but one may be queued while another runs":
///   `.states(UniqueStates::SCHEDULED)`;
/// - "never two at once": `.states(UniqueStates::SCHEDULED.and(UniqueStates::RUNNING))` with a window
///   as long as a job may wait and run.
///
/// ```
/// # use postpone::{Client, Job, Unique, EnqueueStatus};
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "search.reindex")]
/// struct Reindex { product_id: u64 }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> postpone::Result<()> {
/// use std::time::Duration;
/// let client = Client::memory();
/// let ten_minutes = Unique::new("product:42", Duration::from_secs(600));
/// let first = client.enqueue(Reindex { product_id: 42 }).unique(ten_minutes.clone()).await?;
/// let again = client.enqueue(Reindex { product_id: 42 }).unique(ten_minutes).await?;
/// assert_eq!(first.status, EnqueueStatus::Created);
/// assert_eq!(again.status, EnqueueStatus::Duplicate);
/// assert_eq!(again.id, first.id); // the job that holds the key
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Unique {
    key: String,
    window: Duration,
    states: UniqueStates,
}

impl Unique {
    /// Unique by `key` (a business key, e.g. `product:42`; 1 to 512 bytes, no control characters) for
    /// `window` from each created job's enqueue, in every state.
    pub fn new(key: impl Into<String>, window: Duration) -> Self {
        Unique {
            key: key.into(),
            window,
            states: UniqueStates::ALL,
        }
    }

    /// The states of the key's last job in which an enqueue is refused (within the window).
    pub fn states(mut self, states: UniqueStates) -> Self {
        self.states = states;
        self
    }
}

/// Debounces a job by key: each enqueue of the key while its pending job is still scheduled pushes that
/// job to `quiet` from now (and, with [`replace_payload`](Self::replace_payload), gives it the new
/// payload), so that it runs once, `quiet` after the last enqueue of a burst; with
/// [`max_wait`](Self::max_wait), never later than that after the burst's first enqueue. Once the
/// pending job has started, the next enqueue starts a new one.
///
/// The job is due `quiet` after the enqueue: a debounced enqueue takes no other time.
///
/// ```
/// # use postpone::{Client, Debounce, EnqueueStatus, Job};
/// # use serde::{Deserialize, Serialize};
/// #[derive(Serialize, Deserialize, Job)]
/// #[job(topic = "search.reindex")]
/// struct Reindex { product_id: u64 }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> postpone::Result<()> {
/// use std::time::Duration;
/// let client = Client::memory();
/// let quiet = Debounce::new("product:42", Duration::from_secs(5)).max_wait(Duration::from_secs(60));
/// let first = client.enqueue(Reindex { product_id: 42 }).debounce(quiet.clone()).await?;
/// let edit = client.enqueue(Reindex { product_id: 42 }).debounce(quiet).await?;
/// assert_eq!(first.status, EnqueueStatus::Created);
/// assert_eq!(edit.status, EnqueueStatus::Debounced);
/// assert_eq!(edit.id, first.id); // the one pending job, now due 5 s after this edit
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Debounce {
    key: String,
    quiet: Duration,
    max_wait: Option<Duration>,
    replace: bool,
}

impl Debounce {
    /// Debounce by `key` (1 to 512 bytes, no control characters) with a quiet period of `quiet`.
    pub fn new(key: impl Into<String>, quiet: Duration) -> Self {
        Debounce {
            key: key.into(),
            quiet,
            max_wait: None,
            replace: false,
        }
    }

    /// The longest a pending job is pushed back, from the first enqueue of its burst.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// A pushed job takes the payload (and metadata) of the latest enqueue, not the first's.
    pub fn replace_payload(mut self) -> Self {
        self.replace = true;
        self
    }

    /// The quiet period.
    pub(crate) fn quiet(&self) -> Duration {
        self.quiet
    }
}

/// A key checked and turned into the store's form, with the metadata entry that shows it to operators
/// (under a key of postpone's own, `postpone.unique` or `postpone.debounce`, so that it never replaces
/// an entry of the caller's).
pub(crate) fn to_keyed(topic: &str, keyed: KeyedOption) -> Result<(Keyed, String, String)> {
    let bad = |why: &str| Error::InvalidConfig {
        reason: format!("a job of topic {topic:?}: {why}"),
    };
    let check_key = |key: &str| {
        crate::validate::validate_id(key)
            .map_err(|_| bad("its key must be 1 to 512 bytes without control characters"))
    };
    match keyed {
        KeyedOption::Unique(u) => {
            check_key(&u.key)?;
            if u.window.is_zero() {
                return Err(bad("a unique window must be longer than zero"));
            }
            let shown = format!(
                "{} for {} ({})",
                u.key,
                crate::time::human_duration(u.window),
                states_text(u.states)
            );
            let keyed = Keyed::Unique {
                key: u.key,
                window_ms: millis(u.window),
                states: u.states,
            };
            Ok((keyed, crate::meta::UNIQUE_KEY.to_owned(), shown))
        }
        KeyedOption::Debounce(d) => {
            check_key(&d.key)?;
            let mut shown = format!("{} quiet {}", d.key, crate::time::human_duration(d.quiet));
            if let Some(max) = d.max_wait {
                shown.push_str(&format!(" max {}", crate::time::human_duration(max)));
            }
            let keyed = Keyed::Debounce {
                key: d.key,
                quiet_ms: millis(d.quiet),
                max_wait_ms: d.max_wait.map_or(0, |m| millis(m).max(1)),
                replace: d.replace,
            };
            Ok((keyed, crate::meta::DEBOUNCE_KEY.to_owned(), shown))
        }
    }
}

fn states_text(states: UniqueStates) -> String {
    let names = [
        (UniqueStates::SCHEDULED, "scheduled"),
        (UniqueStates::RUNNING, "running"),
        (UniqueStates::FINISHED, "finished"),
    ];
    let held: Vec<&str> = names
        .iter()
        .filter(|(s, _)| states.contains(*s))
        .map(|(_, n)| *n)
        .collect();
    if held.is_empty() {
        "no state".to_owned()
    } else {
        held.join(", ")
    }
}

/// A key set on an enqueue.
#[derive(Debug, Clone)]
pub(crate) enum KeyedOption {
    Unique(Unique),
    Debounce(Debounce),
}
