//! xDS for routers (ingress and egress gateways): listeners, routes and TLS secrets
//! from the Gateways that select them, as Istio's gateway builders make them.
//!
//! ```text
//!  MergedGateway (proto push_context::gateway): the router's servers by port
//!   port HTTP    0.0.0.0_<port> ─ HCM ─ RDS "http.<port>"        vhosts from bound VSs
//!   port HTTPS   0.0.0.0_<port> ─ chain per server (SNI, TLS from SDS
//!                                "kubernetes://<credentialName>") ─ RDS "https.<port>.…"
//!   port TLS     PASSTHROUGH: chain per VS tls route (SNI) ─ tcp_proxy
//!                SIMPLE/MUTUAL: chain per server (TLS) ─ tcp_proxy by VS tcp routes
//!   port TCP     one chain ─ tcp_proxy by VS tcp routes
//!   port TLS     AUTO_PASSTHROUGH (east-west): chain per mesh service port and subset
//!                the hosts match (SNI outbound_.<port>_.<subset>_.<host>) ─ tcp_proxy
//!                ─ its SNI-DNAT cluster (CDS/EDS beside the sidecar's): auto_passthrough
//!  SDS  "kubernetes://<name>" and "kubernetes://<name>-cacert" from the router's
//!       namespace's TLS Secrets
//! ```

pub mod auto_passthrough;
pub mod listeners;
pub mod routes;
pub mod secrets;
mod tls;

/// The SDS name of a `credentialName` (Istio's `kubernetes://` resource names).
pub fn credential_resource(credential: &str) -> String {
    format!("{}{credential}", secrets::KUBERNETES_PREFIX)
}

#[cfg(test)]
mod tests;
