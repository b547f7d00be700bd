use super::{Kind, istio, k8s};
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
    /// The cluster whose registry this object came from.
    #[serde(default)]
    pub cluster: String,
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
    VirtualService(istio::VirtualService),
    DestinationRule(istio::DestinationRule),
    Sidecar(istio::Sidecar),
    Gateway(istio::Gateway),
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
            Spec::VirtualService(_) => Kind::VirtualService,
            Spec::DestinationRule(_) => Kind::DestinationRule,
            Spec::Sidecar(_) => Kind::Sidecar,
            Spec::Gateway(_) => Kind::Gateway,
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
            && self.meta.cluster == other.meta.cluster
            && self.meta.name == other.meta.name
            && self.meta.namespace == other.meta.namespace
    }
}
