//! Compile-time checks: each misuse of `#[derive(Job)]` and the typed API that must not compile fails
//! with the message pinned in its `.stderr` file. (What must compile is `pass.rs`.)
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test -p postpone-ui-tests`, then read them.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("derive/fail/*.rs");
    cases.compile_fail("api/fail/*.rs");
}
