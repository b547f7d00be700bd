//! A connected proxy's identity, read from its xDS `Node` as Istio reads it.
//!
//! The node ID format and metadata keys are proto's contracts
//! ([`shoal_proto::xds::node_metadata`]); this reads them out of Envoy's `Node`.

use envoy_types::pb::envoy::config::core::v3::{Locality, Node};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as ValueKind};
use shoal_proto::xds::node_metadata::{
    CLUSTER_ID, INTERCEPTION_MODE, LABELS, NAMESPACE, NETWORK, NodeId, NodeIdError,
};
use std::collections::BTreeMap;

pub use shoal_proto::xds::node_metadata::{InterceptionMode, ProxyType};

#[derive(Clone, Debug, PartialEq)]
pub struct Proxy {
    /// The full node ID.
    pub id: String,
    pub proxy_type: ProxyType,
    pub ip: String,
    /// `<pod>.<namespace>`.
    pub workload: String,
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub interception: InterceptionMode,
    pub cluster_id: String,
    /// Metadata `NETWORK`; empty: none.
    pub network: String,
    /// The node's `region/zone/subzone`, with trailing empty parts left out; empty:
    /// unknown.
    pub locality: String,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    #[error("request has no node")]
    MissingNode,
    #[error("node id {0:?} is not <type>~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local")]
    BadNodeId(String),
    #[error("node id {0:?}: unknown proxy type {1:?} (expected sidecar or router)")]
    BadProxyType(String, String),
}

impl From<NodeIdError> for ProxyError {
    fn from(e: NodeIdError) -> Self {
        match e {
            NodeIdError::Malformed(id) => ProxyError::BadNodeId(id),
            NodeIdError::UnknownProxyType(id, t) => ProxyError::BadProxyType(id, t),
        }
    }
}

impl Proxy {
    pub fn from_node(node: Option<&Node>) -> Result<Proxy, ProxyError> {
        let node = node.ok_or(ProxyError::MissingNode)?;
        let id = NodeId::parse(&node.id)?;
        let meta = node.metadata.as_ref();
        let namespace = meta_string(meta, NAMESPACE).unwrap_or_else(|| id.namespace().to_string());
        let labels = meta
            .and_then(|m| m.fields.get(LABELS))
            .and_then(|v| match &v.kind {
                Some(ValueKind::StructValue(s)) => Some(
                    s.fields
                        .iter()
                        .filter_map(|(k, v)| match &v.kind {
                            Some(ValueKind::StringValue(s)) => Some((k.clone(), s.clone())),
                            _ => None,
                        })
                        .collect(),
                ),
                _ => None,
            })
            .unwrap_or_default();
        let interception =
            InterceptionMode::from_metadata(meta_string(meta, INTERCEPTION_MODE).as_deref());
        Ok(Proxy {
            id: node.id.clone(),
            proxy_type: id.proxy_type,
            ip: id.ip.to_string(),
            workload: id.workload.to_string(),
            namespace,
            labels,
            interception,
            cluster_id: meta_string(meta, CLUSTER_ID).unwrap_or_default(),
            network: meta_string(meta, NETWORK).unwrap_or_default(),
            locality: node
                .locality
                .as_ref()
                .map(locality_string)
                .unwrap_or_default(),
        })
    }
}

/// `region/zone/subzone`, as endpoints write theirs.
fn locality_string(l: &Locality) -> String {
    let mut parts = vec![l.region.as_str(), l.zone.as_str(), l.sub_zone.as_str()];
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts.join("/")
}

fn meta_string(meta: Option<&Struct>, key: &str) -> Option<String> {
    match &meta?.fields.get(key)?.kind {
        Some(ValueKind::StringValue(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// Builds node metadata as Istio's agent sends it (for tests).
pub fn node_metadata(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    interception: &str,
) -> Struct {
    let s = |v: &str| Value {
        kind: Some(ValueKind::StringValue(v.to_string())),
    };
    let mut fields = std::collections::HashMap::new();
    fields.insert(NAMESPACE.to_string(), s(namespace));
    fields.insert(INTERCEPTION_MODE.to_string(), s(interception));
    fields.insert(
        LABELS.to_string(),
        Value {
            kind: Some(ValueKind::StructValue(Struct {
                fields: labels.iter().map(|(k, v)| (k.clone(), s(v))).collect(),
            })),
        },
    );
    Struct {
        fields: fields.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_istio_node() {
        let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
        let node = Node {
            id: "sidecar~10.1.2.3~web-1.shop~shop.svc.cluster.local".into(),
            metadata: Some(node_metadata("shop", &labels, "NONE")),
            ..Default::default()
        };
        let p = Proxy::from_node(Some(&node)).unwrap();
        assert_eq!(p.ip, "10.1.2.3");
        assert_eq!(p.namespace, "shop");
        assert_eq!(p.labels, labels);
        assert_eq!(p.interception, InterceptionMode::None);
        assert_eq!(p.proxy_type, ProxyType::Sidecar);
    }

    #[test]
    fn rejects_bad_ids() {
        let node = Node {
            id: "nope".into(),
            ..Default::default()
        };
        assert!(matches!(
            Proxy::from_node(Some(&node)),
            Err(ProxyError::BadNodeId(_))
        ));
        assert_eq!(Proxy::from_node(None), Err(ProxyError::MissingNode));
    }
}
