//! Unit tests of `#[job(...)]` parsing: accepted values, and the message for each mistake.

use super::*;
use crate::duration::YEAR_MS;
use syn::{parse_quote, DeriveInput};

fn parse(input: DeriveInput) -> syn::Result<JobAttr> {
    parse_job_attrs(&input.attrs, &input.ident)
}

/// The first error `#[job(...)]` gives for `input`.
fn first_error(input: DeriveInput) -> String {
    match parse(input) {
        Ok(_) => panic!("expected an error"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn reads_every_key() {
    let attr = parse(parse_quote! {
        #[serde(rename_all = "snake_case")]
        #[job(topic = "t", retry = [0, "0", "10ms", "365d"], lease = "1d", timeout = "90s", partitions = 1024)]
        struct A;
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(attr.topic.value(), "t");
    assert_eq!(attr.retry, Some(vec![0, 0, 10, YEAR_MS]));
    assert_eq!(attr.lease, Some(DAY_MS));
    assert_eq!(attr.timeout, Some(90_000));
    assert_eq!(attr.partitions, Some(1024));
}

#[test]
fn partition_counts() {
    let cases: Vec<(DeriveInput, &str)> = vec![
        (
            parse_quote!(
                #[job(topic = "a", partitions = 0)]
                struct A;
            ),
            "partitions must be at least 1: a topic is stored in 1 to 1024 partitions; leave `partitions` out for one",
        ),
        (
            parse_quote!(
                #[job(topic = "a", partitions = 1025)]
                struct A;
            ),
            "partitions is 1025, and at most 1024 are allowed",
        ),
        (
            parse_quote!(
                #[job(topic = "a", partitions = 99999999999999999999999)]
                struct A;
            ),
            "partitions is 99999999999999999999999, and at most 1024 are allowed",
        ),
        (
            parse_quote!(
                #[job(topic = "a", partitions = "3")]
                struct A;
            ),
            "partitions must be an integer literal: write `partitions = 4`",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(first_error(input), want);
    }
}

#[test]
fn structural_errors() {
    let cases: Vec<(DeriveInput, &str)> = vec![
        (
            parse_quote!(
                struct A;
            ),
            "`A` has no topic: add `#[job(topic = \"...\")]` under `#[derive(Job)]`",
        ),
        (
            parse_quote!(
                #[job]
                struct A;
            ),
            "expected a list of settings: write `#[job(topic = \"orders.close\")]`",
        ),
        (
            parse_quote!(
                #[job = "a"]
                struct A;
            ),
            "expected a list of settings: write `#[job(topic = \"orders.close\")]`",
        ),
        (
            parse_quote!(
                #[job()]
                struct A;
            ),
            "#[job] needs a topic: add `topic = \"orders.close\"`",
        ),
        (
            parse_quote!(
                #[job(lease = "1s")]
                struct A;
            ),
            "#[job] needs a topic: add `topic = \"orders.close\"`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retries = ["0", "0"])]
                struct A;
            ),
            "unknown key `retries` in #[job]: expected `topic`, `retry`, `retry_delays`, `lease`, `timeout`, `partitions`, `rate`, `max_running`, `unique`, `unique_for`, `key`, `key_max_running`, `key_rate`, `output`, `keep` or `keep_last`",
        ),
        (
            parse_quote!(
                #[job(topic)]
                struct A;
            ),
            "expected `=` after `topic`: write `topic = \"orders.close\"`",
        ),
        (
            parse_quote!(
                #[job("a")]
                struct A;
            ),
            "expected a key: `topic`, `retry`, `retry_delays`, `lease`, `timeout`, `partitions`, `rate`, `max_running`, `unique`, `unique_for`, `key`, `key_max_running`, `key_rate`, `output`, `keep` or `keep_last`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", topic = "b")]
                struct A;
            ),
            "duplicate key `topic` in #[job]: give it once",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(first_error(input), want);
    }
}

#[test]
fn value_errors() {
    let cases: Vec<(DeriveInput, &str)> = vec![
        (
            parse_quote!(
                #[job(topic = TOPIC)]
                struct A;
            ),
            "topic must be a string literal",
        ),
        (
            parse_quote!(
                #[job(topic = 42)]
                struct A;
            ),
            "topic must be a string literal",
        ),
        (
            parse_quote!(
                #[job(topic = "")]
                struct A;
            ),
            "invalid topic \"\": it is empty",
        ),
        (
            parse_quote!(
                #[job(topic = "a{b}")]
                struct A;
            ),
            "invalid topic \"a{b}\": it holds '{'",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry = "0")]
                struct A;
            ),
            "retry must be an array of durations",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry = ["0"])]
                struct A;
            ),
            "retry has 1 slot(s) and needs at least 2",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry = [])]
                struct A;
            ),
            "retry has 0 slot(s) and needs at least 2",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry = ["0", 2m])]
                struct A;
            ),
            "durations are strings: write \"2m\"",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry = ["0", 5])]
                struct A;
            ),
            "duration 5 in retry has no unit",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry = ["0", -1])]
                struct A;
            ),
            "expected a duration string in retry",
        ),
        (
            parse_quote!(
                #[job(topic = "a", lease = "25h")]
                struct A;
            ),
            "lease \"25h\" is longer than a day",
        ),
        (
            parse_quote!(
                #[job(topic = "a", lease = 0)]
                struct A;
            ),
            "lease must be longer than 0",
        ),
        (
            parse_quote!(
                #[job(topic = "a", timeout = "0s")]
                struct A;
            ),
            "timeout must be longer than 0",
        ),
        (
            parse_quote!(
                #[job(topic = "a", timeout = "5 m")]
                struct A;
            ),
            "unparsable duration \"5 m\" in timeout",
        ),
    ];
    for (input, want) in cases {
        let got = first_error(input);
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
}

