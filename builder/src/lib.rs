//! The builder tier: consumes push requests, rebuilds the PushContext's chunks for what
//! changed (from its replica of the config KV), writes the snapshot to the store and
//! announces it.
//!
//! ```text
//! ConfigKv ──watch──► Replica ──dirty namespaces──► SnapshotBuilder ──► Writer ──► SnapshotStore
//!                                   ▲                                     │
//! Bus: shoal.push ──────────────────┘ (wait for revision)                  └──► Bus: shoal.snapshot
//! ```

pub mod cli;
mod follow;
pub mod mesh;
mod metrics;
pub mod replica;
mod run;
pub mod snapshot;
pub mod writer;

pub use run::{Builder, BuilderConfig, BuilderError, Status};
pub use writer::Retention;
