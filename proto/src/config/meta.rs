use super::{Kind, istio, k8s, mesh, security};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Identifies one object: unique within a cluster's config.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConfigKey {
    pub kind: Kind,
    pub namespace: String,
    pub name: String,
}

impl ConfigKey {
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// Object metadata, as in Istio's `ConfigMeta`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigMeta {
    pub name: String,
    pub namespace: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Set by the store on every mutation; opaque to clients.
    #[serde(default)]
    pub resource_version: String,
    /// `metadata.creationTimestamp` as written (RFC 3339), empty when absent: Istio
    /// lets the oldest of conflicting objects win.
    #[serde(default)]
    pub creation_timestamp: String,
    /// Where this object came from: cluster, network and registry source.
    #[serde(default)]
    pub origin: Origin,
}

impl ConfigMeta {
    /// The creation time in seconds since the epoch; 0 (older than any) when absent or
    /// not RFC 3339, as Istio's zero time.
    pub fn created_seconds(&self) -> i64 {
        if self.creation_timestamp.is_empty() {
            return 0;
        }
        match self.creation_timestamp.parse::<jiff::Timestamp>() {
            Ok(t) => t.as_second(),
            Err(e) => {
                tracing::warn!(
                    object = %format!("{}/{}", self.namespace, self.name),
                    timestamp = self.creation_timestamp,
                    error = %e,
                    "metadata.creationTimestamp is not RFC 3339: taken as the oldest"
                );
                0
            }
        }
    }
}

/// Where an object came from, stamped by the ingest that read it.
///
/// `cluster` and `source` own its config KV key (`<cluster>.<source>.<kind>.<ns>.<name>`):
/// a source's reconcile deletes only keys it owns, so two sources of one cluster (a
/// directory and the Kubernetes API) never delete each other's objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Origin {
    /// The cluster ID (`--cluster-id`): endpoints keep it, services merge across it.
    #[serde(default)]
    pub cluster: String,
    /// The registry source within the cluster (`dir` for the directory).
    #[serde(default)]
    pub source: String,
    /// The cluster's network (`--network`); a workload's `topology.istio.io/network`
    /// label overrides it. Empty: none.
    #[serde(default)]
    pub network: String,
}

impl Origin {
    pub fn new(
        cluster: impl Into<String>,
        source: impl Into<String>,
        network: impl Into<String>,
    ) -> Self {
        Self {
            cluster: cluster.into(),
            source: source.into(),
            network: network.into(),
        }
    }
}

/// A typed object spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Spec {
    Namespace(k8s::NamespaceSpec),
    Service(k8s::ServiceSpec),
    Pod(k8s::PodSpec),
    EndpointSlice(k8s::EndpointSliceSpec),
    Endpoints(k8s::EndpointsSpec),
    ServiceEntry(istio::ServiceEntry),
    WorkloadEntry(istio::WorkloadEntry),
    WorkloadGroup(istio::WorkloadGroup),
    VirtualService(istio::VirtualService),
    DestinationRule(istio::DestinationRule),
    Sidecar(istio::Sidecar),
    Gateway(istio::Gateway),
    Secret(k8s::SecretSpec),
    MeshConfig(mesh::MeshConfig),
    // Last, as in `Kind`, so that encoded specs keep their numbers.
    PeerAuthentication(security::PeerAuthentication),
    AuthorizationPolicy(security::AuthorizationPolicy),
    RequestAuthentication(security::RequestAuthentication),
}

impl Spec {
    pub fn kind(&self) -> Kind {
        match self {
            Spec::Namespace(_) => Kind::Namespace,
            Spec::Service(_) => Kind::Service,
            Spec::Pod(_) => Kind::Pod,
            Spec::EndpointSlice(_) => Kind::EndpointSlice,
            Spec::Endpoints(_) => Kind::Endpoints,
            Spec::ServiceEntry(_) => Kind::ServiceEntry,
            Spec::WorkloadEntry(_) => Kind::WorkloadEntry,
            Spec::WorkloadGroup(_) => Kind::WorkloadGroup,
            Spec::VirtualService(_) => Kind::VirtualService,
            Spec::DestinationRule(_) => Kind::DestinationRule,
            Spec::Sidecar(_) => Kind::Sidecar,
            Spec::Gateway(_) => Kind::Gateway,
            Spec::Secret(_) => Kind::Secret,
            Spec::MeshConfig(_) => Kind::MeshConfig,
            Spec::PeerAuthentication(_) => Kind::PeerAuthentication,
            Spec::AuthorizationPolicy(_) => Kind::AuthorizationPolicy,
            Spec::RequestAuthentication(_) => Kind::RequestAuthentication,
        }
    }
}

/// One config object: metadata plus typed spec (Istio's `config.Config`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub meta: ConfigMeta,
    pub spec: Spec,
}

impl Config {
    pub fn kind(&self) -> Kind {
        self.spec.kind()
    }

    pub fn key(&self) -> ConfigKey {
        ConfigKey::new(self.kind(), &self.meta.namespace, &self.meta.name)
    }

    /// Equal apart from the store-assigned resource version.
    pub fn same_content(&self, other: &Config) -> bool {
        self.spec == other.spec
            && self.meta.labels == other.meta.labels
            && self.meta.annotations == other.meta.annotations
            && self.meta.origin == other.meta.origin
            && self.meta.name == other.meta.name
            && self.meta.namespace == other.meta.namespace
    }
}
