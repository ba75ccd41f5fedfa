//! `retry = [...]` (delays indexed by attempt) and `retry_delays = [...]` (delays between failures):
//! the two ways to write a retry schedule, and why a non-zero slot 0 is refused.

use syn::Expr;

use super::{duration_value, unwrap_group, Key, MAX_SLOTS};
use crate::duration::{format_millis, YEAR_MS};
use crate::errors::Errors;

/// `retry = ["0", "0", "2m", "10m"]`: slot `n` is the delay before attempt `n`; slot 0 is never read and
/// must be 0.
pub(super) fn retry_value(value: &Expr) -> syn::Result<Vec<u64>> {
    let Expr::Array(array) = unwrap_group(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "retry must be an array of durations: write {}",
                Key::Retry.example()
            ),
        ));
    };
    let mut errors = Errors::default();
    let mut slots = Vec::with_capacity(array.elems.len());
    for (i, slot) in array.elems.iter().enumerate() {
        match errors.keep(duration_value(slot, Key::Retry)) {
            Some(ms) if ms > YEAR_MS => errors.push(syn::Error::new_spanned(
                slot,
                format!(
                    "retry slot {i} is {:?}, longer than a year: the longest delay is \"365d\"",
                    format_millis(ms)
                ),
            )),
            Some(ms) => slots.push(ms),
            None => {}
        }
    }
    let len = array.elems.len();
    let slot0_set = slots.first().is_some_and(|ms| *ms != 0) && slots.len() == len;
    if let (true, Some(slot0)) = (slot0_set, array.elems.first()) {
        errors.push(syn::Error::new_spanned(slot0, slot0_message(&slots)));
    } else if len < 2 {
        errors.push(syn::Error::new_spanned(
            array,
            format!(
                "retry has {len} slot(s) and needs at least 2: slot 0 is never read and slot 1 is the \
                 delay before the first attempt; write e.g. `retry = [\"0\", \"0\", \"1m\"]` for two attempts"
            ),
        ));
    } else if len > MAX_SLOTS {
        errors.push(syn::Error::new_spanned(
            array,
            format!(
                "retry has {len} slots; at most {MAX_SLOTS} are allowed ({} attempts)",
                MAX_SLOTS - 1
            ),
        ));
    }
    errors.check()?;
    Ok(slots)
}

/// Why a non-zero slot 0 is refused, and how to write what was probably meant: delays between failures,
/// as Sidekiq or BullMQ read a list of delays.
fn slot0_message(slots: &[u64]) -> String {
    let quoted = slots
        .iter()
        .map(|ms| format!("{:?}", format_millis(*ms)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut plain: Vec<String> = slots.iter().map(|ms| format_millis(*ms)).collect();
    let last = plain.pop().unwrap_or_default();
    let plain = if plain.is_empty() {
        last
    } else {
        format!("{} and {last}", plain.join(", "))
    };
    let reading = match slots.get(1) {
        Some(&first) => format!(
            "so this schedule runs the first attempt {} after its due time and allows {} attempt(s)",
            format_millis(first),
            slots.len() - 1
        ),
        None => "so this schedule allows no attempt at all".to_owned(),
    };
    format!(
        "retry slot 0 is {:?}, but slot 0 is never read: `retry` is indexed by attempt (slot 1 is the delay \
         before the first attempt, slot n the delay before attempt n), {reading}. For retries {plain} after \
         successive failures, write `retry_delays = [{quoted}]` (the same as `retry = [\"0\", \"0\", \
         {quoted}]`); otherwise make slot 0 \"0\"",
        format_millis(slots[0]),
    )
}

/// `retry_delays = ["1m", "5m", "30m"]`: the delays between failures, as Sidekiq or BullMQ read a list
/// of delays. The first attempt runs at the due time; retry `n` runs after delay `n`. Stored as the
/// attempt-indexed schedule `[0, 0, delays...]`.
pub(super) fn retry_delays_value(value: &Expr) -> syn::Result<Vec<u64>> {
    let Expr::Array(array) = unwrap_group(value) else {
        return Err(syn::Error::new_spanned(
            value,
            format!(
                "retry_delays must be an array of durations: write {}",
                Key::RetryDelays.example()
            ),
        ));
    };
    let mut errors = Errors::default();
    let mut slots = vec![0, 0];
    for (i, delay) in array.elems.iter().enumerate() {
        match errors.keep(duration_value(delay, Key::RetryDelays)) {
            Some(ms) if ms > YEAR_MS => errors.push(syn::Error::new_spanned(
                delay,
                format!(
                    "retry_delays[{i}] is {:?}, longer than a year: the longest delay is \"365d\"",
                    format_millis(ms)
                ),
            )),
            Some(ms) => slots.push(ms),
            None => {}
        }
    }
    if array.elems.len() > MAX_SLOTS - 2 {
        errors.push(syn::Error::new_spanned(
            array,
            format!(
                "retry_delays has {} delays; at most {} are allowed",
                array.elems.len(),
                MAX_SLOTS - 2
            ),
        ));
    }
    errors.check()?;
    Ok(slots)
}
