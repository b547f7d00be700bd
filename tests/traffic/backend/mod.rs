//! The applications behind Envoy: an HTTP/1.1 server that shows what it received and
//! misbehaves on request ([`http`]), over TLS if asked ([`tls`]), and a TCP echo server
//! ([`tcp`]).

pub mod http;
pub mod tcp;
pub mod tls;

pub use http::HttpBackend;
pub use tcp::TcpEcho;

use crate::harness::workloads::Workload;
use std::net::SocketAddr;

/// What every backend is to a test: a named address that can stand as a Pod.
pub trait Backend {
    fn name(&self) -> &str;

    fn addr(&self) -> SocketAddr;

    fn port(&self) -> u16 {
        self.addr().port()
    }

    /// This backend as the Pod of a service's `version`.
    fn workload(&self, version: &str) -> Workload {
        Workload::new(self.name(), version, self.port())
    }
}
