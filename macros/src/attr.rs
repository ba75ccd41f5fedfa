//! The `#[job(...)]` attribute: parsing and compile-time checks.
//!
//! Every error spans the attribute, key or literal at fault and says what to write instead.

use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Ident, Lit, LitInt, LitStr, Meta, Token};

use crate::duration::{format_millis, lit_millis, parse_millis, DAY_MS, FORMS};
use crate::errors::Errors;
use crate::topic::topic_problem;

/// Most slots a retry schedule may hold (`postpone::schedule::MAX_SLOTS`).
pub(crate) const MAX_SLOTS: usize = 1001;
/// Most partitions a topic may have (`postpone::MAX_PARTITIONS`).
const MAX_PARTITIONS: u16 = 1024;

/// The checked contents of `#[job(...)]`; durations in milliseconds.
pub(crate) struct JobAttr {
    /// The topic, a valid topic name.
    pub(crate) topic: LitStr,
    /// The retry schedule's slots, from `retry` (slot 0 is 0) or `retry_delays` (two 0 slots first): 2 to
    /// 1001 of them, each at most a year.
    pub(crate) retry: Option<Vec<u64>>,
    /// The lease: more than 0, at most a day.
    pub(crate) lease: Option<u64>,
    /// The timeout: more than 0.
    pub(crate) timeout: Option<u64>,
    /// The partition count: 1 to 1024.
    pub(crate) partitions: Option<u16>,
    /// The rate limit: (jobs, per ms), both at least 1.
    pub(crate) rate: Option<(u32, u64)>,
    /// Most jobs running at once across every worker: at least 1.
    pub(crate) max_running: Option<u32>,
    /// Unique by these fields for this window (ms, more than 0): both or neither.
    pub(crate) unique: Option<(Vec<LitStr>, u64)>,
    /// The field whose value is the job's key for fairness (`key = "customer_id"`): a name, not empty;
    /// whether the struct has it is checked with the fields (`crate::job`).
    pub(crate) key: Option<LitStr>,
    /// Most jobs of one key running at once across every worker (`key_max_running = 2`): at least 1.
    /// Allowed without `key`: an enqueue may give the key (`.key(..)`).
    pub(crate) key_max_running: Option<u32>,
    /// The rate limit of each key (`key_rate = "10/s"`): (jobs, per ms), both at least 1. Allowed
    /// without `key`, as `key_max_running`.
    pub(crate) key_rate: Option<(u32, u64)>,
    /// What the handler returns (`output = Type`).
    pub(crate) output: Option<syn::Type>,
    /// Keep finished jobs: (max age ms, max count), from `keep` and `keep_last` (either one; the other
    /// takes its default).
    pub(crate) keep: Option<(u64, u64)>,
}

/// How long finished jobs are kept when only `keep_last` is given: 7 days.
const DEFAULT_KEEP_MS: u64 = 7 * DAY_MS;
/// How many finished jobs are kept when only `keep` is given.
const DEFAULT_KEEP_LAST: u64 = 10_000;

/// A key `#[job(...)]` knows.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Topic,
    Retry,
    RetryDelays,
    Lease,
    Timeout,
    Partitions,
    Rate,
    MaxRunning,
    Unique,
    UniqueFor,
    /// `key = "customer_id"`: the job's key for fairness.
    Fairness,
    /// `key_max_running = 2`: most jobs of one key running at once.
    FairnessMaxRunning,
    /// `key_rate = "10/s"`: the rate limit of each key.
    FairnessRate,
    Output,
    Keep,
    KeepLast,
}

