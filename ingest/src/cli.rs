//! The `ingest` binary's wiring: flags, NATS, the admin server, signals and drain.

use crate::kubernetes::discovery::LabelSelector;
use crate::kubernetes::remote::{RemoteClusters, RemoteClustersConfig};
use crate::kubernetes::{self, ClusterHealth, Clusters, KubeSource, KubeSourceConfig};
use crate::{Ingest, IngestConfig};
use anyhow::Context;
use clap::{ArgAction, Parser};
use prometheus_client::registry::Registry;
use shoal_infra::admin::AdminServer;
use shoal_infra::cli::{DrainArgs, HttpArgs, NatsArgs, UsageError, duration};
use shoal_infra::nats::{NatsBus, NatsConfigKv};
use shoal_infra::supervisor::Supervisor;
use shoal_infra::telemetry::TelemetryArgs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Shoal ingest: serves a directory of Kubernetes and Istio YAML to the mesh — writes
/// each object to the config KV and publishes debounced push requests.
///
/// Unlike the other tiers, ingest takes no default NATS URL (it must be told where its
/// cluster's config goes). Admin HTTP listens on loopback unless `--http-addr` says
/// otherwise (the chart sets `0.0.0.0:15014`, for probes and scraping).
#[derive(Debug, Parser)]
#[command(
    name = "ingest",
    version,
    mut_arg("nats_url", |a| a.default_value(None).required(true))
)]
pub struct Args {
    /// Where the config comes from: a directory of YAML (`dir`) or the cluster's
    /// Kubernetes API server (`kubernetes`). Default: `kubernetes` when `--kubeconfig`
    /// is given (istiod's habit), else `dir`.
    #[arg(long, env = "SHOAL_REGISTRY", value_enum)]
    pub registry: Option<RegistryKind>,
    /// Directory of `*.yaml` / `*.yml` files, read recursively and watched
    /// (`--registry dir`).
    #[arg(long, env = "SHOAL_CONFIG_DIR")]
    pub config_dir: Option<PathBuf>,
    /// Kubeconfig of the API server to watch; implies `--registry kubernetes`. Without
    /// it, `--registry kubernetes` uses the in-cluster config when run in a pod, else
    /// `$KUBECONFIG` / `~/.kube/config`.
    #[arg(long, env = "SHOAL_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Namespaces whose objects are read (`--registry kubernetes`), comma-separated;
    /// default: all.
    #[arg(long, env = "SHOAL_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,
    /// Istio's discovery selectors (`--registry kubernetes`): label selectors on
    /// Namespaces (`istio-discovery=enabled`, `env in (prod,staging)`); only the objects
    /// of namespaces one of them matches are read. Repeat the flag, or separate them
    /// with `;`. Default: every namespace.
    #[arg(
        long = "discovery-selector",
        env = "SHOAL_DISCOVERY_SELECTORS",
        value_delimiter = ';'
    )]
    pub discovery_selectors: Vec<LabelSelector>,
    /// Istio's system namespace (`--registry kubernetes`): where remote secrets are
    /// read, and whose `topology.istio.io/network` label names a remote cluster's network.
    #[arg(long, env = "SHOAL_SYSTEM_NAMESPACE", default_value = "istio-system")]
    pub system_namespace: String,
    /// Follow the remote clusters that Istio's remote secrets (Secrets labelled
    /// `istio/multiCluster: "true"` in the system namespace) name (`--registry kubernetes`).
    #[arg(long, env = "SHOAL_REMOTE_SECRETS", default_value_t = true, action = ArgAction::Set)]
    pub remote_secrets: bool,
    /// This cluster's ID: stamped on every object and prefixed to its KV keys.
    #[arg(long, env = "SHOAL_CLUSTER_ID")]
    pub cluster_id: String,
    #[command(flatten)]
    pub nats: NatsArgs,
    // Admin server: /metrics, /healthz/ready, /debug/{rejections,warnings,clusters}.
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// This cluster's network, labelled on Pods and WorkloadEntries that name none.
    /// Default with `--registry kubernetes`: the `topology.istio.io/network` label of the
    /// cluster's system namespace, as Istio reads it; none without one.
    #[arg(long, env = "SHOAL_NETWORK", default_value = "")]
    pub network: String,
    /// Quiet period before a push, counted from when the source saw the last change
    /// (e.g. `100ms`).
    #[arg(long, env = "SHOAL_DEBOUNCE_AFTER", default_value = "100ms", value_parser = duration)]
    pub debounce_after: Duration,
    /// Longest a push waits under a steady stream of events (e.g. `10s`).
    #[arg(long, env = "SHOAL_DEBOUNCE_MAX", default_value = "10s", value_parser = duration)]
    pub debounce_max: Duration,
    /// Debounce endpoint-only pushes too.
    #[arg(long, env = "SHOAL_ENABLE_EDS_DEBOUNCE", default_value_t = true, action = ArgAction::Set)]
    pub eds_debounce: bool,
    /// Full rescan period of the directory, in case a file event was missed (`0s`: off).
    #[arg(long, env = "SHOAL_RESYNC_INTERVAL", default_value = "60s", value_parser = duration)]
    pub resync_interval: Duration,
    /// Bound of the queue of changes waiting for their KV write.
    #[arg(long, env = "SHOAL_INGEST_CHANGE_QUEUE", default_value_t = 1024)]
    pub change_queue: usize,
    /// KV writes in flight at once while no push waits on them (the initial load and
    /// reconciles; each change that is pushed is written alone, in order).
    #[arg(long, env = "SHOAL_INGEST_KV_PIPELINE", default_value_t = 64)]
    pub kv_pipeline: usize,
    #[command(flatten)]
    pub drain: DrainArgs,
}

