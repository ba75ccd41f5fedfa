//! A place in the relay where its fault tests stop it (the `test-hooks` feature): with
//! `POSTPONE_RELAY_FAILPOINT=<name>` set, reaching `<name>` prints `failpoint <name>` on stderr and
//! blocks the process there until the test kills it.

/// Stops here when the environment names this point (`test-hooks` only; nothing otherwise).
#[cfg(feature = "test-hooks")]
pub(crate) fn hit(name: &str) {
    if std::env::var("POSTPONE_RELAY_FAILPOINT").as_deref() == Ok(name) {
        eprintln!("failpoint {name}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
}

/// Stops here when the environment names this point (`test-hooks` only; nothing otherwise).
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub(crate) fn hit(_name: &str) {}
