//! The secret manager (the agent's `security/pkg/nodeagent/cache`): a key and CSR per
//! certificate, the CA's answer published on a `watch` channel for SDS, and a renewal
//! when `SECRET_GRACE_PERIOD_RATIO` of its life is left, failed requests retried with a
//! doubling backoff capped at `--ca-retry-max`.

use crate::ca_client::CaClient;
use crate::config::Config;
use anyhow::Context;
use rcgen::{CertificateParams, DistinguishedName, KeyPair, PKCS_ECDSA_P256_SHA256, SanType};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tracing::{info, warn};

/// One workload certificate and its key, as SDS serves them.
pub struct WorkloadSecret {
    /// Counts certificates issued to this agent: the SDS version.
    pub generation: u64,
    /// The leaf, then the intermediates (PEM).
    pub chain_pem: String,
    pub key_pem: String,
    /// The root bundle, the last element of the CA's answer (`ROOTCA`).
    pub root_pem: String,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl std::fmt::Debug for WorkloadSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadSecret")
            .field("generation", &self.generation)
            .field("not_after", &self.not_after)
            .field("key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

pub struct SecretManager {
    rx: watch::Receiver<Arc<WorkloadSecret>>,
}

impl SecretManager {
    /// Gets the first certificate (retrying until it has one), then renews in the
    /// background for as long as the process runs.
    pub async fn start(ca: CaClient, cfg: Config) -> anyhow::Result<SecretManager> {
        let first = fetch_with_retry(&ca, &cfg, 1).await;
        let (tx, rx) = watch::channel(Arc::new(first));
        tokio::spawn(renew_loop(ca, cfg, tx));
        Ok(SecretManager { rx })
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<WorkloadSecret>> {
        self.rx.clone()
    }
}

async fn renew_loop(ca: CaClient, cfg: Config, tx: watch::Sender<Arc<WorkloadSecret>>) {
    loop {
        let current = tx.borrow().clone();
        let wait = renew_at(&current, cfg.grace_ratio)
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO);
        tokio::time::sleep(wait).await;
        let next = fetch_with_retry(&ca, &cfg, current.generation + 1).await;
        if tx.send(Arc::new(next)).is_err() {
            return;
        }
    }
}

/// When `ratio` of the certificate's life is left.
pub fn renew_at(secret: &WorkloadSecret, ratio: f64) -> SystemTime {
    let life = secret
        .not_after
        .duration_since(secret.not_before)
        .unwrap_or(Duration::ZERO);
    secret.not_after - life.mul_f64(ratio)
}

async fn fetch_with_retry(ca: &CaClient, cfg: &Config, generation: u64) -> WorkloadSecret {
    let mut backoff = Duration::from_millis(500);
    loop {
        match fetch(ca, cfg, generation).await {
            Ok(s) => {
                info!(
                    generation,
                    spiffe = %cfg.spiffe_id,
                    expires_in_s = s.not_after.duration_since(SystemTime::now()).map(|d| d.as_secs()).unwrap_or(0),
                    "workload certificate issued"
                );
                return s;
            }
            Err(e) => {
                warn!(error = format!("{e:#}"), retry_in = ?backoff, "certificate request failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(cfg.retry_max);
            }
        }
    }
}

async fn fetch(ca: &CaClient, cfg: &Config, generation: u64) -> anyhow::Result<WorkloadSecret> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).context("generate a P-256 key")?;
    let mut params = CertificateParams::new(Vec::<String>::new()).context("CSR parameters")?;
    params.distinguished_name = DistinguishedName::new();
    params.subject_alt_names = vec![SanType::URI(
        cfg.spiffe_id
            .clone()
            .try_into()
            .context("the SPIFFE ID is not an IA5 string")?,
    )];
    let csr = params
        .serialize_request(&key)
        .context("sign the CSR")?
        .pem()
        .context("encode the CSR")?;
    let asked = SystemTime::now();
    let chain = ca.create_certificate(csr, cfg.secret_ttl).await?;
    let (leaf_and_intermediates, root) = chain.split_at(chain.len() - 1);
    let (not_before, not_after) = validity(&chain[0])?;
    let mut chain_pem = String::new();
    for cert in if leaf_and_intermediates.is_empty() {
        &chain[..]
    } else {
        leaf_and_intermediates
    } {
        chain_pem.push_str(cert.trim_end());
        chain_pem.push('\n');
    }
    Ok(WorkloadSecret {
        generation,
        chain_pem,
        key_pem: key.serialize_pem(),
        root_pem: root[0].clone(),
        // The CA backdates notBefore for clock skew; the life left is counted from the
        // request, else a short TTL would be renewed at once, again and again.
        not_before: not_before.max(asked),
        not_after,
    })
}

/// The leaf's validity.
fn validity(leaf_pem: &str) -> anyhow::Result<(SystemTime, SystemTime)> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(leaf_pem.as_bytes())
        .map_err(|e| anyhow::anyhow!("the leaf is not PEM: {e}"))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| anyhow::anyhow!("the leaf is not X.509: {e}"))?;
    let at = |t: i64| UNIX_EPOCH + Duration::from_secs(u64::try_from(t).unwrap_or(0));
    Ok((
        at(cert.validity().not_before.timestamp()),
        at(cert.validity().not_after.timestamp()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renews_at_half_life_by_default() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000);
        let s = WorkloadSecret {
            generation: 1,
            chain_pem: String::new(),
            key_pem: "secret".into(),
            root_pem: String::new(),
            not_before: t0,
            not_after: t0 + Duration::from_secs(100),
        };
        assert_eq!(renew_at(&s, 0.5), t0 + Duration::from_secs(50));
        assert_eq!(renew_at(&s, 0.0), t0 + Duration::from_secs(100));
        assert!(!format!("{s:?}").contains("secret\""));
    }
}
