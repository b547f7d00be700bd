//! In-process twins of the NATS and Redis adapters, used by the all-in-one `shoal` binary
//! and by tests. They keep the contracts the real ones keep (revision order, tombstones in
//! watch replay, a durable bounded push queue shared by consumers, forward-only `latest`,
//! TTLs), checked by the same conformance tests. Their operations cannot fail, so this
//! module has no error type of its own: a closed channel maps to `TransportError::Closed`.

mod bus;
mod kv;
mod membership;
mod store;

pub use bus::{MemoryBus, MemoryBusConfig};
pub use kv::{MemoryConfigKv, MemoryConfigKvConfig};
pub use membership::MemoryMembership;
pub use store::MemorySnapshotStore;

/// Recovers the data of a poisoned lock: every critical section here leaves its state
/// consistent, so a panic elsewhere must not wedge the transport.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
