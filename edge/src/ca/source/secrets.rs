//! The signing material read through the API server, as istiod reads it: the plug-in CA
//! from the `cacerts` Secret when it holds `ca-key.pem`, else the self-signed root kept
//! in `istio-ca-secret` (created if absent: the first edge to create it wins, the others
//! read the winner's), both in the system namespace. The chosen Secret is followed with
//! a watch, so a new intermediate (or another edge's renewed root) is used as soon as the
//! API server reports it; a self-signed root is re-issued in its last fifth of life and
//! written back with its resourceVersion, so two edges renewing at once agree on one.
//!
//! Needs, in the system namespace: `get`, `list`, `watch` on both Secrets, `create` on
//! Secrets and `update` on `istio-ca-secret` (the chart's Role).

use super::{RunningSource, SourceError};
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use shoal_proto::security::ca::material::{
    CA_CERT_FILE, CA_KEY_FILE, CERT_CHAIN_FILE, ROOT_CERT_FILE,
};
use shoal_proto::security::ca::rotation::{ROOT_CHECK_INTERVAL, root_needs_rotation};
use shoal_proto::security::ca::{DEFAULT_SELF_SIGNED_ROOT_TTL, PluginCerts, SigningMaterial};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// istiod's plug-in CA Secret.
pub const PLUGIN_SECRET: &str = "cacerts";
/// istiod's self-signed root Secret.
pub const SELF_SIGNED_SECRET: &str = "istio-ca-secret";
/// The type istiod gives `istio-ca-secret`.
const SELF_SIGNED_SECRET_TYPE: &str = "istio.io/ca-root";

#[derive(Clone)]
pub struct KubeSecretsConfig {
    pub client: kube::Client,
    /// The system namespace, where both Secrets live.
    pub namespace: String,
    /// The self-signed root's organization.
    pub trust_domain: String,
    pub root_ttl: Duration,
    /// How often a self-signed root is checked for renewal.
    pub check_interval: Duration,
}

impl std::fmt::Debug for KubeSecretsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSecretsConfig")
            .field("namespace", &self.namespace)
            .field("trust_domain", &self.trust_domain)
            .field("root_ttl", &self.root_ttl)
            .field("check_interval", &self.check_interval)
            .finish_non_exhaustive()
    }
}

impl KubeSecretsConfig {
    pub fn new(
        client: kube::Client,
        namespace: impl Into<String>,
        trust_domain: impl Into<String>,
    ) -> Self {
        KubeSecretsConfig {
            client,
            namespace: namespace.into(),
            trust_domain: trust_domain.into(),
            root_ttl: DEFAULT_SELF_SIGNED_ROOT_TTL,
            check_interval: ROOT_CHECK_INTERVAL,
        }
    }

    fn secret(&self, name: &str) -> String {
        format!("Secret {}/{name}", self.namespace)
    }
}

/// What the followed Secret held last, to tell a real change from a resync.
#[derive(PartialEq)]
enum Held {
    Plugin(PluginCerts),
    SelfSigned { cert: String, key: String },
}

pub(super) async fn start(config: KubeSecretsConfig) -> Result<RunningSource, SourceError> {
    let api: Api<Secret> = Api::namespaced(config.client.clone(), &config.namespace);
    let api_error = |name: &str| {
        let secret = config.secret(name);
        move |source: kube::Error| SourceError::Api { secret, source }
    };
    let plugin = api
        .get_opt(PLUGIN_SECRET)
        .await
        .map_err(api_error(PLUGIN_SECRET))?;
    let (name, held, material, version) = match plugin.filter(|s| has_key(s, CA_KEY_FILE)) {
        Some(secret) => {
            let name = config.secret(PLUGIN_SECRET);
            let certs = plugin_certs(&secret).map_err(|reason| SourceError::Secret {
                secret: name.clone(),
                reason,
            })?;
            let material =
                SigningMaterial::from_plugin(&certs, SystemTime::now()).map_err(|e| {
                    SourceError::Secret {
                        secret: name.clone(),
                        reason: e.to_string(),
                    }
                })?;
            tracing::info!(secret = %name, "CA: signing with the plug-in CA");
            (
                PLUGIN_SECRET,
                Held::Plugin(certs),
                material,
                secret.metadata.resource_version,
            )
        }
        None => {
            let (secret, material) = load_or_create_root(&config, &api).await?;
            let held = self_signed_held(&secret).map_err(|reason| SourceError::Secret {
                secret: config.secret(SELF_SIGNED_SECRET),
                reason,
            })?;
            (
                SELF_SIGNED_SECRET,
                held,
                material,
                secret.metadata.resource_version,
            )
        }
    };
    let (tx, rx) = watch::channel(Arc::new(material));
    let follower = Follower {
        config,
        api,
        name,
        held,
        version,
    };
    let task = tokio::spawn(follower.run(tx));
    Ok(RunningSource { material: rx, task })
}