impl Key {
    fn from_ident(ident: &Ident) -> Option<Self> {
        Some(match ident.unraw().to_string().as_str() {
            "topic" => Key::Topic,
            "retry" => Key::Retry,
            "retry_delays" => Key::RetryDelays,
            "lease" => Key::Lease,
            "timeout" => Key::Timeout,
            "partitions" => Key::Partitions,
            "rate" => Key::Rate,
            "max_running" => Key::MaxRunning,
            "unique" => Key::Unique,
            "unique_for" => Key::UniqueFor,
            "key" => Key::Fairness,
            "key_max_running" => Key::FairnessMaxRunning,
            "key_rate" => Key::FairnessRate,
            "output" => Key::Output,
            "keep" => Key::Keep,
            "keep_last" => Key::KeepLast,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Key::Topic => "topic",
            Key::Retry => "retry",
            Key::RetryDelays => "retry_delays",
            Key::Lease => "lease",
            Key::Timeout => "timeout",
            Key::Partitions => "partitions",
            Key::Rate => "rate",
            Key::MaxRunning => "max_running",
            Key::Unique => "unique",
            Key::UniqueFor => "unique_for",
            Key::Fairness => "key",
            Key::FairnessMaxRunning => "key_max_running",
            Key::FairnessRate => "key_rate",
            Key::Output => "output",
            Key::Keep => "keep",
            Key::KeepLast => "keep_last",
        }
    }

    /// How to write this key, for error messages.
    pub(crate) fn example(self) -> &'static str {
        match self {
            Key::Topic => r#"`topic = "orders.close"`"#,
            Key::Retry => r#"`retry = ["0", "0", "2m", "10m"]`"#,
            Key::RetryDelays => r#"`retry_delays = ["1m", "5m", "30m"]`"#,
            Key::Lease => r#"`lease = "30s"`"#,
            Key::Timeout => r#"`timeout = "5m"`"#,
            Key::Partitions => "`partitions = 4`",
            Key::Rate => r#"`rate = "100/s"`"#,
            Key::MaxRunning => "`max_running = 5`",
            Key::Unique => r#"`unique = ["product_id"], unique_for = "10m"`"#,
            Key::UniqueFor => r#"`unique_for = "10m"`"#,
            Key::Fairness => r#"`key = "customer_id"`"#,
            Key::FairnessMaxRunning => "`key_max_running = 2`",
            Key::FairnessRate => r#"`key_rate = "10/s"`"#,
            Key::Output => "`output = InvoicePdf`",
            Key::Keep => r#"`keep = "1d"`"#,
            Key::KeepLast => "`keep_last = 1000`",
        }
    }
}

const KNOWN_KEYS: &str =
    "`topic`, `retry`, `retry_delays`, `lease`, `timeout`, `partitions`, `rate`, `max_running`, `unique`, \
     `unique_for`, `key`, `key_max_running`, `key_rate`, `output`, `keep` or `keep_last`";

/// One `key = value` inside `#[job(...)]`.
struct Setting {
    ident: Ident,
    key: Key,
    value: Expr,
}

impl Parse for Setting {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let ident = input
            .call(Ident::parse_any)
            .map_err(|err| syn::Error::new(err.span(), format!("expected a key: {KNOWN_KEYS}")))?;
        let Some(key) = Key::from_ident(&ident) else {
            return Err(syn::Error::new(
                ident.span(),
                format!("unknown key `{ident}` in #[job]: expected {KNOWN_KEYS}"),
            ));
        };
        if !input.peek(Token![=]) {
            return Err(syn::Error::new(
                ident.span(),
                format!("expected `=` after `{ident}`: write {}", key.example()),
            ));
        }
        input.parse::<Token![=]>()?;
        // A type is not an expression (`Vec<u8>`): `output` takes a type, kept as its tokens.
        let value = match key {
            Key::Output => Expr::Verbatim(quote::ToTokens::to_token_stream(
                &input.parse::<syn::Type>()?,
            )),
            _ => input.parse()?,
        };
        Ok(Setting { ident, key, value })
    }
}

/// Reads the one `#[job(...)]` among `attrs`, the attributes of the type `ident`.
pub(crate) fn parse_job_attrs(attrs: &[Attribute], ident: &Ident) -> syn::Result<JobAttr> {
    let mut job_attrs = attrs.iter().filter(|attr| attr.path().is_ident("job"));
    let Some(first) = job_attrs.next() else {
        return Err(syn::Error::new(
            ident.span(),
            format!("`{ident}` has no topic: add `#[job(topic = \"...\")]` under `#[derive(Job)]`"),
        ));
    };
    let mut errors = Errors::default();
    let parsed = errors.keep(parse_job_attr(first));
    for extra in job_attrs {
        errors.push(syn::Error::new_spanned(
            extra,
            "more than one #[job] attribute: put topic, retry (or retry_delays), lease, timeout and partitions in \
             one #[job(...)]",
        ));
    }
    errors.check()?;
    parsed.ok_or_else(|| missing_topic(first))
}

fn missing_topic(attr: &Attribute) -> syn::Error {
    syn::Error::new_spanned(
        attr,
        format!("#[job] needs a topic: add {}", Key::Topic.example()),
    )
}

