//! Malformed Redis URLs: each says what is wrong with it, and none of the messages holds the password.
//! (None of these reaches a server: the URL is refused before any connection.)

use postpone::{Client, Error};

/// URL, and the start of what the error says after `invalid Redis URL: "<url without password>": `.
const CASES: &[(&str, &str)] = &[
    (
        "localhost:6379",
        "it has no scheme: write \"redis://localhost:6379\"",
    ),
    (
        "http://:hunter2@localhost:6379",
        "unsupported scheme \"http\"",
    ),
    ("redis://:hunter2@", "it has no host"),
    (
        "redis://:hunter2@localhost:port",
        "the port \"port\" is not a number",
    ),
    (
        "redis://:hunter2@localhost:70000",
        "the port 70000 is out of range",
    ),
    (
        "redis://:hunter2@localhost:6379/zero",
        "the database \"zero\" is not a number",
    ),
    (
        "redis://user:hunter/2@localhost",
        "the user name or password holds '/', '?' or '#'",
    ),
    (
        "redis://localhost:6379\n",
        "it starts or ends with whitespace",
    ),
];

#[tokio::test]
async fn each_malformed_url_says_what_is_wrong_without_the_password() {
    let mut messages = Vec::new();
    for (url, want) in CASES {
        let err = Client::connect(url).await.unwrap_err();
        assert!(matches!(err, Error::InvalidUrl { .. }), "{url:?}: {err:?}");
        let message = err.to_string();
        let (shown, what) = message
            .strip_prefix("invalid Redis URL: ")
            .and_then(|rest| rest.split_once("\": "))
            .unwrap_or_else(|| panic!("{url:?}: {message}"));
        assert!(
            what.starts_with(want),
            "{url:?}: {what:?} should start with {want:?}"
        );
        assert!(
            !message.contains("hunter"),
            "{url:?}: {message} holds the password"
        );
        if url.contains("hunter") {
            assert!(shown.contains("***@"), "{url:?}: {shown}");
        }
        messages.push(what.to_owned());
    }
    messages.sort();
    messages.dedup();
    assert_eq!(messages.len(), CASES.len(), "two URLs got the same message");
}

#[tokio::test]
async fn a_cluster_seed_is_checked_the_same_way() {
    let err = Client::connect_cluster(&["redis://127.0.0.1:7000", "redis://:hunter2@127.0.0.1:x"])
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("the port \"x\" is not a number"),
        "{message}"
    );
    assert!(!message.contains("hunter"), "{message}");
}

#[tokio::test]
async fn a_tls_url_names_the_tls_feature_when_it_is_off() {
    let result = Client::connect("rediss://:hunter2@127.0.0.1:1/#nope").await;
    let message = result.unwrap_err().to_string();
    assert!(!message.contains("hunter"), "{message}");
    // Off in the `postpone` package's own build; on when the whole workspace builds together (the
    // `tests/tls` crate enables it), where this URL fails for its fragment instead.
    assert!(
        message.contains("needs postpone's `tls` feature")
            || message.contains("the fragment #nope means nothing here"),
        "{message}"
    );
}

#[tokio::test]
async fn a_cluster_names_the_cluster_feature_when_it_is_off() {
    let result = Client::connect_cluster(&["redis://:hunter2@127.0.0.1:1"]).await;
    let message = result.unwrap_err().report().to_string();
    assert!(!message.contains("hunter"), "{message}");
    // Off in the `postpone` package's own build; on when the whole workspace builds together (the
    // `tests/cluster` crate enables it), where nothing listens on port 1 instead.
    assert!(
        message.contains("needs postpone's `cluster` feature") || message.contains("127.0.0.1:1"),
        "{message}"
    );
}
