//! `#[derive(Job)]` for [postpone](https://docs.rs/postpone): binds a serde type to a topic, and
//! optionally to a retry schedule, a lease, a timeout and a partition count, all checked at compile
//! time.
//!
//! Use it through `postpone::Job` (the `macros` feature, on by default); the generated code names only
//! `::postpone` paths. This crate is a thin shim: the expansion lives in plain functions over
//! `proc_macro2` tokens so that it can be unit-tested.

use proc_macro::TokenStream;
use syn::parse_macro_input;

mod attr;
mod duration;
mod errors;
mod job;
mod topic;

/// Derives `postpone::Job` from a `#[job(...)]` attribute.
///
/// ```text
/// #[derive(Serialize, Deserialize, postpone::Job)]
/// #[job(topic = "orders.close", retry = ["0", "0", "2m", "10m"], lease = "30s", timeout = "5m")]
/// struct CloseOrder { order_id: u64 }
/// ```
///
/// - `topic` (required): a string matching `[A-Za-z0-9_.-]{1,128}`.
/// - `retry`: the retry schedule, delays indexed by attempt number: 2 to 1001 durations, each at most a
///   year. Slot 1 is the delay before the first attempt, slot `n` the delay before attempt `n`; slot 0
///   is never read and must be `"0"` (a non-zero slot 0 is refused, since it usually means the next key).
/// - `retry_delays`: the retry schedule as the delays between failures: `["1m", "5m", "30m"]` runs the
///   first attempt at the due time and retries 1, 5 and 30 minutes after successive failures (four
///   attempts); the same as `retry = ["0", "0", "1m", "5m", "30m"]`. Give `retry` or `retry_delays`, not
///   both.
/// - `lease`: how long a worker holds a claimed job unless renewed; more than 0, at most a day.
/// - `timeout`: how long one attempt may run; more than 0.
/// - `partitions`: how many partitions the topic is stored in; an integer from 1 to 1024 (default 1).
///
/// Durations are strings: `"0"`, `"500ms"`, `"30s"`, `"5m"`, `"2h"`, `"1d"` (`0` may also be written
/// bare in `retry`). The type must not be generic: a job type is bound to one topic.
#[proc_macro_derive(Job, attributes(job))]
pub fn derive_job(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as syn::DeriveInput);
    job::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