/// Reads `istio-ca-secret`, or creates it with a new root; on losing the creation race
/// reads the winner's.
async fn load_or_create_root(
    config: &KubeSecretsConfig,
    api: &Api<Secret>,
) -> Result<(Secret, SigningMaterial), SourceError> {
    let name = config.secret(SELF_SIGNED_SECRET);
    let api_error = |source| SourceError::Api {
        secret: name.clone(),
        source,
    };
    if let Some(secret) = api.get_opt(SELF_SIGNED_SECRET).await.map_err(api_error)? {
        let material = self_signed_material(&secret).map_err(|reason| SourceError::Secret {
            secret: name.clone(),
            reason,
        })?;
        tracing::info!(secret = %name, "CA: signing with the self-signed root it holds");
        return Ok((secret, material));
    }
    let material =
        SigningMaterial::self_signed(&config.trust_domain, config.root_ttl, SystemTime::now())?;
    let (cert, key) = material
        .istio_ca_secret_pem()
        .expect("a self-signed root has istio-ca-secret's contents");
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(SELF_SIGNED_SECRET.into()),
            namespace: Some(config.namespace.clone()),
            ..Default::default()
        },
        type_: Some(SELF_SIGNED_SECRET_TYPE.into()),
        data: Some(BTreeMap::from([
            (CA_CERT_FILE.to_string(), ByteString(cert.into_bytes())),
            (CA_KEY_FILE.to_string(), ByteString(key.into_bytes())),
        ])),
        ..Default::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(created) => {
            tracing::info!(secret = %name, "CA: created a self-signed root");
            Ok((created, material))
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let secret = api.get(SELF_SIGNED_SECRET).await.map_err(api_error)?;
            let material = self_signed_material(&secret).map_err(|reason| SourceError::Secret {
                secret: name.clone(),
                reason,
            })?;
            tracing::info!(secret = %name, "CA: another edge created the self-signed root; signing with it");
            Ok((secret, material))
        }
        Err(source) => Err(api_error(source)),
    }
}

/// Follows the chosen Secret; renews a self-signed root when due.
struct Follower {
    config: KubeSecretsConfig,
    api: Api<Secret>,
    name: &'static str,
    held: Held,
    /// The resourceVersion of what is held (a renewal replaces exactly it).
    version: Option<String>,
}

impl Follower {
    async fn run(mut self, tx: watch::Sender<Arc<SigningMaterial>>) {
        let mut events = watcher(
            self.api.clone(),
            watcher::Config::default().fields(&format!("metadata.name={}", self.name)),
        )
        .default_backoff()
        .boxed();
        let self_signed = matches!(self.held, Held::SelfSigned { .. });
        let mut tick = tokio::time::interval(self.config.check_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            let next = tokio::select! {
                _ = tx.closed() => return,
                _ = tick.tick(), if self_signed => {
                    let current = tx.borrow().clone();
                    self.renew_if_due(&current).await
                }
                Some(event) = events.next() => match event {
                    Ok(watcher::Event::Apply(secret) | watcher::Event::InitApply(secret)) => self.read(secret),
                    Ok(watcher::Event::Delete(_)) => {
                        tracing::warn!(secret = %self.config.secret(self.name), "CA: the Secret was deleted; signing with the material already read");
                        None
                    }
                    Ok(_) => None,
                    Err(error) => {
                        tracing::warn!(secret = %self.config.secret(self.name), %error, "CA: watching the Secret failed; retrying");
                        None
                    }
                },
            };
            if let Some(material) = next
                && tx.send(Arc::new(material)).is_err()
            {
                return;
            }
        }
    }

