use crate::config::{istio, k8s, mesh, security};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A service is identified by hostname and namespace; the same pair in several clusters
/// is one service.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ServiceKey {
    pub hostname: String,
    pub namespace: String,
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.hostname)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Protocol {
    Http,
    Http2,
    Grpc,
    Https,
    Tls,
    Tcp,
    /// Not declared: treated as TCP (Istio would sniff).
    Unknown,
    /// UDP: the mesh does not proxy it (no listener, no cluster), as in Istio.
    Udp,
}

impl Protocol {
    /// Istio's protocol selection: `appProtocol`, then the port name prefix
    /// (`http-web`, `grpc`, ...), then the protocol field.
    pub fn infer(port_name: &str, app_protocol: Option<&str>, protocol: &str) -> Protocol {
        // A UDP port is UDP whatever its name says (Kubernetes' `protocol: UDP`).
        if protocol.eq_ignore_ascii_case("UDP") {
            return Protocol::Udp;
        }
        let from = |s: &str| match s.to_ascii_lowercase().as_str() {
            "http" | "http1" => Some(Protocol::Http),
            "http2" | "h2c" | "kubernetes.io/h2c" => Some(Protocol::Http2),
            "grpc" | "grpc-web" => Some(Protocol::Grpc),
            "https" => Some(Protocol::Https),
            "tls" => Some(Protocol::Tls),
            "tcp" | "mongo" | "redis" | "mysql" => Some(Protocol::Tcp),
            _ => None,
        };
        if let Some(p) = app_protocol.and_then(from) {
            return p;
        }
        let prefix = port_name.split('-').next().unwrap_or("");
        if let Some(p) = from(prefix) {
            return p;
        }
        match protocol.to_ascii_uppercase().as_str() {
            "HTTP" => Protocol::Http,
            "HTTP2" => Protocol::Http2,
            "GRPC" => Protocol::Grpc,
            "HTTPS" => Protocol::Https,
            "TLS" => Protocol::Tls,
            "TCP" | "MONGO" | "REDIS" | "MYSQL" => Protocol::Tcp,
            _ => Protocol::Unknown,
        }
    }

    /// A Kubernetes Service port's protocol. Its `protocol` field is the transport the API
    /// server always fills in (`TCP` by default), not the application protocol: only
    /// `UDP` counts; otherwise `appProtocol`, then the port name, else unknown (sniffed),
    /// as Istio reads Kubernetes ports.
    pub fn of_kubernetes_port(
        port_name: &str,
        app_protocol: Option<&str>,
        protocol: &str,
    ) -> Protocol {
        if protocol.eq_ignore_ascii_case("UDP") {
            return Protocol::Udp;
        }
        Protocol::infer(port_name, app_protocol, "")
    }

    /// A ServiceEntry port's protocol: its `protocol` field, which Istio requires; the
    /// port name only when the field is empty.
    pub fn of_entry_port(protocol: &str, port_name: &str) -> Protocol {
        if protocol.is_empty() {
            Protocol::infer(port_name, None, "")
        } else {
            Protocol::infer("", None, protocol)
        }
    }

    /// Whether sidecars proxy traffic to the port at all.
    pub fn is_proxied(self) -> bool {
        self != Protocol::Udp
    }

    pub fn is_http(self) -> bool {
        matches!(self, Protocol::Http | Protocol::Http2 | Protocol::Grpc)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicePort {
    pub name: String,
    pub port: u32,
    pub protocol: Protocol,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Resolution {
    /// Endpoints come from the registry (EDS).
    ClientSideLb,
    /// Endpoints are DNS names Envoy resolves.
    Dns,
    /// Forward to the original destination.
    Passthrough,
    /// Endpoints are DNS names Envoy resolves, connecting to the first address only
    /// (`DNS_ROUND_ROBIN`: Envoy's LOGICAL_DNS).
    DnsRoundRobin,
}

impl Resolution {
    /// Whether Envoy resolves the endpoints itself (`DNS` or `DNS_ROUND_ROBIN`).
    pub fn is_dns(self) -> bool {
        matches!(self, Resolution::Dns | Resolution::DnsRoundRobin)
    }
}

/// Istio `exportTo`: empty means unset; the push context fills in the mesh-wide default
/// (public, `*`, unless the mesh config says otherwise).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportTo(pub Vec<String>);

impl ExportTo {
    /// Whether config owned by `owner` is visible from namespace `from`.
    pub fn visible(&self, owner: &str, from: &str) -> bool {
        export_visible(&self.0, owner, from)
    }
}

/// [`ExportTo::visible`] of an `exportTo` list held as a plain slice (VirtualServices and
/// DestinationRules keep theirs in their spec), without copying it.
pub fn export_visible(export_to: &[String], owner: &str, from: &str) -> bool {
    if export_to.is_empty() {
        return true;
    }
    export_to.iter().any(|e| match e.as_str() {
        "*" => true,
        "." => owner == from,
        "~" => false,
        ns => ns == from,
    })
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Service {
    pub hostname: String,
    pub namespace: String,
    /// The Kubernetes Service or ServiceEntry name.
    pub name: String,
    pub ports: Vec<ServicePort>,
    /// Virtual IPs, by cluster where known.
    pub addresses: Vec<String>,
    pub resolution: Resolution,
    pub mesh_external: bool,
    pub export_to: ExportTo,
    pub labels: BTreeMap<String, String>,
    /// Clusters that define this service, sorted.
    pub clusters: Vec<String>,
    /// The DNS name an ExternalName Service aliases (its endpoint); empty otherwise.
    pub external_name: String,
}

impl Service {
    pub fn key(&self) -> ServiceKey {
        ServiceKey {
            hostname: self.hostname.clone(),
            namespace: self.namespace.clone(),
        }
    }

    pub fn port(&self, number: u32) -> Option<&ServicePort> {
        self.ports.iter().find(|p| p.port == number)
    }
}

/// One workload instance behind a service port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub address: String,
    /// The workload's port (resolved target port).
    pub port: u32,
    /// The service port this endpoint serves.
    pub service_port: u32,
    pub labels: BTreeMap<String, String>,
    pub cluster: String,
    pub network: String,
    /// `region/zone/subzone`.
    pub locality: String,
    pub weight: u32,
    pub healthy: bool,
    pub service_account: String,
}

impl Endpoint {
    /// A healthy endpoint of weight 1 at `address:port` serving `service_port`, with no
    /// labels, cluster, network, locality or service account known.
    pub fn at(address: impl Into<String>, port: u32, service_port: u32) -> Self {
        Endpoint {
            address: address.into(),
            port,
            service_port,
            labels: BTreeMap::new(),
            cluster: String::new(),
            network: String::new(),
            locality: String::new(),
            weight: 1,
            healthy: true,
            service_account: String::new(),
        }
    }
}

/// Every endpoint of one service, across clusters, sorted for a stable encoding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceEndpoints {
    pub service: ServiceKey,
    pub endpoints: Vec<Endpoint>,
}

/// A routing object with the metadata routing needs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedConfig<T> {
    pub name: String,
    pub namespace: String,
    /// Its `creationTimestamp` in seconds since the epoch (0 when unknown): of
    /// conflicting objects the oldest wins, as in Istio.
    pub created: i64,
    pub spec: T,
}

/// An east-west gateway: where workloads on other networks reach the endpoints of
/// `network` (Istio's network gateway: a Service labelled `topology.istio.io/network`,
/// at its load balancer address).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NetworkGateway {
    pub network: String,
    pub address: String,
    pub port: u32,
    /// The cluster whose Service declared it.
    pub cluster: String,
}

