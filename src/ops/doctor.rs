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
}
