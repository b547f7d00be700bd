//! The Kubernetes core objects Shoal reads, reduced to what a mesh needs.
//!
//! These are digests: [`super::parse`] reads the full object (spec and status) and keeps
//! what the registry uses, the way Istio's Kubernetes controller does.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceSpec {}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceSpec {
    pub ports: Vec<ServicePort>,
    pub selector: BTreeMap<String, String>,
    #[serde(rename = "clusterIP")]
    pub cluster_ip: String,
    #[serde(rename = "type")]
    pub service_type: String,
    pub external_name: String,
    #[serde(rename = "externalIPs")]
    pub external_ips: Vec<String>,
    /// `status.loadBalancer.ingress`: each IP, or hostname where the load balancer
    /// gives no IP. Where an east-west gateway is reached from other networks.
    pub load_balancer_ingress: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServicePort {
    pub name: String,
    pub port: u32,
    /// A number or a container port name; Kubernetes accepts either.
    #[serde(deserialize_with = "int_or_string")]
    pub target_port: Option<String>,
    pub protocol: String,
    pub app_protocol: Option<String>,
}

/// What the mesh needs of a Pod: its address, readiness and named ports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    pub ip: String,
    pub ready: bool,
    pub phase: String,
    pub node_name: String,
    pub service_account: String,
    /// Container port name → number, to resolve named `targetPort`s.
    pub named_ports: BTreeMap<String, u32>,
    /// `region/zone/subzone` of the Pod's Node, from its topology labels: the Kubernetes
    /// registry fills it in (a Pod does not carry it). Empty: unknown.
    pub node_locality: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EndpointSliceSpec {
    /// From the `kubernetes.io/service-name` label.
    pub service_name: String,
    pub address_type: String,
    pub endpoints: Vec<SliceEndpoint>,
    pub ports: Vec<EndpointPort>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SliceEndpoint {
    pub addresses: Vec<String>,
    pub conditions: EndpointConditions,
    pub target_ref: Option<ObjectRef>,
    pub zone: Option<String>,
    pub node_name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EndpointConditions {
    /// Unset means ready, as the EndpointSlice API says.
    pub ready: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectRef {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EndpointPort {
    pub name: String,
    pub port: u32,
    pub protocol: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EndpointsSpec {
    pub subsets: Vec<EndpointSubset>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EndpointSubset {
    pub addresses: Vec<EndpointAddress>,
    pub not_ready_addresses: Vec<EndpointAddress>,
    pub ports: Vec<EndpointPort>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EndpointAddress {
    pub ip: String,
    pub target_ref: Option<ObjectRef>,
    pub node_name: Option<String>,
}

fn int_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum IntOrString {
        Int(i64),
        Str(String),
    }
    Ok(Option::<IntOrString>::deserialize(d)?.map(|v| match v {
        IntOrString::Int(i) => i.to_string(),
        IntOrString::Str(s) => s,
    }))
}

/// The TLS material of a Secret, as Istio's credential controller reads it for gateways
/// (`credentialName`): `tls.crt`, `tls.key` and `ca.crt` (a `kubernetes.io/tls` Secret,
/// or a generic one), or Istio's generic `cert`, `key` and `cacert`. PEM text; other keys
/// are not kept, and Secrets with none of these are not read at all.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretSpec {
    pub cert_chain: String,
    pub private_key: String,
    pub ca_cert: String,
}

impl SecretSpec {
    /// Whether the Secret holds anything a gateway can use.
    pub fn has_tls_material(&self) -> bool {
        !self.cert_chain.is_empty() || !self.ca_cert.is_empty()
    }
}

// Keys never reach a log: a Secret's Debug shows which parts it has, not their content.
impl std::fmt::Debug for SecretSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretSpec")
            .field("cert_chain_bytes", &self.cert_chain.len())
            .field("private_key", &(!self.private_key.is_empty()))
            .field("ca_cert_bytes", &self.ca_cert.len())
            .finish()
    }
}