/// Everything one namespace defines except endpoints: one snapshot chunk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NamespaceConfig {
    pub namespace: String,
    pub services: Vec<Service>,
    pub virtual_services: Vec<NamedConfig<istio::VirtualService>>,
    pub destination_rules: Vec<NamedConfig<istio::DestinationRule>>,
    pub sidecars: Vec<NamedConfig<istio::Sidecar>>,
    pub gateways: Vec<NamedConfig<istio::Gateway>>,
    /// TLS Secrets, served to gateways in this namespace over SDS (`credentialName`).
    pub credentials: Vec<NamedConfig<k8s::SecretSpec>>,
    /// The network gateways this namespace's Services declare, sorted.
    pub network_gateways: Vec<NetworkGateway>,
    /// The mesh configs (ConfigMaps `istio`, `istio-<revision>`) of this namespace, by
    /// name: only the system namespace's are ingested. They travel in its chunk, as
    /// Secrets do, so a change to one is one chunk change like any other.
    pub mesh_configs: Vec<NamedConfig<mesh::MeshConfig>>,
    /// `security.istio.io` policies (in the root namespace's chunk, the mesh-wide ones).
    pub peer_authentications: Vec<NamedConfig<security::PeerAuthentication>>,
    pub authorization_policies: Vec<NamedConfig<security::AuthorizationPolicy>>,
    pub request_authentications: Vec<NamedConfig<security::RequestAuthentication>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_inference_order() {
        assert_eq!(Protocol::infer("http-web", None, "TCP"), Protocol::Http);
        assert_eq!(Protocol::infer("web", Some("grpc"), "TCP"), Protocol::Grpc);
        assert_eq!(Protocol::infer("web", None, "TCP"), Protocol::Tcp);
        assert_eq!(Protocol::infer("", None, ""), Protocol::Unknown);
        assert_eq!(Protocol::infer("dns", None, "UDP"), Protocol::Udp);
        assert_eq!(Protocol::infer("http-dns", None, "UDP"), Protocol::Udp);
        assert_eq!(Protocol::of_entry_port("UDP", "http"), Protocol::Udp);
        assert_eq!(Protocol::infer("x", None, "HTTP"), Protocol::Http);
        // Kubernetes' `protocol: TCP` is the transport: an unnamed port is sniffed.
        assert_eq!(
            Protocol::of_kubernetes_port("web", None, "TCP"),
            Protocol::Unknown
        );
        assert_eq!(
            Protocol::of_kubernetes_port("tcp-db", None, "TCP"),
            Protocol::Tcp
        );
        assert_eq!(
            Protocol::of_kubernetes_port("web", Some("http"), "TCP"),
            Protocol::Http
        );
        assert_eq!(
            Protocol::of_kubernetes_port("http", None, "UDP"),
            Protocol::Udp
        );
    }

    #[test]
    fn export_to_visibility() {
        assert!(ExportTo::default().visible("a", "b"));
        assert!(ExportTo(vec![".".into()]).visible("a", "a"));
        assert!(!ExportTo(vec![".".into()]).visible("a", "b"));
        assert!(!ExportTo(vec!["~".into()]).visible("a", "a"));
        assert!(ExportTo(vec!["b".into()]).visible("a", "b"));
    }
}
