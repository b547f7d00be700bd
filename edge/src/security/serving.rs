//! The certificate the secure listener serves (and relays with), issued by this edge's
//! own CA: re-issued at half-life and whenever the signing material changes (a new
//! intermediate, a renewed root), with the mesh root store kept beside it.

use crate::tls::TlsMaterial;
use crate::tls::keys::{certified_key, root_store};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::sign::CertifiedKey;
use shoal_proto::security::SpiffeId;
use shoal_proto::security::ca::SigningMaterial;
use shoal_proto::security::ca::rotation::serving_needs_renewal;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// What the serving certificate names and how long it lives.
#[derive(Clone, Debug)]
pub struct ServingConfig {
    pub dns_names: Vec<String>,
    pub identity: SpiffeId,
    pub ttl: Duration,
}

struct Issued {
    cert: Arc<CertifiedKey>,
    roots: Arc<RootCertStore>,
    not_before: SystemTime,
    not_after: SystemTime,
}

fn issue(material: &SigningMaterial, config: &ServingConfig) -> Result<Issued, String> {
    let serving = material
        .issue_serving(
            &config.dns_names,
            Some(&config.identity),
            config.ttl,
            SystemTime::now(),
        )
        .map_err(|e| e.to_string())?;
    let cert = certified_key(serving.chain_pem.as_bytes(), serving.key_pem.as_bytes())
        .map_err(|e| e.to_string())?;
    let roots = root_store(
        material
            .root_ders()
            .iter()
            .map(|der| CertificateDer::from(der.as_slice())),
    )?;
    Ok(Issued {
        cert,
        roots,
        not_before: serving.not_before,
        not_after: serving.not_after,
    })
}

/// Issues the first certificate from `material` and returns the listener's
/// [`TlsMaterial`], with the task that keeps it current until `stop` resolves.
pub fn start(
    mut material: watch::Receiver<Arc<SigningMaterial>>,
    config: ServingConfig,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(TlsMaterial, impl Future<Output = ()> + Send + 'static), String> {
    let first = issue(&material.borrow_and_update(), &config)?;
    let (cert_tx, cert) = watch::channel(first.cert);
    let (roots_tx, roots) = watch::channel(first.roots);
    let mut validity = (first.not_before, first.not_after);
    let task = async move {
        let mut stop = std::pin::pin!(stop);
        loop {
            // Half-life, or a minute when that is already past (a failed renewal retries).
            let due = validity.0 + (validity.1.duration_since(validity.0).unwrap_or_default() / 2);
            let wait = due
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::from_secs(60));
            tokio::select! {
                _ = &mut stop => return,
                changed = material.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(wait) => {
                    if !serving_needs_renewal(validity.0, validity.1, SystemTime::now()) {
                        continue;
                    }
                }
            }
            let current = material.borrow_and_update().clone();
            match issue(&current, &config) {
                Ok(issued) => {
                    validity = (issued.not_before, issued.not_after);
                    cert_tx.send_replace(issued.cert);
                    roots_tx.send_replace(issued.roots);
                    tracing::info!(names = ?config.dns_names, "serving certificate re-issued");
                }
                Err(error) => {
                    tracing::error!(%error, "serving certificate not re-issued; serving the previous one");
                    validity = (
                        SystemTime::now() - Duration::from_secs(1),
                        SystemTime::now(),
                    );
                }
            }
        }
    };
    Ok((TlsMaterial { cert, roots }, task))
}
