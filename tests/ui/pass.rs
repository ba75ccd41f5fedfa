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

/// A case added under a `pass/` directory is a module above: trybuild took every file by a glob, and
/// a file left out here would be compiled by nothing.
#[test]
fn every_case_under_a_pass_directory_is_a_module_here() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let this = std::fs::read_to_string(root.join("pass.rs")).expect("pass.rs");
    let mut cases = 0;
    for dir in ["derive", "api"] {
        for entry in std::fs::read_dir(root.join(dir).join("pass")).expect("a pass directory") {
            let name = entry.expect("a directory entry").file_name();
            let name = name.to_str().expect("a UTF-8 file name");
            if name.ends_with(".rs") {
                cases += 1;
                assert!(
                    this.contains(&format!("#[path = \"pass/{name}\"]")),
                    "{dir}/pass/{name} is not a module of tests/ui/pass.rs"
                );
            }
        }
    }
    assert!(cases > 0, "no case found under derive/pass and api/pass");
}
