//! The edge's identity plumbing, from its flags: the CA's signing material (istiod's
//! plug-in `cacerts` files, or a self-signed root), the certificate the secure listener
//! serves (issued by that CA and renewed, or an operator's files), and the authenticator
//! chain that streams on the secure listener, CA callers and remote `/debug` callers pass.
//!
//! ```text
//!  ca::source (plug-in dir | self-signed) ─► watch<SigningMaterial> ─┬─► CaService (CreateCertificate)
//!                                                                   └─► serving: cert + mesh root ─► TlsMaterial
//!  --tls-cert-file …  ─────────────────────────────────────────────────► TlsMaterial (instead)
//!  authenticators: client certificate ─► JWT (JWKS) ─► TokenReview  ─► Arc<dyn Authenticator>
//! ```

mod args;
mod authenticators;
pub mod serving;

pub use args::SecurityArgs;

use crate::ca::CaService;
use crate::ca::source::{self, PluginDirConfig, SelfSignedConfig, SourceConfig};
use crate::cli::XdsListenArgs;
use crate::tls::TlsMaterial;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use shoal_infra::runtime::DrainWatch;
use shoal_proto::security::Authenticator;
use shoal_proto::security::ca::{CertPolicy, SigningMaterial};
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
        let source_config = if source::plugin::present(&args.ca_plugin_dir) {
            let mut plugin = PluginDirConfig::new(&args.ca_plugin_dir);
            plugin.poll_interval = args.ca_plugin_poll;
            SourceConfig::Plugin(plugin)
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
        let authenticator = authenticators::chain(args, &listen.trust_domain).await?;
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
        })
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
