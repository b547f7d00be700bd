//! The admin HTTP server every binary runs: Prometheus `/metrics`, `/healthz/ready` and
//! `/debug/<name>` JSON pages the tiers register, answered only to callers on this host
//! or authenticated as the control plane's namespace ([`DebugAccess`]).
//!
//! ```text
//! AdminServer::new(registry, readiness).debug("syncz", f) ─bind(addr)─► BoundAdmin
//!                                                             .local_addr() / .serve(shutdown)
//! ```
//! Binding is a separate step so a caller that asked for port 0 learns the real address
//! before serving.

mod access;
mod readiness;
mod server;

pub use access::DebugAccess;
pub use readiness::Readiness;
pub use server::{AdminServer, BoundAdmin, DebugFn, DebugQueryFn};

use std::net::SocketAddr;

/// Errors of the admin server.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The listen address could not be bound (in use, no permission).
    #[error("bind admin server on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The server failed while serving.
    #[error("admin server: {0}")]
    Serve(#[source] std::io::Error),
}

pub type Result<T, E = AdminError> = std::result::Result<T, E>;