#[test]
fn slot_count_bounds() {
    let slots = |n: usize| -> DeriveInput {
        let zeros = std::iter::repeat_n(0u8, n).map(proc_macro2::Literal::u8_unsuffixed);
        parse_quote!(
            #[job(topic = "a", retry = [#(#zeros),*])]
            struct A;
        )
    };
    assert_eq!(
        parse(slots(MAX_SLOTS))
            .map(|a| a.retry.map(|r| r.len()))
            .ok(),
        Some(Some(MAX_SLOTS))
    );
    assert_eq!(
        first_error(slots(MAX_SLOTS + 1)),
        "retry has 1002 slots; at most 1001 are allowed (1000 attempts)"
    );
}

#[test]
fn retry_slot_zero_must_be_zero() {
    let err = first_error(parse_quote!(
        #[job(topic = "a", retry = ["1m", "5m", "30m"])]
        struct A;
    ));
    assert_eq!(
        err,
        "retry slot 0 is \"1m\", but slot 0 is never read: `retry` is indexed by attempt (slot 1 is the \
         delay before the first attempt, slot n the delay before attempt n), so this schedule runs the \
         first attempt 5m after its due time and allows 2 attempt(s). For retries 1m, 5m and 30m after \
         successive failures, write `retry_delays = [\"1m\", \"5m\", \"30m\"]` (the same as `retry = \
         [\"0\", \"0\", \"1m\", \"5m\", \"30m\"]`); otherwise make slot 0 \"0\""
    );
    // One non-zero slot: the same explanation, not "needs at least 2".
    let err = first_error(parse_quote!(
        #[job(topic = "a", retry = ["5m"])]
        struct A;
    ));
    assert!(
        err.starts_with("retry slot 0 is \"5m\", but slot 0 is never read")
            && err.contains("so this schedule allows no attempt at all")
            && err.contains("`retry_delays = [\"5m\"]`"),
        "{err}"
    );
    // A zero slot 0, bare or quoted, is fine.
    for input in [
        parse_quote!(
            #[job(topic = "a", retry = [0, "1m"])]
            struct A;
        ),
        parse_quote!(
            #[job(topic = "a", retry = ["0ms", "1m"])]
            struct A;
        ),
    ] {
        assert!(parse(input).is_ok());
    }
}

