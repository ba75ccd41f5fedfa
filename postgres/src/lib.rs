#![doc = include_str!("../../docs/guide/transactional-enqueue.md")]
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod error;
mod failpoint;
mod outbox;
mod relay;
mod row;
mod schema;
mod stats;

pub use error::{Error, Result};
pub use outbox::{Outbox, OutboxEnqueue, OutboxEnqueued};
pub use relay::{Relay, RelayShutdown, Round, MAX_BATCH};
pub use schema::{migrate, migration_sql, DEFAULT_TABLE};
pub use stats::OutboxStats;
