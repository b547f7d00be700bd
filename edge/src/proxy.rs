//! A connected proxy's identity, read from its xDS `Node` as Istio reads it.
//!
//! The node ID format and metadata keys are proto's contracts
//! ([`shoal_proto::xds::node_metadata`]); this reads them out of Envoy's `Node`.

use envoy_types::pb::envoy::config::core::v3::{Locality, Node};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as ValueKind};
use shoal_proto::security::Identity;
use shoal_proto::xds::node_metadata::{
    CLUSTER_ID, GENERATOR, INTERCEPTION_MODE, LABELS, NAMESPACE, NETWORK, NodeIdError,
};
use std::collections::BTreeMap;

pub use shoal_proto::xds::node_metadata::{InterceptionMode, ProxyType};
pub use shoal_proto::xds::{NodeMetadata, Proxy, ProxyKind};

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

/// The proxy an xDS request's `Node` describes, on a stream authenticated as `identity`.
pub fn from_node(node: Option<&Node>, identity: Identity) -> Result<Proxy, ProxyError> {
    let node = node.ok_or(ProxyError::MissingNode)?;
    let meta = node.metadata.as_ref();
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
    let string = |key| meta_string(meta, key).unwrap_or_default();
    let metadata = NodeMetadata {
        namespace: string(NAMESPACE),
        labels,
        interception_mode: string(INTERCEPTION_MODE),
        cluster_id: string(CLUSTER_ID),
        network: string(NETWORK),
        generator: string(GENERATOR),
    };
    let locality = node
        .locality
        .as_ref()
        .map(locality_string)
        .unwrap_or_default();
    Ok(Proxy::from_node(&node.id, metadata, locality, identity)?)
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
        let p = from_node(Some(&node), Identity::Anonymous).unwrap();
        assert_eq!(p.ip, "10.1.2.3");
        assert_eq!(p.namespace, "shop");
        assert_eq!(p.labels, labels);
        assert_eq!(p.interception, InterceptionMode::None);
        assert_eq!(p.kind, ProxyKind::Sidecar);
    }

    #[test]
    fn rejects_bad_ids() {
        let node = Node {
            id: "nope".into(),
            ..Default::default()
        };
        assert!(matches!(
            from_node(Some(&node), Identity::Anonymous),
            Err(ProxyError::BadNodeId(_))
        ));
        assert_eq!(
            from_node(None, Identity::Anonymous),
            Err(ProxyError::MissingNode)
        );
    }
}
