//! Compile-time checks: `#[derive(Job)]` and the typed API. What must compile does; each misuse that
//! must not compile fails with the message pinned in its `.stderr` file.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test -p postpone-ui-tests`, then read them.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("derive/pass/*.rs");
    cases.pass("api/pass/*.rs");
    cases.compile_fail("derive/fail/*.rs");
    cases.compile_fail("api/fail/*.rs");
}
