//! Who a simulated proxy is: an Istio sidecar in namespace `ns-<i mod N>` (meshgen's
//! names) with a unique address in 100.64.0.0/10.

use envoy_types::pb::envoy::config::core::v3::Node;
use shoal_edge::proxy::node_metadata;
use shoal_meshgen::namespace_name;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub index: usize,
    pub namespace: String,
    pub ip: String,
}

/// Proxy `i`'s address: unique for the first 4,194,304 proxies, outside meshgen's 10/8.
pub fn proxy_ip(i: usize) -> String {
    format!(
        "100.{}.{}.{}",
        64 + (i >> 16) % 64,
        (i >> 8) & 0xff,
        i & 0xff
    )
}

impl Identity {
    pub fn new(index: usize, namespaces: usize) -> Self {
        Identity {
            index,
            namespace: namespace_name(index % namespaces.max(1)),
            ip: proxy_ip(index),
        }
    }

    /// `sidecar~<ip>~proxy-<i>.<ns>~<ns>.svc.cluster.local`.
    pub fn node_id(&self) -> String {
        let (ip, i, ns) = (&self.ip, self.index, &self.namespace);
        format!("sidecar~{ip}~proxy-{i}.{ns}~{ns}.svc.cluster.local")
    }

    /// The node as Istio's agent sends it.
    pub fn node(&self) -> Node {
        let labels = BTreeMap::from([("app".to_string(), "loadtest".to_string())]);
        Node {
            id: self.node_id(),
            cluster: format!("loadtest.{}", self.namespace),
            metadata: Some(node_metadata(&self.namespace, &labels, "REDIRECT")),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_edge::proxy::{InterceptionMode, Proxy};

    #[test]
    fn the_edge_reads_it_as_istio_would() {
        let id = Identity::new(12, 10);
        let node = id.node();
        let p = Proxy::from_node(Some(&node)).unwrap();
        assert_eq!(p.namespace, "ns-2");
        assert_eq!(p.ip, "100.64.0.12");
        assert_eq!(p.workload, "proxy-12.ns-2");
        assert_eq!(p.interception, InterceptionMode::Redirect);
    }

    #[test]
    fn addresses_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..200_000 {
            assert!(seen.insert(proxy_ip(i)));
        }
    }
}
