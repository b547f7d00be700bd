//! Simulated proxies and synthetic meshes for measuring Shoal.
//!
//! ```text
//!  mesh ──► meshgen YAML + .loadtest-mesh.json in the config dir (served by ingest/shoal)
//!  run  ──► C HTTP/2 connections ──► N ADS streams (proxy::run_proxy, one task each)
//!             each: wire::framing ─► client::{SotwClient,DeltaClient} (no I/O) ─► ACK/NACK
//!             (wire::scan hashes a response; client::verified decodes each distinct one once)
//!           run::run: wait for every initial config, write the change (run::change),
//!           time each proxy's ACK of it, read /proc of the edges ─► run::Report
//!  (run, ca: plaintext, or TLS + a token per namespace/service account: secure)
//!  ca   ──► N concurrent CreateCertificate calls ─► ca::CaReport (latency percentiles)
//! ```

pub mod ca;
pub mod client;
pub mod mesh;
pub mod proxy;
pub mod run;
pub mod secure;
pub mod wire;

pub use proxy::Lb;
pub use run::{ChangeKind, Report, RunConfig, RunError, Storm, run};