fn parse_job_attr(attr: &Attribute) -> syn::Result<JobAttr> {
    let Meta::List(list) = &attr.meta else {
        return Err(syn::Error::new_spanned(
            attr,
            "expected a list of settings: write `#[job(topic = \"orders.close\")]`",
        ));
    };
    let settings = list.parse_args_with(Punctuated::<Setting, Token![,]>::parse_terminated)?;

    let mut errors = Errors::default();
    let mut seen = Vec::new();
    let (mut topic, mut retry, mut lease, mut timeout, mut partitions) =
        (None, None, None, None, None);
    let (mut rate, mut max_running, mut unique, mut unique_for) = (None, None, None, None);
    let (mut key_field, mut key_max_running, mut key_rate) = (None, None, None);
    let (mut output, mut keep, mut keep_last) = (None, None, None);
    let mut schedule_key: Option<&Ident> = None;
    let mut key_limit_keys: Vec<&Ident> = Vec::new();
    for Setting { ident, key, value } in &settings {
        if seen.contains(key) {
            errors.push(syn::Error::new(
                ident.span(),
                format!("duplicate key `{ident}` in #[job]: give it once"),
            ));
            continue;
        }
        seen.push(*key);
        if matches!(key, Key::Retry | Key::RetryDelays) {
            if let Some(first) = schedule_key {
                errors.push(syn::Error::new(
                    ident.span(),
                    format!(
                        "`{ident}` and `{first}` both set the retry schedule: give one. `retry` lists the \
                         delay before each attempt (slot 0 never read); `retry_delays` lists the delays \
                         between failures"
                    ),
                ));
                continue;
            }
            schedule_key = Some(ident);
        }
        if matches!(key, Key::FairnessMaxRunning | Key::FairnessRate) {
            key_limit_keys.push(ident);
        }
        match key {
            Key::Topic => topic = errors.keep(topic_value(value)),
            Key::Retry => retry = errors.keep(retry::retry_value(value)),
            Key::RetryDelays => retry = errors.keep(retry::retry_delays_value(value)),
            Key::Lease => lease = errors.keep(lease_value(value)),
            Key::Timeout => timeout = errors.keep(timeout_value(value)),
            Key::Partitions => partitions = errors.keep(partitions_value(value)),
            Key::Rate => rate = errors.keep(flow::rate_value(value, *key)),
            Key::MaxRunning => max_running = errors.keep(flow::max_running_value(value, *key)),
            Key::Unique => unique = errors.keep(unique::unique_value(value)),
            Key::UniqueFor => unique_for = errors.keep(unique::unique_for_value(value)),
            Key::Fairness => key_field = errors.keep(key::key_value(value)),
            Key::FairnessMaxRunning => {
                key_max_running = errors.keep(flow::max_running_value(value, *key))
            }
            Key::FairnessRate => key_rate = errors.keep(flow::rate_value(value, *key)),
            Key::Output => {
                output = errors.keep(syn::parse2::<syn::Type>(quote::ToTokens::to_token_stream(
                    value,
                )))
            }
            Key::Keep => keep = errors.keep(keep_value(value)),
            Key::KeepLast => keep_last = errors.keep(keep_last_value(value)),
        }
    }
    if !seen.contains(&Key::Topic) {
        errors.push(missing_topic(attr));
    }
    if seen.contains(&Key::Unique) != seen.contains(&Key::UniqueFor) {
        errors.push(syn::Error::new_spanned(
            attr,
            format!(
                "unique and unique_for go together: write {}",
                Key::Unique.example()
            ),
        ));
    }
    errors.check()?;
    let topic = topic.ok_or_else(|| missing_topic(attr))?;
    Ok(JobAttr {
        topic,
        retry,
        lease,
        timeout,
        partitions,
        rate,
        max_running,
        unique: unique.zip(unique_for),
        key: key_field,
        key_max_running,
        key_rate,
        output,
        keep: match (keep, keep_last) {
            (None, None) => None,
            (age, count) => Some((
                age.unwrap_or(DEFAULT_KEEP_MS),
                count.unwrap_or(DEFAULT_KEEP_LAST),
            )),
        },
    })
}

/// `keep = "1d"`: how long finished jobs are kept, more than 0.
fn keep_value(value: &Expr) -> syn::Result<u64> {
    let ms = duration_value(value, Key::Keep)?;
    if ms == 0 {
        return Err(syn::Error::new_spanned(
            value,
            "keep must be longer than 0: how long finished jobs are kept, e.g. `keep = \"1d\"`; leave \
             it out to keep none",
        ));
    }
    Ok(ms)
}

/// `keep_last = 1000`: how many finished jobs are kept, at least 1.
fn keep_last_value(value: &Expr) -> syn::Result<u64> {
    let lit = int_literal(value, Key::KeepLast)?;
    match lit.base10_parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(syn::Error::new(
            lit.span(),
            "keep_last must be at least 1: how many finished jobs are kept; leave it out to keep none",
        )),
    }
}

/// Looks through the invisible groups `macro_rules!` puts around `$value:expr`.
pub(crate) fn unwrap_group(mut expr: &Expr) -> &Expr {
    while let Expr::Group(group) = expr {
        expr = &group.expr;
    }
    expr
}