    /// New material from the Secret as the API server has it, if it changed and is valid.
    fn read(&mut self, secret: Secret) -> Option<SigningMaterial> {
        let name = self.config.secret(self.name);
        let parsed = match self.held {
            Held::Plugin(_) => plugin_certs(&secret).and_then(|certs| {
                let material = SigningMaterial::from_plugin(&certs, SystemTime::now())
                    .map_err(|e| e.to_string())?;
                Ok((Held::Plugin(certs), material))
            }),
            Held::SelfSigned { .. } => self_signed_held(&secret)
                .and_then(|held| Ok((held, self_signed_material(&secret)?))),
        };
        match parsed {
            Ok((held, _)) if held == self.held => {
                self.version = secret.metadata.resource_version;
                None
            }
            Ok((held, material)) => {
                tracing::info!(secret = %name, "CA: the Secret changed; signing with its new material");
                self.held = held;
                self.version = secret.metadata.resource_version;
                Some(material)
            }
            Err(reason) => {
                tracing::warn!(secret = %name, %reason, "CA: the Secret's new contents refused; keeping the current material");
                None
            }
        }
    }

    /// Re-issues the self-signed root in its last fifth and writes it back; a conflict
    /// means another edge renewed first, and its root arrives on the watch.
    async fn renew_if_due(&mut self, current: &SigningMaterial) -> Option<SigningMaterial> {
        let (from, to) = current.issuer_validity();
        if !root_needs_rotation(from, to, SystemTime::now()) {
            return None;
        }
        let name = self.config.secret(SELF_SIGNED_SECRET);
        let renewed = match current.renew_self_signed(
            &self.config.trust_domain,
            self.config.root_ttl,
            SystemTime::now(),
        ) {
            Ok(renewed) => renewed,
            Err(error) => {
                tracing::error!(secret = %name, %error, "CA: the self-signed root could not be re-issued");
                return None;
            }
        };
        let (cert, key) = renewed.istio_ca_secret_pem().expect("self-signed");
        let mut secret = Secret {
            metadata: ObjectMeta {
                name: Some(SELF_SIGNED_SECRET.into()),
                namespace: Some(self.config.namespace.clone()),
                resource_version: self.version.clone(),
                ..Default::default()
            },
            type_: Some(SELF_SIGNED_SECRET_TYPE.into()),
            ..Default::default()
        };
        secret.data = Some(BTreeMap::from([
            (
                CA_CERT_FILE.to_string(),
                ByteString(cert.clone().into_bytes()),
            ),
            (
                CA_KEY_FILE.to_string(),
                ByteString(key.clone().into_bytes()),
            ),
        ]));
        match self
            .api
            .replace(SELF_SIGNED_SECRET, &PostParams::default(), &secret)
            .await
        {
            Ok(written) => {
                tracing::info!(secret = %name, "CA: self-signed root re-issued in its last fifth of life (same key)");
                self.held = Held::SelfSigned { cert, key };
                self.version = written.metadata.resource_version;
                Some(renewed)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                tracing::info!(secret = %name, "CA: another edge renewed the root first; using its root");
                None
            }
            Err(error) => {
                tracing::warn!(secret = %name, %error, "CA: the renewed root was not written; retried at the next check");
                None
            }
        }
    }
}

fn has_key(secret: &Secret, key: &str) -> bool {
    secret.data.as_ref().is_some_and(|d| d.contains_key(key))
}

/// A key's value as text; `None` when absent.
fn text(secret: &Secret, key: &str) -> Result<Option<String>, String> {
    match secret.data.as_ref().and_then(|d| d.get(key)) {
        None => Ok(None),
        Some(bytes) => String::from_utf8(bytes.0.clone())
            .map(Some)
            .map_err(|_| format!("{key} is not UTF-8 PEM")),
    }
}

fn required(secret: &Secret, key: &str) -> Result<String, String> {
    text(secret, key)?.ok_or_else(|| format!("{key} is missing"))
}

fn plugin_certs(secret: &Secret) -> Result<PluginCerts, String> {
    Ok(PluginCerts {
        ca_cert: required(secret, CA_CERT_FILE)?,
        ca_key: required(secret, CA_KEY_FILE)?,
        cert_chain: text(secret, CERT_CHAIN_FILE)?.filter(|c| !c.trim().is_empty()),
        root_cert: required(secret, ROOT_CERT_FILE)?,
    })
}

fn self_signed_held(secret: &Secret) -> Result<Held, String> {
    Ok(Held::SelfSigned {
        cert: required(secret, CA_CERT_FILE)?,
        key: required(secret, CA_KEY_FILE)?,
    })
}

fn self_signed_material(secret: &Secret) -> Result<SigningMaterial, String> {
    SigningMaterial::from_istio_ca_secret(
        &required(secret, CA_CERT_FILE)?,
        &required(secret, CA_KEY_FILE)?,
        SystemTime::now(),
    )
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