/// Where the ingest reads its config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RegistryKind {
    /// A directory of YAML files.
    Dir,
    /// The Kubernetes API server.
    Kubernetes,
}

impl Args {
    /// The registry the flags choose: `--registry`, else `kubernetes` for a
    /// `--kubeconfig`, else `dir`.
    pub fn registry(&self) -> Result<RegistryKind, UsageError> {
        let usage = |m: &str| Err(UsageError(m.into()));
        match (self.registry, &self.kubeconfig, &self.config_dir) {
            (Some(RegistryKind::Dir), Some(_), _) => {
                usage("--kubeconfig is for --registry kubernetes, not --registry dir")
            }
            (Some(RegistryKind::Kubernetes), _, Some(_)) => {
                usage("--config-dir is for --registry dir, not --registry kubernetes")
            }
            (Some(RegistryKind::Dir) | None, None, None) => usage(
                "--config-dir (a directory of YAML) or --kubeconfig (a Kubernetes API server) is required",
            ),
            (None, Some(_), Some(_)) => usage(
                "--config-dir and --kubeconfig name two registries: give one, or say which with --registry",
            ),
            (Some(kind), _, _) => Ok(kind),
            (None, Some(_), None) => Ok(RegistryKind::Kubernetes),
            (None, None, Some(_)) => Ok(RegistryKind::Dir),
        }
    }

    /// Flags that depend on each other.
    pub fn check(&self) -> Result<(), UsageError> {
        self.registry().map(drop)
    }

    pub fn ingest_config(&self) -> IngestConfig {
        let dir = self.config_dir.clone().unwrap_or_default();
        let mut config = IngestConfig::new(dir, &self.cluster_id);
        config.network.clone_from(&self.network);
        config.debounce_after = self.debounce_after;
        config.debounce_max = self.debounce_max;
        config.eds_debounce = self.eds_debounce;
        config.resync_interval = self.resync_interval;
        config.change_queue = self.change_queue;
        config.kv_pipeline = self.kv_pipeline;
        config.system_namespace.clone_from(&self.system_namespace);
        config
    }
}

