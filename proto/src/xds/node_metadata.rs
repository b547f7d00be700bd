//! A proxy's identity as its xDS `Node` carries it: the node ID and metadata keys Istio's
//! agent sends and Pilot reads.
//!
//! Node ID: `<type>~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local`. Metadata is a
//! protobuf `Struct` holding the string values named below, and [`LABELS`], a struct of
//! strings. Reading and writing the `Struct` itself is left to the crates that speak
//! protobuf.

use crate::model::DOMAIN_SUFFIX;

/// The proxy's namespace (a string); the node ID's domain names it too.
pub const NAMESPACE: &str = "NAMESPACE";
/// The workload's labels (a struct of strings).
pub const LABELS: &str = "LABELS";
/// How traffic reaches the proxy (a string): see [`InterceptionMode`].
pub const INTERCEPTION_MODE: &str = "INTERCEPTION_MODE";
/// The cluster the proxy runs in (a string).
pub const CLUSTER_ID: &str = "CLUSTER_ID";
/// The network the proxy is on (a string; Istio's `ISTIO_META_NETWORK`): endpoints on
/// other networks are reached through their gateways.
pub const NETWORK: &str = "NETWORK";
/// Which xDS generator serves the proxy (a string): `grpc` for proxyless gRPC clients.
pub const GENERATOR: &str = "GENERATOR";

/// The first field of the node ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyType {
    Sidecar,
    Router,
}

impl ProxyType {
    /// As written in the node ID: `sidecar` or `router`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyType::Sidecar => "sidecar",
            ProxyType::Router => "router",
        }
    }

    pub fn parse(s: &str) -> Option<ProxyType> {
        match s {
            "sidecar" => Some(ProxyType::Sidecar),
            "router" => Some(ProxyType::Router),
            _ => None,
        }
    }
}

/// How traffic reaches the proxy: iptables capture, or none (the app sends to the
/// proxy's listeners directly, so outbound listeners bind the proxy's own address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterceptionMode {
    Redirect,
    Tproxy,
    None,
}

impl InterceptionMode {
    /// As written in [`INTERCEPTION_MODE`]: `REDIRECT`, `TPROXY` or `NONE`.
    pub fn as_str(self) -> &'static str {
        match self {
            InterceptionMode::Redirect => "REDIRECT",
            InterceptionMode::Tproxy => "TPROXY",
            InterceptionMode::None => "NONE",
        }
    }

    /// Reads [`INTERCEPTION_MODE`]'s value: `NONE` and `TPROXY` are themselves; anything
    /// else, or no value, is `REDIRECT` (Istio's default).
    pub fn from_metadata(value: Option<&str>) -> InterceptionMode {
        match value {
            Some("NONE") => InterceptionMode::None,
            Some("TPROXY") => InterceptionMode::Tproxy,
            _ => InterceptionMode::Redirect,
        }
    }
}

/// Why a node ID is not one Shoal can serve.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodeIdError {
    #[error("node id {0:?} is not <type>~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local")]
    Malformed(String),
    #[error("node id {0:?}: unknown proxy type {1:?} (expected sidecar or router)")]
    UnknownProxyType(String, String),
}

/// A node ID, split into its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeId<'a> {
    pub proxy_type: ProxyType,
    pub ip: &'a str,
    /// `<pod>.<namespace>`.
    pub workload: &'a str,
    /// `<namespace>.svc.cluster.local`.
    pub domain: &'a str,
}

impl<'a> NodeId<'a> {
    /// The ID Istio's agent gives a pod's proxy.
    pub fn format(proxy_type: ProxyType, ip: &str, pod: &str, namespace: &str) -> String {
        let kind = proxy_type.as_str();
        format!("{kind}~{ip}~{pod}.{namespace}~{namespace}.{DOMAIN_SUFFIX}")
    }

    /// Four `~`-separated fields, a known proxy type and a non-empty IP.
    pub fn parse(id: &'a str) -> Result<NodeId<'a>, NodeIdError> {
        let parts: Vec<&str> = id.split('~').collect();
        let &[proxy_type, ip, workload, domain] = parts.as_slice() else {
            return Err(NodeIdError::Malformed(id.to_string()));
        };
        if ip.is_empty() {
            return Err(NodeIdError::Malformed(id.to_string()));
        }
        let proxy_type = ProxyType::parse(proxy_type)
            .ok_or_else(|| NodeIdError::UnknownProxyType(id.to_string(), proxy_type.into()))?;
        Ok(NodeId {
            proxy_type,
            ip,
            workload,
            domain,
        })
    }

    /// The namespace the ID names: the first label of its domain (empty when the
    /// domain is). [`NAMESPACE`] in the metadata, when set, takes precedence.
    pub fn namespace(&self) -> &'a str {
        self.domain.split('.').next().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_an_istio_node_id() {
        let id = NodeId::format(ProxyType::Sidecar, "10.1.2.3", "web-1", "shop");
        assert_eq!(id, "sidecar~10.1.2.3~web-1.shop~shop.svc.cluster.local");
        let parsed = NodeId::parse(&id).unwrap();
        assert_eq!(parsed.proxy_type, ProxyType::Sidecar);
        assert_eq!(parsed.ip, "10.1.2.3");
        assert_eq!(parsed.workload, "web-1.shop");
        assert_eq!(parsed.namespace(), "shop");
    }

    #[test]
    fn rejects_malformed_ids() {
        for id in [
            "nope",
            "sidecar~~web.shop~shop.svc.cluster.local",
            "a~b~c~d~e",
        ] {
            assert_eq!(NodeId::parse(id), Err(NodeIdError::Malformed(id.into())));
        }
        assert_eq!(
            NodeId::parse("gateway~10.0.0.1~gw.shop~shop.svc.cluster.local"),
            Err(NodeIdError::UnknownProxyType(
                "gateway~10.0.0.1~gw.shop~shop.svc.cluster.local".into(),
                "gateway".into()
            ))
        );
    }

    #[test]
    fn interception_mode_defaults_to_redirect() {
        for mode in [
            InterceptionMode::Redirect,
            InterceptionMode::Tproxy,
            InterceptionMode::None,
        ] {
            assert_eq!(InterceptionMode::from_metadata(Some(mode.as_str())), mode);
        }
        assert_eq!(
            InterceptionMode::from_metadata(None),
            InterceptionMode::Redirect
        );
        assert_eq!(
            InterceptionMode::from_metadata(Some("")),
            InterceptionMode::Redirect
        );
    }
}
