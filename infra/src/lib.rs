//! Shoal's transports and process plumbing, shared by every tier so none copies them.
//!
//! ```text
//!            proto::transport traits            real adapter           in-process twin
//!  ingest ──► ConfigKv ─────────────────────►  nats::NatsConfigKv      memory::MemoryConfigKv
//!  ingest ──► Bus ◄── builder, edge ───────►  nats::NatsBus           memory::MemoryBus
//!  builder ─► SnapshotStore ◄── edge ───────►  redis::RedisSnapshotStore memory::MemorySnapshotStore
//!  edge ────► Membership ───────────────────►  nats::NatsMembership    memory::MemoryMembership
//! ```
//!
//! - [`nats`], [`redis`]: the adapters the split deployment runs on.
//! - [`memory`]: the twins the all-in-one `shoal` binary runs on; the conformance tests in
//!   `tests/` run the same checks against both, so they behave alike.
//! - [`admin`]: `/metrics`, `/healthz/ready` and `/debug/*` for every binary.
//! - [`cli`]: the flags every binary shares (`--nats-url`, `--redis-url`, `--http-addr`).
//! - [`tls`], [`secret`]: TLS files and credentials towards NATS and Redis, and the
//!   redaction that keeps passwords out of logs, errors and `/debug`.
//! - [`coalesced`]: a connection's writes gathered into fewer, larger ones (the edge's
//!   proxies, the loadtest's connections).
//! - [`retry`]: retrying transport calls with backoff while they are unavailable.
//! - [`runtime`]: tracing set-up, the shutdown signal and the drain primitive.
//! - `testing` (feature `test-util`): real `nats-server` / `redis-server` fixtures.
//!
//! Tiers hold the traits as `Arc<dyn ConfigKv>` (etc.) and never name an adapter type past
//! their wiring code.

pub mod admin;
pub mod cli;
pub mod coalesced;
pub mod memory;
pub mod nats;
pub mod redis;
pub mod retry;
pub mod runtime;
pub mod secret;
pub mod supervisor;
pub mod telemetry;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod tls;

pub use shoal_proto::transport::{
    Bus, ConfigKv, KvEntry, Member, Membership, SnapshotStore, TransportError,
};