/// The string literal `value` must be for `key`, or an error showing how to write it.
pub(crate) fn str_literal(value: &Expr, key: Key) -> syn::Result<&LitStr> {
    match unwrap_group(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => Ok(lit),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "{} must be a string literal: write {}",
                key.name(),
                key.example()
            ),
        )),
    }
}

/// The integer literal `value` must be for `key`, or an error showing how to write it.
pub(crate) fn int_literal(value: &Expr, key: Key) -> syn::Result<&syn::LitInt> {
    match unwrap_group(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(lit), ..
        }) => Ok(lit),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "{} must be an integer literal: write {}",
                key.name(),
                key.example()
            ),
        )),
    }
}

fn topic_value(value: &Expr) -> syn::Result<LitStr> {
    let lit = str_literal(value, Key::Topic)?;
    let topic = lit.value();
    match topic_problem(&topic) {
        None => Ok(lit.clone()),
        Some(problem) => {
            let shown = if topic.len() <= 64 {
                format!(" {topic:?}")
            } else {
                String::new()
            };
            Err(syn::Error::new(
                lit.span(),
                format!(
                    "invalid topic{shown}: {problem}; write e.g. {}",
                    Key::Topic.example()
                ),
            ))
        }
    }
}

fn lease_value(value: &Expr) -> syn::Result<u64> {
    let ms = duration_value(value, Key::Lease)?;
    if ms == 0 {
        return Err(syn::Error::new_spanned(
            value,
            "lease must be longer than 0: a worker holds the job that long (renewed by heartbeat); \
             write e.g. `lease = \"30s\"`",
        ));
    }
    if ms > DAY_MS {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "lease {:?} is longer than a day: heartbeats renew the lease while the handler runs, so keep \
                 it short, e.g. `lease = \"30s\"`",
                format_millis(ms)
            ),
        ));
    }
    Ok(ms)
}

fn timeout_value(value: &Expr) -> syn::Result<u64> {
    let ms = duration_value(value, Key::Timeout)?;
    if ms == 0 {
        return Err(syn::Error::new_spanned(
            value,
            "timeout must be longer than 0: leave `timeout` out for no limit, or write e.g. `timeout = \"5m\"`",
        ));
    }
    Ok(ms)
}

/// A partition count: an integer literal from 1 to 1024.
fn partitions_value(value: &Expr) -> syn::Result<u16> {
    let lit = int_literal(value, Key::Partitions)?;
    match lit.base10_parse::<u64>() {
        Ok(n) if (1..=u64::from(MAX_PARTITIONS)).contains(&n) => Ok(n as u16),
        Ok(0) => Err(syn::Error::new(
            lit.span(),
            "partitions must be at least 1: a topic is stored in 1 to 1024 partitions; leave \
             `partitions` out for one",
        )),
        _ => Err(syn::Error::new(
            lit.span(),
            format!(
                "partitions is {}, and at most {MAX_PARTITIONS} are allowed",
                lit.base10_digits()
            ),
        )),
    }
}

/// A duration: a string literal such as `"30s"`, or the integer literal `0`.
pub(crate) fn duration_value(value: &Expr, key: Key) -> syn::Result<u64> {
    match unwrap_group(value) {
        Expr::Lit(syn::ExprLit {
            lit: Lit::Str(lit), ..
        }) => lit_millis(lit, key.name()),
        Expr::Lit(syn::ExprLit {
            lit: Lit::Int(lit), ..
        }) => int_millis(lit, key),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "expected a duration string in {}, such as \"30s\": {FORMS}",
                key.name()
            ),
        )),
    }
}

/// `0` is a duration; `30s` (an integer with a suffix) is a duration missing its quotes.
fn int_millis(lit: &LitInt, key: Key) -> syn::Result<u64> {
    let (digits, suffix) = (lit.base10_digits(), lit.suffix());
    let err = |msg: String| Err(syn::Error::new(lit.span(), msg));
    if suffix.is_empty() {
        return match digits.parse::<u64>() {
            Ok(0) => Ok(0),
            _ => err(format!(
                "duration {digits} in {} has no unit: write \"{digits}ms\", \"{digits}s\", \"{digits}m\", \
                 \"{digits}h\" or \"{digits}d\" (only 0 goes without one)",
                key.name()
            )),
        };
    }
    let text = format!("{digits}{suffix}");
    if parse_millis(&text).is_ok() {
        return err(format!("durations are strings: write \"{text}\" in quotes"));
    }
    err(format!(
        "unparsable duration {text} in {}: use a number and a unit: {FORMS}",
        key.name()
    ))
}

mod flow;
mod key;
mod retry;
mod unique;

#[cfg(test)]
mod tests;
