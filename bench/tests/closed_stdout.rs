//! The harness on a standard output whose reader has gone (`postpone-bench ... | head -3`).

use std::process::{Command, Stdio};

#[test]
fn a_closed_standard_output_is_no_panic() {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_postpone-bench"))
        .arg("--help")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("postpone-bench runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.is_empty(),
        "a closed pipe is not worth a word: {stderr}"
    );
}
