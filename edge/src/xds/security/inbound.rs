//! The inbound side of a sidecar: for each workload port, the transports its filter
//! chains are reached by (Istio's PeerAuthentication: plaintext for DISABLE, mTLS for
//! STRICT, both for PERMISSIVE, told apart by the TLS inspector), and the filters put in
//! front of the router or TCP proxy (RequestAuthentication's `jwt_authn`, [`super::jwt`],
//! then AuthorizationPolicy's RBAC, [`super::authz`], which matches the payload it
//! verified).
//!
//! A workload without the mesh's identity ([`super::mesh_identity`]: no agent serves it
//! a certificate) cannot terminate mTLS: PERMISSIVE is plaintext for it,
//! and STRICT still asks for mTLS alone, so it refuses plaintext rather than accept it.

use super::jwt::keys::JwksStore;
use super::{ProxyPolicies, mesh_tls};
use crate::xds::util::{RAW_BUFFER, TLS_TRANSPORT};
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::config::listener::v3::Filter;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use shoal_proto::model::Protocol;
use shoal_proto::push_context::security::MtlsMode;

/// How one variant of a port's filter chains is reached.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainTransport {
    /// The chains' `transport_protocol` match: `raw_buffer` or `tls`.
    pub transport_protocol: &'static str,
    /// The ALPNs that tell a sniffed port's HTTP chain from its TCP one.
    pub http_alpns: &'static [&'static str],
    /// The downstream TLS context, for `tls`.
    pub transport_socket: Option<TransportSocket>,
}

impl ChainTransport {
    pub fn plaintext() -> Self {
        ChainTransport {
            transport_protocol: RAW_BUFFER,
            http_alpns: &crate::xds::util::PLAINTEXT_HTTP_ALPNS,
            transport_socket: None,
        }
    }

    /// The mesh's mTLS, for chains carrying `protocol` (HTTP chains offer h2 and
    /// http/1.1 inside the tunnel).
    pub fn mutual_tls(protocol: Option<Protocol>) -> Self {
        let alpns: &[&str] = match protocol {
            Some(p) if p.is_http() => &["h2", "http/1.1"],
            _ => &[],
        };
        ChainTransport {
            transport_protocol: TLS_TRANSPORT,
            http_alpns: &mesh_tls::ISTIO_HTTP_ALPNS,
            transport_socket: Some(mesh_tls::downstream(alpns)),
        }
    }
}

/// The inbound security of one proxy. Its guards are the same on every port and built
/// once, here, rather than per chain.
#[derive(Clone, Debug)]
pub struct InboundSecurity<'a> {
    policies: &'a ProxyPolicies,
    http: Vec<HttpFilter>,
    network: Vec<Filter>,
}

impl<'a> InboundSecurity<'a> {
    /// Without fetched JWKS (a `jwksUri` gets keys that refuse every token).
    pub fn new(policies: &'a ProxyPolicies) -> Self {
        Self::with_jwks(policies, &JwksStore::new())
    }

    /// With the keys fetched for `jwksUri`s in `jwks`.
    pub fn with_jwks(policies: &'a ProxyPolicies, jwks: &JwksStore) -> Self {
        let authn = super::jwt::http_filter(&policies.request_authentication, jwks);
        InboundSecurity {
            policies,
            http: authn
                .into_iter()
                .chain(super::authz::http_filters(&policies.authorization))
                .collect(),
            network: super::authz::network_filters(&policies.authorization),
        }
    }

    /// The transports of the chains of workload port `port` carrying `protocol`
    /// (`None`: the passthrough chains, which take the workload-level mode), mTLS first.
    pub fn transports(&self, port: Option<u32>, protocol: Option<Protocol>) -> Vec<ChainTransport> {
        let peer = &self.policies.peer;
        let mode = port.map_or(peer.mode, |p| peer.mode_for(p));
        match (mode, self.policies.mesh_identity) {
            (MtlsMode::Disable, _) | (MtlsMode::Permissive, false) => {
                vec![ChainTransport::plaintext()]
            }
            (MtlsMode::Strict, _) => vec![ChainTransport::mutual_tls(protocol)],
            (MtlsMode::Permissive, true) => vec![
                ChainTransport::mutual_tls(protocol),
                ChainTransport::plaintext(),
            ],
        }
    }

    /// HTTP filters that go before the router of port `port`'s connection managers:
    /// `jwt_authn`, then the AuthorizationPolicies' RBAC (the same on every port).
    pub fn http_filters(&self, _port: Option<u32>) -> Vec<HttpFilter> {
        self.http.clone()
    }

    /// Network filters that go before the TCP proxy of port `port`'s chains.
    pub fn network_filters(&self, _port: Option<u32>) -> Vec<Filter> {
        self.network.clone()
    }
}
