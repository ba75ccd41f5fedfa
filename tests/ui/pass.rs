//! What must compile does, and runs: each file under `derive/pass/` and `api/pass/` is a module of
//! this test crate with its own imports, as an application would write it, and its test
//! `compiles_and_runs` checks the values the code gives. (They are not trybuild cases: trybuild
//! would build every dependency again, fully, in a target directory of its own, only for these; its
//! misuse cases in `ui.rs` need only a `cargo check`.)
#![allow(dead_code, unreachable_pub)]

// Each path is relative to the directory of its module (`derive/`, `api/`).
mod derive {
    #[path = "pass/enum.rs"]
    mod enum_job;
    #[path = "pass/full.rs"]
    mod full;
    #[path = "pass/key.rs"]
    mod key;
    #[path = "pass/key_limits.rs"]
    mod key_limits;
    #[path = "pass/key_with_unique.rs"]
    mod key_with_unique;
    #[path = "pass/minimal.rs"]
    mod minimal;
    #[path = "pass/retry_delays.rs"]
    mod retry_delays;
    #[path = "pass/unique.rs"]
    mod unique;
    #[path = "pass/values.rs"]
    mod values;
}

mod api {
    #[path = "pass/dead_letter_sink.rs"]
    mod dead_letter_sink;
    #[path = "pass/handlers.rs"]
    mod handlers;
}
