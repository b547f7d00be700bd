//! Where the CA's signing material comes from, as istiod's: a plug-in CA's files
//! (`cacerts` mounted at `/etc/cacerts`), polled so that a new intermediate is used from
//! the moment it is read; else a self-signed root kept in a directory as
//! `istio-ca-secret` (created if absent, so restarts and edges sharing the directory use
//! one root) or, without a directory, in memory (all-in-one dev); or both Secrets read
//! through the API server, as istiod reads them. Each source sends on a `watch` the
//! [`super::CaService`] reads; a rotation is a send.
//!
//! ```text
//!  plugin::run   (read every poll_interval; changed + valid ─► send; invalid ─► warn, keep)
//!  self_signed::run (load or create; every check_interval: re-read, renew in last fifth ─► send)
//!  secrets::start (cacerts with ca-key.pem, else istio-ca-secret created if absent;
//!                 watched: changed + valid ─► send; self-signed renewed in last fifth)
//! ```

mod files;
pub mod plugin;
pub mod secrets;
pub mod self_signed;

pub use plugin::PluginDirConfig;
pub use secrets::KubeSecretsConfig;
pub use self_signed::SelfSignedConfig;

use shoal_proto::security::ca::{CaError, SigningMaterial};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Which source signs.
#[derive(Clone, Debug)]
pub enum SourceConfig {
    Plugin(PluginDirConfig),
    SelfSigned(SelfSignedConfig),
    Kubernetes(KubeSecretsConfig),
}

/// Why a source could not give its first material.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{dir}: {source}")]
    Material {
        dir: PathBuf,
        #[source]
        source: CaError,
    },
    #[error("{0}")]
    Ca(#[from] CaError),
    #[error("{secret}: {source}")]
    Api {
        secret: String,
        #[source]
        source: kube::Error,
    },
    #[error("{secret}: {reason}")]
    Secret { secret: String, reason: String },
}

/// A running source: the material's watch and the task that keeps it current (it ends
/// when every receiver is dropped; abort it to stop sooner).
pub struct RunningSource {
    pub material: watch::Receiver<Arc<SigningMaterial>>,
    pub task: JoinHandle<()>,
}

/// Starts the configured source: fails if there is no valid material at start (as
/// istiod refuses to start on broken `cacerts`), then keeps it current.
pub async fn start(config: SourceConfig) -> Result<RunningSource, SourceError> {
    match config {
        SourceConfig::Plugin(c) => plugin::start(c).await,
        SourceConfig::SelfSigned(c) => self_signed::start(c).await,
        SourceConfig::Kubernetes(c) => secrets::start(c).await,
    }
}

#[cfg(test)]
mod tests;