#[test]
fn retry_delays_are_the_delays_between_failures() {
    let attr = parse(parse_quote!(
        #[job(topic = "a", retry_delays = ["1m", "5m", "30m"])]
        struct A;
    ))
    .unwrap_or_else(|err| panic!("{err}"));
    // The first attempt at the due time, then retries 1, 5 and 30 minutes after each failure.
    assert_eq!(attr.retry, Some(vec![0, 0, 60_000, 300_000, 1_800_000]));
    // No retries at all.
    let attr = parse(parse_quote!(
        #[job(topic = "a", retry_delays = [])]
        struct A;
    ))
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(attr.retry, Some(vec![0, 0]));

    let cases: Vec<(DeriveInput, &str)> = vec![
        (
            parse_quote!(
                #[job(topic = "a", retry = ["0", "0"], retry_delays = ["1m"])]
                struct A;
            ),
            "`retry_delays` and `retry` both set the retry schedule: give one",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry_delays = "1m")]
                struct A;
            ),
            "retry_delays must be an array of durations: write `retry_delays = [\"1m\", \"5m\", \"30m\"]`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry_delays = ["1m", "400d"])]
                struct A;
            ),
            "retry_delays[1] is \"400d\", longer than a year",
        ),
        (
            parse_quote!(
                #[job(topic = "a", retry_delays = [5])]
                struct A;
            ),
            "duration 5 in retry_delays has no unit",
        ),
    ];
    for (input, want) in cases {
        let got = first_error(input);
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
}

#[test]
fn flow_limits() {
    let attr = parse(parse_quote! {
        #[job(topic = "t", rate = "600/m", max_running = 5)]
        struct A;
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(attr.rate, Some((600, 60_000)));
    assert_eq!(attr.max_running, Some(5));
    for (text, want) in [
        ("100/s", (100, 1000)),
        ("1/d", (1, DAY_MS)),
        ("10/500ms", (10, 500)),
        ("3/10s", (3, 10_000)),
        ("7/ms", (7, 1)),
    ] {
        let value: syn::Expr = syn::parse_str(&format!("{text:?}")).unwrap();
        assert_eq!(flow::rate_value(&value, Key::Rate).unwrap(), want, "{text}");
    }
    let cases: Vec<(DeriveInput, &str)> = vec![
        (
            parse_quote!(
                #[job(topic = "a", rate = "100")]
                struct A;
            ),
            "rate \"100\" has no `/`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", rate = "0/s")]
                struct A;
            ),
            "rate \"0/s\" lets no job go",
        ),
        (
            parse_quote!(
                #[job(topic = "a", rate = "x/s")]
                struct A;
            ),
            "rate \"x/s\": \"x\" is not a number of jobs",
        ),
        (
            parse_quote!(
                #[job(topic = "a", rate = "5/sec")]
                struct A;
            ),
            "rate \"5/sec\": the period \"sec\" is not",
        ),
        (
            parse_quote!(
                #[job(topic = "a", rate = "5/0s")]
                struct A;
            ),
            "rate \"5/0s\": the period \"0s\" is not",
        ),
        (
            parse_quote!(
                #[job(topic = "a", rate = 100)]
                struct A;
            ),
            "rate must be a string literal",
        ),
        (
            parse_quote!(
                #[job(topic = "a", max_running = 0)]
                struct A;
            ),
            "max_running must be at least 1",
        ),
        (
            parse_quote!(
                #[job(topic = "a", max_running = "5")]
                struct A;
            ),
            "max_running must be an integer literal",
        ),
    ];
    for (input, want) in cases {
        let got = first_error(input);
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
}

