//! Compile-time checks: `#[derive(Job)]` and the typed API. What must compile does; each misuse that
//! must not compile fails with the message pinned in its `.stderr` file.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test ui`, then read them.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/derive/pass/*.rs");
    cases.pass("tests/ui/api/pass/*.rs");
    cases.compile_fail("tests/ui/derive/fail/*.rs");
    cases.compile_fail("tests/ui/api/fail/*.rs");
}
