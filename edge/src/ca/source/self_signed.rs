//! A self-signed root acting as issuer, as istiod keeps one in `istio-ca-secret`
//! (`ca-cert.pem`, `ca-key.pem`): in a directory, created if absent (edges sharing the
//! directory agree on one root: the first to link its certificate into place wins, the
//! others read it), or in memory. Re-issued in its last fifth of life with the same key.

use super::files::{io_err, read_optional, write_temp};
use super::{RunningSource, SourceError};
use shoal_proto::security::ca::rotation::{ROOT_CHECK_INTERVAL, root_needs_rotation};
use shoal_proto::security::ca::{DEFAULT_SELF_SIGNED_ROOT_TTL, SigningMaterial};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// istio-ca-secret's key names.
const CERT_FILE: &str = "ca-cert.pem";
const KEY_FILE: &str = "ca-key.pem";
/// How long a reader waits for another edge to finish writing the key after the cert.
const PEER_WRITE_WAIT: Duration = Duration::from_secs(5);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelfSignedConfig {
    /// The root's organization (istiod: the trust domain).
    pub trust_domain: String,
    /// Where the root is kept; `None`: in memory only (lost on restart, one per edge).
    pub dir: Option<PathBuf>,
    pub root_ttl: Duration,
    /// How often the root is checked for renewal (and the directory re-read).
    pub check_interval: Duration,
}

impl SelfSignedConfig {
    pub fn new(trust_domain: impl Into<String>, dir: Option<PathBuf>) -> Self {
        SelfSignedConfig {
            trust_domain: trust_domain.into(),
            dir,
            root_ttl: DEFAULT_SELF_SIGNED_ROOT_TTL,
            check_interval: ROOT_CHECK_INTERVAL,
        }
    }
}

/// Reads the root from `dir`, or creates it there if absent.
fn load_or_create(
    dir: &Path,
    trust_domain: &str,
    ttl: Duration,
) -> Result<SigningMaterial, SourceError> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    if let Some(material) = read_existing(dir)? {
        return Ok(material);
    }
    let material = SigningMaterial::self_signed(trust_domain, ttl, SystemTime::now())?;
    let (cert_pem, key_pem) = material
        .istio_ca_secret_pem()
        .expect("a self-signed root has istio-ca-secret files");
    let key_tmp = write_temp(&key, &key_pem)?;
    let cert_tmp = write_temp(&cert, &cert_pem)?;
    // The certificate decides the race: hard_link fails if another edge linked first.
    let won = std::fs::hard_link(&cert_tmp, &cert);
    let _ = std::fs::remove_file(&cert_tmp);
    match won {
        Ok(()) => {
            std::fs::rename(&key_tmp, &key).map_err(io_err(&key))?;
            tracing::info!(dir = %dir.display(), "CA: created a self-signed root (istio-ca-secret files)");
            Ok(material)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(&key_tmp);
            read_existing(dir)?.ok_or_else(|| SourceError::Io {
                path: key.clone(),
                source: std::io::Error::other(
                    "another writer created the certificate but not its key",
                ),
            })
        }
        Err(e) => {
            let _ = std::fs::remove_file(&key_tmp);
            Err(SourceError::Io {
                path: cert,
                source: e,
            })
        }
    }
}

/// The root in `dir`, if there is one; waits briefly for a key another edge is writing.
fn read_existing(dir: &Path) -> Result<Option<SigningMaterial>, SourceError> {
    let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    let Some(cert_pem) = read_optional(&cert)? else {
        return Ok(None);
    };
    let deadline = std::time::Instant::now() + PEER_WRITE_WAIT;
    let key_pem = loop {
        if let Some(k) = read_optional(&key)? {
            break k;
        }
        if std::time::Instant::now() >= deadline {
            return Err(SourceError::Io {
                path: key,
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{CERT_FILE} exists without its key"),
                ),
            });
        }
        // Runs on a blocking thread (spawn_blocking), never on a tokio worker.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(50));
    };
    SigningMaterial::from_istio_ca_secret(&cert_pem, &key_pem, SystemTime::now())
        .map(Some)
        .map_err(|source| SourceError::Material {
            dir: dir.to_path_buf(),
            source,
        })
}

/// Writes a renewed root's certificate (the key is unchanged) into place.
fn persist_renewed(dir: &Path, material: &SigningMaterial) -> Result<(), SourceError> {
    let cert = dir.join(CERT_FILE);
    let (cert_pem, _) = material.istio_ca_secret_pem().expect("self-signed");
    let tmp = write_temp(&cert, &cert_pem)?;
    std::fs::rename(&tmp, &cert).map_err(io_err(&cert))
}

pub(super) async fn start(config: SelfSignedConfig) -> Result<RunningSource, SourceError> {
    let c = config.clone();
    let material = tokio::task::spawn_blocking(move || match &c.dir {
        Some(dir) => load_or_create(dir, &c.trust_domain, c.root_ttl),
        None => SigningMaterial::self_signed(&c.trust_domain, c.root_ttl, SystemTime::now())
            .map_err(SourceError::from),
    })
    .await
    .map_err(|e| SourceError::Io {
        path: PathBuf::from("(self-signed root)"),
        source: std::io::Error::other(e),
    })??;
    if config.dir.is_none() {
        tracing::info!("CA: signing with a self-signed root kept in memory only");
    }
    let (tx, rx) = watch::channel(Arc::new(material));
    let task = tokio::spawn(keep_current(config, tx));
    Ok(RunningSource { material: rx, task })
}

async fn keep_current(config: SelfSignedConfig, tx: watch::Sender<Arc<SigningMaterial>>) {
    let mut tick = tokio::time::interval(config.check_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tx.closed() => return,
        }
        let current = tx.borrow().clone();
        let c = config.clone();
        let next = tokio::task::spawn_blocking(move || check(&c, &current)).await;
        match next {
            Ok(Ok(Some(material))) => {
                if tx.send(Arc::new(material)).is_err() {
                    return;
                }
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "CA: self-signed root check failed; keeping the current root")
            }
            Err(e) => tracing::warn!(error = %e, "CA: self-signed root check panicked"),
        }
    }
}

/// Another edge's renewal (the directory changed) or our own, when due.
fn check(
    config: &SelfSignedConfig,
    current: &SigningMaterial,
) -> Result<Option<SigningMaterial>, SourceError> {
    let mut base = None;
    if let Some(dir) = &config.dir
        && let Some(on_disk) = read_existing(dir)?
        && on_disk.issuer_der() != current.issuer_der()
    {
        tracing::info!(dir = %dir.display(), "CA: the self-signed root was replaced on disk; using it");
        base = Some(on_disk);
    }
    let (from, to) = base.as_ref().unwrap_or(current).issuer_validity();
    if !root_needs_rotation(from, to, SystemTime::now()) {
        return Ok(base);
    }
    let renewed = base.as_ref().unwrap_or(current).renew_self_signed(
        &config.trust_domain,
        config.root_ttl,
        SystemTime::now(),
    )?;
    if let Some(dir) = &config.dir {
        persist_renewed(dir, &renewed)?;
    }
    tracing::info!("CA: self-signed root re-issued in its last fifth of life (same key)");
    Ok(Some(renewed))
}
