//! A plug-in CA's files (`ca-cert.pem`, `ca-key.pem`, `cert-chain.pem`, `root-cert.pem`),
//! as istiod reads the `cacerts` Secret mounted at `/etc/cacerts`. Polled: Kubernetes
//! updates a mounted Secret by swapping a symlink, which a poll sees without inotify.

use super::files::{read, read_optional};
use super::{RunningSource, SourceError};
use shoal_proto::security::ca::material::{
    CA_CERT_FILE, CA_KEY_FILE, CERT_CHAIN_FILE, ROOT_CERT_FILE,
};
use shoal_proto::security::ca::rotation::DEFAULT_PLUGIN_POLL_INTERVAL;
use shoal_proto::security::ca::{PluginCerts, SigningMaterial};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginDirConfig {
    /// The directory holding the four files (istiod: `/etc/cacerts`).
    pub dir: PathBuf,
    /// How often the files are re-read.
    pub poll_interval: Duration,
}

impl PluginDirConfig {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        PluginDirConfig {
            dir: dir.into(),
            poll_interval: DEFAULT_PLUGIN_POLL_INTERVAL,
        }
    }
}

/// True when `dir` holds a plug-in CA (istiod's test: `ca-key.pem` is there).
pub fn present(dir: &Path) -> bool {
    dir.join(CA_KEY_FILE).is_file()
}

fn read_files(dir: &Path) -> Result<PluginCerts, SourceError> {
    Ok(PluginCerts {
        ca_cert: read(&dir.join(CA_CERT_FILE))?,
        ca_key: read(&dir.join(CA_KEY_FILE))?,
        cert_chain: read_optional(&dir.join(CERT_CHAIN_FILE))?,
        root_cert: read(&dir.join(ROOT_CERT_FILE))?,
    })
}

fn load(dir: &Path) -> Result<(PluginCerts, SigningMaterial), SourceError> {
    let files = read_files(dir)?;
    let material = SigningMaterial::from_plugin(&files, SystemTime::now()).map_err(|source| {
        SourceError::Material {
            dir: dir.to_path_buf(),
            source,
        }
    })?;
    Ok((files, material))
}

pub(super) async fn start(config: PluginDirConfig) -> Result<RunningSource, SourceError> {
    let dir = config.dir.clone();
    let (files, material) = tokio::task::spawn_blocking(move || load(&dir))
        .await
        .map_err(|e| SourceError::Io {
            path: config.dir.clone(),
            source: std::io::Error::other(e),
        })??;
    tracing::info!(dir = %config.dir.display(), "CA: signing with the plug-in CA");
    let (tx, rx) = watch::channel(Arc::new(material));
    let task = tokio::spawn(poll(config, files, tx));
    Ok(RunningSource { material: rx, task })
}

/// Re-reads the files every interval; new valid contents are sent, invalid ones are
/// reported and the previous material kept (a half-written Secret update is retried).
async fn poll(
    config: PluginDirConfig,
    mut last: PluginCerts,
    tx: watch::Sender<Arc<SigningMaterial>>,
) {
    let mut tick = tokio::time::interval(config.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tx.closed() => return,
        }
        let dir = config.dir.clone();
        let Ok(read) = tokio::task::spawn_blocking(move || read_files(&dir)).await else {
            continue;
        };
        let files = match read {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "CA: plug-in files not readable; keeping the current material");
                continue;
            }
        };
        if files == last {
            continue;
        }
        match SigningMaterial::from_plugin(&files, SystemTime::now()) {
            Ok(material) => {
                tracing::info!(dir = %config.dir.display(), "CA: plug-in CA changed; signing with the new material");
                last = files;
                if tx.send(Arc::new(material)).is_err() {
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(dir = %config.dir.display(), error = %e, "CA: new plug-in files refused; keeping the current material")
            }
        }
    }
}
