//! A directory of the test's own under the system's temp dir, removed with everything in it on drop.
//!
//! What these tests need of the `tempfile` crate, in a few lines: every example of the `postpone`
//! package (the quickstart first) builds all of its dev-dependencies, so they stay few.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A fresh directory named `<prefix><pid>-<n>-<nanos>`, removed on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates the directory, or panics saying why.
    pub fn new(prefix: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..100 {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("{prefix}{}-{n}-{nanos}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return TempDir { path },
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => panic!("creating a temp dir in {}: {e}", base.display()),
            }
        }
        panic!("creating a temp dir in {}: {last:?}", base.display())
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
