//! The edge's identity plumbing, from its flags: the CA's signing material (istiod's
//! plug-in `cacerts` files, or a self-signed root), the certificate the secure listener
//! serves (issued by that CA and renewed, or an operator's files), and the authenticator
//! chain that streams on the secure listener, CA callers and remote `/debug` callers pass.
//!
//! ```text
//!  ca::source (plug-in dir | Secrets | self-signed) ─► watch<SigningMaterial> ─┬─► CaService (CreateCertificate)
//!                                                                             ├─► serving: cert + mesh root ─► TlsMaterial
//!                                                                             └─► ca::root_cert (istio-ca-root-cert)
//!  --tls-cert-file …  ─────────────────────────────────────────────────► TlsMaterial (instead)
//!  authenticators: client certificate ─► JWT (JWKS) ─► TokenReview  ─► Arc<dyn Authenticator>
//! ```

mod args;
mod authenticators;
pub mod serving;

pub use args::SecurityArgs;

use crate::ca::CaService;
use crate::ca::root_cert::{self, Ownership, RootCertConfig};
use crate::ca::source::{self, KubeSecretsConfig, PluginDirConfig, SelfSignedConfig, SourceConfig};
use crate::cli::XdsListenArgs;
use crate::tls::TlsMaterial;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use shoal_infra::runtime::DrainWatch;
use shoal_proto::security::Authenticator;
use shoal_proto::security::ca::{CertPolicy, SigningMaterial};
use shoal_proto::security::root_cert::NamespaceFilter;
use std::sync::Arc;
use tokio::sync::watch;

/// Why the edge's security could not be set up. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    #[error("the CA's signing material: {0}")]
    Ca(#[from] source::SourceError),
    #[error("the serving certificate: {0}")]
    Serving(String),
    #[error("the TLS files: {0}")]
    Files(#[from] crate::tls::files::FilesError),
    #[error("authenticators: {0}")]
    Authn(String),
    #[error("the Kubernetes API: {0}")]
    Kubernetes(String),
}

/// What the secure listener and the admin server are built from.
pub struct EdgeSecurity {
    /// The serving certificate and mesh root.
    pub tls: TlsMaterial,
    pub authenticator: Arc<dyn Authenticator>,
    /// `CreateCertificate`, served on the secure listener.
    pub ca: CaService,
    /// The CA's current material (its root bundle is what clients pin).
    pub material: watch::Receiver<Arc<SigningMaterial>>,
    /// Keep the CA source, the serving renewal and the file reloads running; they end
    /// at `stop`.
    pub tasks: Vec<BoxFuture<'static, ()>>,
    /// The API server's client, where the edge uses one.
    kube: Option<kube::Client>,
    /// How istio-ca-root-cert is published (`--publish-root-cert`).
    root_cert: Option<RootCertConfig>,
}

impl EdgeSecurity {
    /// [`EdgeSecurity::start`], its tasks spawned to run until `drain` starts (the edge
    /// binary and the all-in-one).
    pub async fn spawn(
        listen: &XdsListenArgs,
        args: &SecurityArgs,
        registry: &mut Registry,
        drain: DrainWatch,
    ) -> Result<EdgeSecurity, SecurityError> {
        let mut security =
            EdgeSecurity::start(listen, args, registry, move || Box::pin(drain.wait())).await?;
        for task in std::mem::take(&mut security.tasks) {
            tokio::spawn(task);
        }
        Ok(security)
    }

    /// Loads the signing material (refusing to start on a broken plug-in CA, as istiod),
    /// issues the serving certificate (unless files are given), builds the authenticators.
    pub async fn start(
        listen: &XdsListenArgs,
        args: &SecurityArgs,
        registry: &mut Registry,
        stop: impl Fn() -> BoxFuture<'static, ()>,
    ) -> Result<EdgeSecurity, SecurityError> {
        let kube = if args.uses_kubernetes() {
            Some(
                crate::kubernetes::client(args.kubeconfig.as_deref())
                    .await
                    .map_err(SecurityError::Kubernetes)?,
            )
        } else {
            None
        };
        let source_config = if source::plugin::present(&args.ca_plugin_dir) {
            let mut plugin = PluginDirConfig::new(&args.ca_plugin_dir);
            plugin.poll_interval = args.ca_plugin_poll;
            SourceConfig::Plugin(plugin)
        } else if let Some(client) = kube.clone().filter(|_| args.ca_from_kubernetes) {
            SourceConfig::Kubernetes(KubeSecretsConfig::new(
                client,
                &listen.system_namespace,
                &listen.trust_domain,
            ))
        } else {
            SourceConfig::SelfSigned(SelfSignedConfig::new(
                &listen.trust_domain,
                args.ca_root_dir.clone(),
            ))
        };
        let running = source::start(source_config).await?;
        let material = running.material.clone();
        let ca_task = running.task;
        let mut tasks: Vec<BoxFuture<'static, ()>> = vec![Box::pin(async move {
            // The source ends with its receivers; stopping it sooner is an abort.
            let _ = ca_task.await;
        })];
        let tls = match listen.cert_files() {
            Some(files) => {
                let (tls, reload) = files.watch(listen.tls_reload_interval, stop())?;
                tasks.push(Box::pin(reload));
                tls
            }
            None => {
                let config = serving::ServingConfig {
                    dns_names: dns_names(listen, args),
                    identity: listen.edge_identity(),
                    ttl: args.serving_cert_ttl,
                };
                let (tls, renew) = serving::start(material.clone(), config, stop())
                    .map_err(SecurityError::Serving)?;
                tasks.push(Box::pin(renew));
                tls
            }
        };
        let authenticator = authenticators::chain(args, &listen.trust_domain, kube.clone()).await?;
        let policy = CertPolicy {
            default_ttl: args.workload_cert_ttl,
            max_ttl: args.max_workload_cert_ttl,
        };
        let ca = CaService::new(authenticator.clone(), material.clone(), policy, registry);
        Ok(EdgeSecurity {
            tls,
            authenticator,
            ca,
            material,
            tasks,
            kube,
            root_cert: args.publish_root_cert.then(|| RootCertConfig {
                filter: NamespaceFilter {
                    namespaces: args.root_cert_namespaces.clone(),
                    discovery_selectors: args.root_cert_discovery_selectors.clone(),
                },
                writes_per_second: args.root_cert_writes_per_second,
                ..RootCertConfig::default()
            }),
        })
    }

    /// With `--publish-root-cert`: the task keeping istio-ca-root-cert in every mesh
    /// namespace until `stop`, writing the namespaces `ownership` gives this edge.
    pub fn root_cert_publisher(
        &self,
        ownership: Ownership,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Option<impl Future<Output = ()> + Send + 'static> {
        let (client, config) = (self.kube.clone()?, self.root_cert.clone()?);
        Some(root_cert::run(
            client,
            config,
            self.material.clone(),
            ownership,
            stop,
        ))
    }
}

/// The names agents reach the edges by: istiod's Service (so an agent configured for
/// istiod works unchanged), the edges' own Service, and any given.
fn dns_names(listen: &XdsListenArgs, args: &SecurityArgs) -> Vec<String> {
    let ns = &listen.system_namespace;
    let mut names = Vec::new();
    for service in ["istiod", listen.service_account.as_str()] {
        names.push(format!("{service}.{ns}.svc"));
        names.push(format!("{service}.{ns}"));
        names.push(service.to_string());
    }
    names.extend(args.xds_dns_names.iter().cloned());
    names.sort();
    names.dedup();
    names
}
