//! Security for proxyless gRPC (gRFC A29 mTLS, A36 servers, A41 RBAC), behind the
//! sidecar's hooks ([`crate::xds::security`]): the same PeerAuthentication, auto mTLS,
//! DestinationRule `tls` and AuthorizationPolicy, turned into what gRPC's xDS reads,
//! and a report for what it cannot.
//!
//! ```text
//!  CDS  client.rs  cluster transport: ISTIO_MUTUAL / auto mTLS ─► tls::upstream
//!  LDS  server.rs  xds.istio.io/grpc/lds/inbound/<ip>:<port> chain: PeerAuthn mode
//!                  ─► tls::downstream;  authz.rs: AuthorizationPolicy ─► RBAC filters
//! ```
//!
//! **Who has xDS credentials.** gRPC takes certificates only from certificate provider
//! instances named in its bootstrap (`certificate_providers`), and NACKs a resource
//! naming one it lacks. The control plane cannot see the bootstrap, so, as Istio, it
//! reads the workload: Istio's agent writes the `default` provider (a `file_watcher`
//! over the certificates it fetches) into every proxyless bootstrap, and Istio's
//! `grpc-agent` injection template leaves the label `security.istio.io/tlsMode: istio`
//! to the user, to be set when the application uses xDS credentials. Shoal takes a
//! proxyless workload to have them when it has the mesh's identity
//! ([`crate::xds::security::mesh_identity`]: that label, or a stream its agent
//! authenticated).

pub mod authz;
pub mod client;
pub mod server;
pub mod tls;

use crate::proxy::Proxy;

/// Whether a proxyless gRPC workload's bootstrap has the certificate provider
/// `default` (see the module's docs).
pub fn xds_credentials(proxy: &Proxy) -> bool {
    crate::xds::security::mesh_identity(proxy)
}

#[cfg(test)]
mod tests;
