//! An example's binary, for tests that run it as a process: built by `cargo test` (which builds a
//! package's examples), and checked to be newer than its sources (`cargo test --test NAME` alone does
//! not rebuild it), so that a test never runs stale code. Its sources are the files cargo's dep-info
//! beside it names (`<name>.d`: every file the build read, the library's and its `include_str!`
//! scripts too, so a change to `src/` counts), and those the caller names. Shared with the examples
//! crate's tests through `#[path]`.

use std::path::{Path, PathBuf};

/// The binary of example `name`, beside the running test's target directory. `sources` are files or
/// directories (their files) the binary must be newer than; `build` says how to build it.
pub(crate) fn example_binary(name: &str, sources: &[PathBuf], build: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("examples")
        .join(name);
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let built = modified(&path).unwrap_or_else(|| panic!("{} is missing: {build}", path.display()));
    let mut sources = sources.to_vec();
    sources.extend(dep_info(&path.with_extension("d")));
    for source in &sources {
        let files: Vec<PathBuf> = if source.is_dir() {
            std::fs::read_dir(source)
                .expect("the example's sources")
                .map(|e| e.expect("a source file").path())
                .collect()
        } else {
            vec![source.clone()]
        };
        for file in files {
            if modified(&file).is_some_and(|m| m > built) {
                panic!(
                    "{} is older than {}: {build}",
                    path.display(),
                    file.display()
                );
            }
        }
    }
    path
}

/// The files a cargo dep-info file names (`<target>: <file> <file>...`, a space in a path escaped as
/// `\ `); none when it is missing.
fn dep_info(path: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Some((_, deps)) = text.lines().next().and_then(|l| l.split_once(": ")) else {
        return Vec::new();
    };
    let (mut files, mut file, mut chars) = (Vec::new(), String::new(), deps.chars().peekable());
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => file.extend(chars.next()),
            ' ' if !file.is_empty() => files.push(PathBuf::from(std::mem::take(&mut file))),
            ' ' => {}
            c => file.push(c),
        }
    }
    if !file.is_empty() {
        files.push(PathBuf::from(file));
    }
    files
}
