//! Checks of the store a deployment runs on (`postpone doctor`, the dashboard): what was found, and what
//! to do about it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> postpone::Result<()> {
//! use postpone::ops::Level;
//!
//! let checks = postpone::Client::memory().ops().doctor().await?;
//! assert_eq!(checks[0].name, "backend");
//! assert_eq!(checks[0].level, Level::Warn); // in memory, nothing persists
//! # Ok(()) }
//! ```

use super::Ops;
pub use crate::check::{Check, Level};
use crate::error::Result;
use crate::store::ScriptLibraries;

impl Ops {
    /// Checks the store: on Redis, the server version, `maxmemory-policy` (anything but `noeviction`
    /// can evict jobs), persistence and fsync, this machine's clock against the server's, and on a
    /// cluster the slot coverage and replicas (each master checked); in memory, that nothing persists.
    /// Then one check per transactional outbox whose relay reports ([`Ops::outboxes`]); reports that
    /// cannot be read (on a cluster, the master holding them is down) make one warning, never a failed
    /// doctor.
    /// One [`Check`] per line of `postpone doctor`; any [`Level::Bad`] means jobs are at risk.
    pub async fn doctor(&self) -> Result<Vec<Check>> {
        let mut checks = self.client.backend().doctor().await?;
        checks.extend(self.outbox_checks().await);
        Ok(checks)
    }

    /// postpone's scripts as Redis function libraries on the store's servers (each master of a
    /// cluster): how many are this build's, how many other builds', and the memory all function
    /// libraries hold. Each script is a library named by its code, so every release whose scripts
    /// changed leaves its libraries behind once no process of it runs; see
    /// [`prune_script_libraries`](Self::prune_script_libraries). Nothing in memory.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> postpone::Result<()> {
    /// let libraries = postpone::Client::memory().ops().script_libraries().await?;
    /// assert_eq!((libraries.servers, libraries.others), (0, 0));
    /// # Ok(()) }
    /// ```
    pub async fn script_libraries(&self) -> Result<ScriptLibraries> {
        self.client.backend().script_libraries(false).await
    }

    /// Deletes the function libraries of other postpone builds from the store's servers (each
    /// master of a cluster), and says what is left (with [`ScriptLibraries::deleted`]). This build's
    /// libraries and libraries not named `postpone_` are kept. Safe while other versions still run (a
    /// rolling deploy): a process whose library is gone loads it again at its next call of that
    /// script, once per server.
    pub async fn prune_script_libraries(&self) -> Result<ScriptLibraries> {
        self.client.backend().script_libraries(true).await
    }
}
