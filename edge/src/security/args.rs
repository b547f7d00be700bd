//! The edge's security flags (edge and the all-in-one `shoal`): the CA's signing
//! material, the serving certificate's names, and how callers are authenticated.

use shoal_infra::cli::duration;
use shoal_proto::config::selector::LabelSelector;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug, clap::Args)]
pub struct SecurityArgs {
    /// istiod's plug-in CA: a directory with ca-cert.pem, ca-key.pem, cert-chain.pem and
    /// root-cert.pem (the `cacerts` Secret mounted), used when it holds ca-key.pem and
    /// polled for a new intermediate. Otherwise the edge signs with a self-signed root.
    #[arg(long, env = "SHOAL_CA_PLUGIN_DIR", default_value = "/etc/cacerts")]
    pub ca_plugin_dir: PathBuf,
    /// How often the plug-in CA's files are re-read.
    #[arg(long, env = "SHOAL_CA_PLUGIN_POLL", default_value = "10s", value_parser = duration)]
    pub ca_plugin_poll: Duration,
    /// Without a plug-in CA: the directory the self-signed root is kept in, as the
    /// istio-ca-secret files (ca-cert.pem, ca-key.pem), created if absent so restarts and
    /// edges sharing it sign under one root. Unset: a root in memory (one edge only).
    #[arg(long, env = "SHOAL_CA_ROOT_DIR", conflicts_with = "ca_from_kubernetes")]
    pub ca_root_dir: Option<PathBuf>,
    /// Read the signing material through the API server, as istiod does: the plug-in CA
    /// from the `cacerts` Secret of the system namespace when it holds ca-key.pem, else a
    /// self-signed root kept in its `istio-ca-secret` Secret (created if absent, so every
    /// edge signs under one root). Both are watched. Files in --ca-plugin-dir still win.
    #[arg(long, env = "SHOAL_CA_FROM_KUBERNETES")]
    pub ca_from_kubernetes: bool,
    /// Publish the mesh root as the ConfigMap istio-ca-root-cert (key root-cert.pem) in
    /// every mesh namespace, as istiod does, and keep it so (needs the API server).
    #[arg(long, env = "SHOAL_PUBLISH_ROOT_CERT")]
    pub publish_root_cert: bool,
    /// The namespaces given istio-ca-root-cert, comma-separated; default: all but
    /// kube-system, kube-public, kube-node-lease and local-path-storage.
    #[arg(
        long = "root-cert-namespaces",
        env = "SHOAL_ROOT_CERT_NAMESPACES",
        value_delimiter = ','
    )]
    pub root_cert_namespaces: Vec<String>,
    /// Istio's discovery selectors for istio-ca-root-cert: only namespaces one of these
    /// label selectors matches get it (give ingest's --discovery-selector). Repeat the
    /// flag or separate with `;`.
    #[arg(
        long = "root-cert-discovery-selector",
        env = "SHOAL_ROOT_CERT_DISCOVERY_SELECTORS",
        value_delimiter = ';'
    )]
    pub root_cert_discovery_selectors: Vec<LabelSelector>,
    /// The most istio-ca-root-cert writes per second from one edge.
    #[arg(long, env = "SHOAL_ROOT_CERT_WRITES_PER_SECOND", default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub root_cert_writes_per_second: u32,
    /// Workload certificates' lifetime when a CSR asks for none (Istio's
    /// DEFAULT_WORKLOAD_CERT_TTL).
    #[arg(long, env = "SHOAL_WORKLOAD_CERT_TTL", default_value = "24h", value_parser = duration)]
    pub workload_cert_ttl: Duration,
    /// The longest lifetime a CSR may ask for (Istio's MAX_WORKLOAD_CERT_TTL).
    #[arg(long, env = "SHOAL_MAX_WORKLOAD_CERT_TTL", default_value = "2160h", value_parser = duration)]
    pub max_workload_cert_ttl: Duration,
    /// Lifetime of the certificate the secure listener serves (issued by the CA at start,
    /// renewed at half-life).
    #[arg(long, env = "SHOAL_SERVING_CERT_TTL", default_value = "24h", value_parser = duration)]
    pub serving_cert_ttl: Duration,
    /// More DNS names for the serving certificate, beside istiod.<system-namespace>.svc
    /// and <service-account>.<system-namespace>.svc (and their short forms).
    #[arg(
        long = "xds-dns-name",
        env = "SHOAL_XDS_DNS_NAMES",
        value_delimiter = ','
    )]
    pub xds_dns_names: Vec<String>,
    /// Other trust domains whose client certificates are accepted (trustDomainAliases).
    #[arg(
        long = "trust-domain-alias",
        env = "SHOAL_TRUST_DOMAIN_ALIASES",
        value_delimiter = ','
    )]
    pub trust_domain_aliases: Vec<String>,
    /// The issuer of the service-account tokens to accept (`iss`), verified against its
    /// keys: --jwks-file, --jwks-uri, or else OIDC discovery at the issuer.
    #[arg(long, env = "SHOAL_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// The issuer's JWKS as a file, re-read when it changes.
    #[arg(
        long,
        env = "SHOAL_JWKS_FILE",
        requires = "jwt_issuer",
        conflicts_with = "jwks_uri"
    )]
    pub jwks_file: Option<PathBuf>,
    /// The issuer's JWKS URL.
    #[arg(long, env = "SHOAL_JWKS_URI", requires = "jwt_issuer")]
    pub jwks_uri: Option<String>,
    /// A PEM CA for the issuer's HTTPS (e.g. the cluster's ca.crt).
    #[arg(long, env = "SHOAL_JWT_ISSUER_CA_FILE", requires = "jwt_issuer")]
    pub jwt_issuer_ca_file: Option<PathBuf>,
    /// A token's `aud` must hold one of these (the agent asks for istio-ca).
    #[arg(
        long = "token-audience",
        env = "SHOAL_TOKEN_AUDIENCES",
        value_delimiter = ',',
        default_value = "istio-ca"
    )]
    pub token_audiences: Vec<String>,
    /// The API server the edge uses (TokenReview, the CA's Secrets, istio-ca-root-cert);
    /// giving it turns TokenReview on. Without it the in-cluster config is used where
    /// one of those needs an API server.
    #[arg(long, env = "SHOAL_EDGE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Verify tokens with TokenReview through the in-cluster API server (the pod's
    /// service account needs system:auth-delegator).
    #[arg(long, env = "SHOAL_TOKEN_REVIEW")]
    pub token_review: bool,
}

impl SecurityArgs {
    /// Whether any of the edge's work needs the API server.
    pub fn uses_kubernetes(&self) -> bool {
        self.kubeconfig.is_some()
            || self.token_review
            || self.ca_from_kubernetes
            || self.publish_root_cert
    }

    /// Whether tokens are checked with TokenReview.
    pub fn token_review(&self) -> bool {
        self.kubeconfig.is_some() || self.token_review
    }
}
