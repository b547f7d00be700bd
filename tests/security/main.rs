//! Istio security against a real Envoy: workloads get their certificates from Shoal's
//! CA and their xDS over the authenticated port (15012) through an **agent stand-in**
//! (`agent-stand-in`, standing in for Istio's pilot-agent), refusals carry the right
//! gRPC status, a gateway's credential goes to its own router only, a CA rotation
//! reaches the workloads without a failed request, sidecars talk the mesh's mTLS
//! as PeerAuthentication says, RequestAuthentication's JWTs are validated; a namespace
//! moves from an istiod stand-in to Shoal and back while requests flow; CSDS on the
//! secure port answers the control plane's namespace only.
//!
//! Run `cargo build --workspace --bins` first (for `shoal` and `agent-stand-in`); Envoy
//! comes from `.venv/bin/envoy` or `SHOAL_ENVOY`.

#[path = "../support/mod.rs"]
mod support;

#[allow(dead_code)]
#[path = "../traffic/harness/workloads.rs"]
mod k8s;

mod authorization;
mod bootstrap;
mod client;
mod csds;
mod eastwest;
mod ext_authz;
mod gateway;
mod istiod;
mod jwt;
mod kubernetes;
mod mesh;
mod migration;
mod mtls;
mod pki;
mod probe;
mod refusals;
mod workloads;

/// The tests share ports 80-ish only through free ports, but each starts Envoys and
/// `shoal`: one at a time on a small machine.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