/// A client for `kubeconfig`, or the inferred config (in-cluster, `$KUBECONFIG`,
/// `~/.kube/config`).
async fn kube_client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .with_context(|| format!("kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig given and none inferred (in-cluster, KUBECONFIG)")?,
    };
    kube::Client::try_from(config).context("creating the Kubernetes client")
}

/// Runs the binary until SIGTERM / ctrl-c, then drains.
pub async fn run(args: Args) -> anyhow::Result<()> {
    // Held until the process ends: dropping it flushes the last spans.
    let _telemetry = shoal_infra::telemetry::init(&args.telemetry, "shoal-ingest")?;
    let registry = args.registry()?;
    // The error names the (redacted) URL.
    let client = args.nats.connect().await.context("connecting to NATS")?;
    let kv = NatsConfigKv::open(client.clone(), args.nats.config_kv())
        .await
        .context("opening the config KV")?;
    let bus = NatsBus::open(client, args.nats.push_stream())
        .await
        .context("opening the push stream")?;

    let api_client = match registry {
        RegistryKind::Kubernetes => Some(kube_client(args.kubeconfig.as_deref()).await?),
        RegistryKind::Dir => None,
    };
    let mut config = args.ingest_config();
    if let Some(client) = &api_client
        && config.network.is_empty()
    {
        // As Istio does: the network label on the cluster's own system namespace.
        config.network = kubernetes::network_of(client, &args.system_namespace).await;
    }
    let network = config.network.clone();

    let mut registry = Registry::default();
    let (kv, bus): (Arc<NatsConfigKv>, Arc<NatsBus>) = (Arc::new(kv), Arc::new(bus));
    let ingest = Ingest::new(config, kv.clone(), bus.clone(), &mut registry);
    let handle = ingest.handle();
    let rejections = handle.rejections().clone();
    let warnings = handle.warnings().clone();
    let clusters = Clusters::default();
    let cluster_pages = clusters.clone();
    let admin = AdminServer::new(registry, handle.readiness())
        .debug_access(args.http.debug_access(None, &args.system_namespace))
        .debug("rejections", Arc::new(move || rejections.to_json()))
        .debug("warnings", Arc::new(move || warnings.to_json()))
        .debug("clusters", Arc::new(move || cluster_pages.to_json()))
        .bind(args.http.http_addr)
        .await?;

    let mut supervisor = Supervisor::new();
    supervisor.critical("admin", admin.serve(supervisor.watcher().wait()));
    match api_client {
        None => supervisor.critical("ingest", ingest.run(supervisor.watcher())),
        Some(client) => {
            let source_config = KubeSourceConfig {
                namespaces: args.namespaces.clone(),
                discovery_selectors: args.discovery_selectors.clone(),
                system_namespace: None,
            };
            let health = ClusterHealth::new(
                &args.cluster_id,
                &network,
                "",
                handle.readiness(),
                handle.rejections().clone(),
            );
            clusters.insert(&args.cluster_id, health.clone());
            if args.remote_secrets {
                let remotes = RemoteClusters::new(
                    client.clone(),
                    RemoteClustersConfig {
                        system_namespace: args.system_namespace.clone(),
                        ingest: args.ingest_config(),
                        source: source_config.clone(),
                        stop_grace: args.drain.drain_grace,
                    },
                    kv,
                    bus,
                    &ingest,
                    clusters,
                );
                supervisor.critical("remote_clusters", remotes.run(supervisor.watcher()));
            }
            // Only this (the config) cluster's mesh config is read, as istiod reads it.
            let source_config = KubeSourceConfig {
                system_namespace: Some(args.system_namespace.clone()),
                ..source_config
            };
            let source = KubeSource::new(client, source_config).with_health(health);
            let span = tracing::info_span!("registry", source = kubernetes::SOURCE);
            supervisor.critical(
                "ingest",
                ingest.run_source(source, span, supervisor.watcher()),
            );
        }
    }
    supervisor.run(args.drain.drain_grace).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags every registry needs.
    const BASE: [&str; 5] = [
        "ingest",
        "--cluster-id",
        "c1",
        "--nats-url",
        "nats://n:4222",
    ];
    use clap::CommandFactory;

    #[test]
    fn nats_url_is_required_and_admin_http_listens_on_loopback() {
        Args::command().debug_assert();
        let required = ["ingest", "--config-dir", "/etc/mesh", "--cluster-id", "c1"];
        let err = Args::try_parse_from(required).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        assert!(err.to_string().contains("--nats-url"), "{err}");
        let args =
            Args::try_parse_from(required.into_iter().chain(["--nats-url", "nats://n:4222"]))
                .unwrap();
        assert_eq!(args.nats.nats_url, "nats://n:4222");
        // Nothing binds every interface unless configured to.
        assert_eq!(args.http.http_addr, "127.0.0.1:15014".parse().unwrap());
    }

    fn registry_of(flags: &[&str]) -> Result<RegistryKind, String> {
        let args = Args::try_parse_from(BASE.into_iter().chain(flags.iter().copied()));
        args.unwrap().registry().map_err(|e| e.to_string())
    }

    #[test]
    fn a_kubeconfig_alone_means_the_kubernetes_registry() {
        use RegistryKind::{Dir, Kubernetes};
        assert_eq!(registry_of(&["--kubeconfig", "/k"]), Ok(Kubernetes));
        assert_eq!(registry_of(&["--config-dir", "/d"]), Ok(Dir));
        assert_eq!(registry_of(&["--registry", "kubernetes"]), Ok(Kubernetes));
        let explicit = ["--registry", "kubernetes", "--kubeconfig", "/k"];
        assert_eq!(registry_of(&explicit), Ok(Kubernetes));
        let explicit = ["--registry", "dir", "--config-dir", "/d"];
        assert_eq!(registry_of(&explicit), Ok(Dir));
        for wrong in [
            &["--registry", "dir", "--kubeconfig", "/k"][..],
            &["--registry", "kubernetes", "--config-dir", "/d"],
            &["--config-dir", "/d", "--kubeconfig", "/k"],
            &[],
        ] {
            let err = registry_of(wrong).unwrap_err();
            assert!(err.contains("--"), "{wrong:?}: {err}");
        }
    }

    #[test]
    fn the_directory_needs_a_config_dir_and_kubernetes_does_not() {
        let base = BASE;
        let err = Args::try_parse_from(base).unwrap().check().unwrap_err();
        assert!(err.to_string().contains("--config-dir"), "{err}");
        let args = Args::try_parse_from(base.into_iter().chain([
            "--registry",
            "kubernetes",
            "--namespaces",
            "shop,pay",
        ]))
        .unwrap();
        assert_eq!(args.registry().unwrap(), RegistryKind::Kubernetes);
        assert_eq!(args.namespaces, ["shop", "pay"]);
        assert_eq!(args.system_namespace, "istio-system");
        assert!(args.remote_secrets);
    }

    #[test]
    fn discovery_selectors_repeat_and_bad_ones_are_refused_by_name() {
        let base = BASE;
        let args = Args::try_parse_from(base.into_iter().chain([
            "--discovery-selector",
            "istio-discovery=enabled",
            "--discovery-selector",
            "env in (prod,staging);!legacy",
        ]))
        .unwrap();
        let selectors: Vec<String> = args
            .discovery_selectors
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            selectors,
            [
                "istio-discovery=enabled",
                "env in (prod,staging)",
                "!legacy"
            ]
        );
        let err = Args::try_parse_from(base.into_iter().chain(["--discovery-selector", "a b=c"]))
            .unwrap_err();
        assert!(err.to_string().contains("\"a b=c\""), "{err}");
    }
}
