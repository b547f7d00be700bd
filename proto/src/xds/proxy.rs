//! The proxy model: who a connected proxy is and what kind of xDS it takes, read from its
//! node ID and metadata as Istio's `model.Proxy` reads them. The edge decodes Envoy's
//! `Node` into [`NodeMetadata`]; everything derived from it is decided here.

use super::node_metadata::{InterceptionMode, NodeId, NodeIdError, ProxyType};
use crate::security::identity::Identity;
use std::collections::BTreeMap;

/// Which family of generators serves a proxy (Istio's proxy type plus its `GENERATOR`
/// metadata): each kind has its own generator per resource type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProxyKind {
    /// An Envoy beside a workload.
    Sidecar,
    /// An Envoy at the edge of the mesh: an ingress or egress gateway.
    Router,
    /// A gRPC client speaking xDS itself (`GENERATOR: grpc`).
    ProxylessGrpc,
}

impl ProxyKind {
    pub const ALL: [ProxyKind; 3] = [
        ProxyKind::Sidecar,
        ProxyKind::Router,
        ProxyKind::ProxylessGrpc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProxyKind::Sidecar => "sidecar",
            ProxyKind::Router => "router",
            ProxyKind::ProxylessGrpc => "grpc",
        }
    }
}

/// The node metadata Shoal reads, decoded from the protobuf `Struct` (absent keys empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeMetadata {
    pub namespace: String,
    pub labels: BTreeMap<String, String>,
    pub interception_mode: String,
    pub cluster_id: String,
    pub network: String,
    pub generator: String,
}

/// A connected proxy.
#[derive(Clone, Debug, PartialEq)]
pub struct Proxy {
    /// The full node ID.
    pub id: String,
    pub kind: ProxyKind,
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
    /// Who the stream proved to be when it was accepted (anonymous on plaintext ADS);
    /// `security::authz` decides what it may be sent.
    pub identity: Identity,
}

impl Proxy {
    /// The proxy a node ID, its metadata and its locality describe, on a stream
    /// authenticated as `identity`. `NAMESPACE` in the metadata wins over the node ID's
    /// domain, as in Istio (what it claims, checked against `identity` by authorization).
    pub fn from_node(
        id: &str,
        meta: NodeMetadata,
        locality: String,
        identity: Identity,
    ) -> Result<Proxy, NodeIdError> {
        let node = NodeId::parse(id)?;
        let kind = match (node.proxy_type, meta.generator.as_str()) {
            (ProxyType::Router, _) => ProxyKind::Router,
            (ProxyType::Sidecar, "grpc") => ProxyKind::ProxylessGrpc,
            (ProxyType::Sidecar, _) => ProxyKind::Sidecar,
        };
        let namespace = if meta.namespace.is_empty() {
            node.namespace().to_string()
        } else {
            meta.namespace
        };
        let interception = InterceptionMode::from_metadata(Some(&meta.interception_mode));
        Ok(Proxy {
            id: id.to_string(),
            kind,
            ip: node.ip.to_string(),
            workload: node.workload.to_string(),
            namespace,
            labels: meta.labels,
            interception,
            cluster_id: meta.cluster_id,
            network: meta.network,
            locality,
            identity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_comes_from_the_node_type_and_the_generator() {
        let sidecar = "sidecar~10.1.2.3~web-1.shop~shop.svc.cluster.local";
        let router = "router~10.1.2.4~gw-1.edge~edge.svc.cluster.local";
        let grpc = NodeMetadata {
            generator: "grpc".into(),
            ..Default::default()
        };
        let kind = |id, meta| {
            Proxy::from_node(id, meta, String::new(), Identity::Anonymous)
                .unwrap()
                .kind
        };
        assert_eq!(kind(sidecar, NodeMetadata::default()), ProxyKind::Sidecar);
        assert_eq!(kind(router, NodeMetadata::default()), ProxyKind::Router);
        assert_eq!(kind(sidecar, grpc.clone()), ProxyKind::ProxylessGrpc);
        assert_eq!(kind(router, grpc), ProxyKind::Router);
    }

    #[test]
    fn metadata_namespace_wins_and_interception_defaults_to_redirect() {
        let id = "sidecar~10.1.2.3~web-1.shop~shop.svc.cluster.local";
        let p = Proxy::from_node(
            id,
            NodeMetadata::default(),
            "r/z".into(),
            Identity::Anonymous,
        )
        .unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.interception, p.ip.as_str()),
            ("shop", InterceptionMode::Redirect, "10.1.2.3")
        );
        let meta = NodeMetadata {
            namespace: "other".into(),
            interception_mode: "NONE".into(),
            ..Default::default()
        };
        let p = Proxy::from_node(id, meta, String::new(), Identity::Anonymous).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.interception),
            ("other", InterceptionMode::None)
        );
    }
}
