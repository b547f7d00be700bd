//! Who a simulated proxy is: an Istio sidecar in namespace `ns-<i mod N>` (meshgen's
//! names), running as service account `default`, with a unique address in 100.64.0.0/10;
//! or, with [`Workloads`], one of the mesh's endpoints, as in a real mesh.

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use shoal_proto::xds::node_metadata::{
    INTERCEPTION_MODE, InterceptionMode, LABELS, NAMESPACE, NodeId, ProxyType,
};
use shoal_test_support::meshgen::{Mesh, endpoint_ip, namespace_name};
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub index: usize,
    pub namespace: String,
    pub service_account: String,
    pub ip: String,
}

/// The node metadata key of the pod's service account (pilot-agent sets it).
const SERVICE_ACCOUNT: &str = "SERVICE_ACCOUNT";

/// Proxy `i`'s address: unique for the first 4,194,304 proxies, outside meshgen's 10/8.
pub fn proxy_ip(i: usize) -> String {
    format!(
        "100.{}.{}.{}",
        64 + (i >> 16) % 64,
        (i >> 8) & 0xff,
        i & 0xff
    )
}

/// The mesh's endpoints as proxies (`--as-endpoints`): proxy `i` is endpoint `i / S` of
/// service `i mod S`, in its namespace at its address, as in a real mesh where every
/// endpoint is a pod with its proxy, so that an endpoint change moves proxies' own
/// service targets. Proxies past the mesh's endpoints sit apart, as without it.
#[derive(Clone, Debug)]
pub struct Workloads {
    /// The namespace of each service, by index.
    namespaces: Arc<[String]>,
    per_service: usize,
}

impl Workloads {
    pub fn of(mesh: &Mesh) -> Self {
        Workloads {
            namespaces: mesh.services.iter().map(|s| s.namespace.clone()).collect(),
            per_service: mesh.spec.endpoints_per_service,
        }
    }

    /// Proxy `index`'s namespace and address, if it is one of the endpoints.
    fn place(&self, index: usize) -> Option<(String, String)> {
        let services = self.namespaces.len();
        if services == 0 || index / services >= self.per_service {
            return None;
        }
        let (service, endpoint) = (index % services, index / services);
        Some((
            self.namespaces[service].clone(),
            endpoint_ip(service, endpoint),
        ))
    }
}

impl Identity {
    /// Proxy `index` in `ns-<index mod namespaces>`, apart from the mesh's endpoints, or
    /// placed among them by `workloads`.
    pub fn new(index: usize, namespaces: usize, workloads: Option<&Workloads>) -> Self {
        let (namespace, ip) = workloads
            .and_then(|w| w.place(index))
            .unwrap_or_else(|| (namespace_name(index % namespaces.max(1)), proxy_ip(index)));
        Identity {
            index,
            namespace,
            service_account: crate::secure::SERVICE_ACCOUNT.into(),
            ip,
        }
    }

    /// `sidecar~<ip>~proxy-<i>.<ns>~<ns>.svc.cluster.local`.
    pub fn node_id(&self) -> String {
        let pod = format!("proxy-{}", self.index);
        NodeId::format(ProxyType::Sidecar, &self.ip, &pod, &self.namespace)
    }

    /// The node as Istio's agent sends it: namespace, service account, labels `app:
    /// loadtest` and interception mode `REDIRECT` in its metadata.
    pub fn node(&self) -> Node {
        let string = |s: &str| Value {
            kind: Some(Kind::StringValue(s.to_string())),
        };
        let labels = Struct {
            fields: [("app".to_string(), string("loadtest"))]
                .into_iter()
                .collect(),
        };
        let metadata = Struct {
            fields: [
                (NAMESPACE.to_string(), string(&self.namespace)),
                (SERVICE_ACCOUNT.to_string(), string(&self.service_account)),
                (
                    INTERCEPTION_MODE.to_string(),
                    string(InterceptionMode::Redirect.as_str()),
                ),
                (
                    LABELS.to_string(),
                    Value {
                        kind: Some(Kind::StructValue(labels)),
                    },
                ),
            ]
            .into_iter()
            .collect(),
        };
        Node {
            id: self.node_id(),
            cluster: format!("loadtest.{}", self.namespace),
            metadata: Some(metadata),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The string value of metadata key `key`.
    fn meta_str<'a>(meta: &'a Struct, key: &str) -> Option<&'a str> {
        match &meta.fields.get(key)?.kind {
            Some(Kind::StringValue(s)) => Some(s),
            _ => None,
        }
    }

    #[test]
    fn the_edge_reads_it_as_istio_would() {
        let node = Identity::new(12, 10, None).node();
        let id = NodeId::parse(&node.id).unwrap();
        assert_eq!(id.proxy_type, ProxyType::Sidecar);
        assert_eq!(id.ip, "100.64.0.12");
        assert_eq!(id.workload, "proxy-12.ns-2");
        assert_eq!(id.namespace(), "ns-2");
        let meta = node.metadata.as_ref().unwrap();
        assert_eq!(meta_str(meta, NAMESPACE), Some("ns-2"));
        assert_eq!(meta_str(meta, SERVICE_ACCOUNT), Some("default"));
        assert_eq!(
            InterceptionMode::from_metadata(meta_str(meta, INTERCEPTION_MODE)),
            InterceptionMode::Redirect
        );
        let Some(Kind::StructValue(labels)) = &meta.fields[LABELS].kind else {
            panic!("LABELS is a struct");
        };
        assert_eq!(meta_str(labels, "app"), Some("loadtest"));
    }

    #[test]
    fn addresses_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..200_000 {
            assert!(seen.insert(proxy_ip(i)));
        }
    }

    #[test]
    fn as_endpoints_each_proxy_is_one_endpoint_of_the_mesh_then_apart() {
        let mesh = Mesh::generate(&shoal_test_support::meshgen::MeshSpec {
            services: 6,
            endpoints_per_service: 2,
            namespaces: 4,
            ..Default::default()
        });
        let workloads = Workloads::of(&mesh);
        let placed: Vec<Identity> = (0..13)
            .map(|i| Identity::new(i, 4, Some(&workloads)))
            .collect();
        // Proxy 7: endpoint 1 of service 1, in that service's namespace.
        assert_eq!(placed[7].ip, endpoint_ip(1, 1));
        assert_eq!(placed[7].namespace, mesh.services[1].namespace);
        let addresses: std::collections::HashSet<&str> =
            placed[..12].iter().map(|p| p.ip.as_str()).collect();
        assert_eq!(addresses.len(), 12, "every endpoint once");
        // Past the mesh's 12 endpoints, as without it.
        assert_eq!(placed[12], Identity::new(12, 4, None));
        // A mesh without services places nobody.
        let empty = Workloads::of(&Mesh::generate(&shoal_test_support::meshgen::MeshSpec {
            services: 0,
            endpoints_per_service: 2,
            namespaces: 4,
            ..Default::default()
        }));
        assert_eq!(Identity::new(1, 4, Some(&empty)), Identity::new(1, 4, None));
    }
}