#[test]
fn key_names_one_field() {
    let attr = parse(parse_quote! {
        #[job(topic = "shop.sync", key = "shop_id")]
        struct SyncShop { shop_id: u64 }
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(attr.key.map(|lit| lit.value()), Some("shop_id".to_owned()));
    // Whether the struct has the field is checked with the fields (`crate::job`), not here.
    let attr = parse(parse_quote! {
        #[job(topic = "shop.sync", key = r"no_such_field")]
        struct SyncShop;
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        attr.key.map(|lit| lit.value()),
        Some("no_such_field".to_owned())
    );

    let not_a_string = "key must be a string literal: write `key = \"customer_id\"`";
    let cases: Vec<(DeriveInput, &str)> = vec![
        (
            parse_quote!(
                #[job(topic = "a", key = shop_id)]
                struct A { shop_id: u64 }
            ),
            not_a_string,
        ),
        (
            parse_quote!(
                #[job(topic = "a", key = 7)]
                struct A { shop_id: u64 }
            ),
            not_a_string,
        ),
        (
            parse_quote!(
                #[job(topic = "a", key = ["shop_id"])]
                struct A { shop_id: u64 }
            ),
            not_a_string,
        ),
        (
            parse_quote!(
                #[job(topic = "a", key = "")]
                struct A { shop_id: u64 }
            ),
            "key needs a field name: the job's key for fairness is that field's value; write `key = \"customer_id\"`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key)]
                struct A { shop_id: u64 }
            ),
            "expected `=` after `key`: write `key = \"customer_id\"`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key = "shop_id", key = "region")]
                struct A { shop_id: u64, region: String }
            ),
            "duplicate key `key` in #[job]: give it once",
        ),
    ];
    for (input, want) in cases {
        assert_eq!(first_error(input), want);
    }
}

#[test]
fn key_limits() {
    let attr = parse(parse_quote! {
        #[job(topic = "shop.sync", key = "shop_id", key_max_running = 2, key_rate = "10/s")]
        struct SyncShop { shop_id: u64 }
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(attr.key_max_running, Some(2));
    assert_eq!(attr.key_rate, Some((10, 1000)));
    // Without `key` (an enqueue gives the key), each on its own.
    let attr = parse(parse_quote! {
        #[job(topic = "shop.sync", key_rate = "10/500ms")]
        struct SyncShop;
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        (attr.key_max_running, attr.key_rate),
        (None, Some((10, 500)))
    );
    let attr = parse(parse_quote! {
        #[job(topic = "shop.sync", key_max_running = 1)]
        struct SyncShop;
    })
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!((attr.key_max_running, attr.key_rate), (Some(1), None));
    // The topic's limits are apart from them.
    assert_eq!((attr.max_running, attr.rate), (None, None));

    let cases: Vec<(DeriveInput, &str)> = vec![
        (
            parse_quote!(
                #[job(topic = "a", key_max_running = 0)]
                struct A;
            ),
            "key_max_running must be at least 1: leave it out for no limit",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_max_running = 4294967296)]
                struct A;
            ),
            "key_max_running must be from 1 to 4294967295",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_max_running = "2")]
                struct A;
            ),
            "key_max_running must be an integer literal: write `key_max_running = 2`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_max_running)]
                struct A;
            ),
            "expected `=` after `key_max_running`: write `key_max_running = 2`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_rate = 10)]
                struct A;
            ),
            "key_rate must be a string literal: write `key_rate = \"10/s\"`",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_rate = "10")]
                struct A;
            ),
            "key_rate \"10\" has no `/`: write jobs per period, e.g. \"100/s\", \"600/m\" or \"10/500ms\"",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_rate = "0/s")]
                struct A;
            ),
            "key_rate \"0/s\" lets no job go: write at least 1 job per period",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_rate = "x/s")]
                struct A;
            ),
            "key_rate \"x/s\": \"x\" is not a number of jobs (1 to 4294967295)",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_rate = "5/0s")]
                struct A;
            ),
            "key_rate \"5/0s\": the period \"0s\" is not `s`, `m`, `h`, `d` or a duration (",
        ),
        (
            parse_quote!(
                #[job(topic = "a", key_rate = "1/s", key_rate = "2/s")]
                struct A;
            ),
            "duplicate key `key_rate` in #[job]: give it once",
        ),
    ];
    for (input, want) in cases {
        let got = first_error(input);
        assert!(got.starts_with(want), "{got:?} should start with {want:?}");
    }
    // A unique type may have a key for fairness and limits per key, with `key` or without it (an
    // enqueue gives the key).
    for input in [
        parse_quote!(
            #[job(topic = "a", key = "id", key_rate = "1/s", unique = ["id"], unique_for = "1m")]
            struct A {
                id: u64,
            }
        ),
        parse_quote!(
            #[job(topic = "a", unique = ["id"], unique_for = "1m", key_max_running = 2)]
            struct A {
                id: u64,
            }
        ),
    ] {
        assert!(parse(input).is_ok());
    }
}
