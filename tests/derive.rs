//! `#[derive(Job)]`: what compiles, and the error for each thing that must not.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test derive`, then read them.

#[test]
fn derive_job() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/derive/pass/*.rs");
    cases.compile_fail("tests/ui/derive/fail/*.rs");
}
