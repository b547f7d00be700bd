//! The inbound side of a sidecar: for each workload port, the transports its filter
//! chains are reached by (Istio's PeerAuthentication: plaintext for DISABLE, mTLS for
//! STRICT, both for PERMISSIVE, told apart by the TLS inspector), and the filters put in
//! front of the router or TCP proxy (RequestAuthentication's `jwt_authn`,
//! AuthorizationPolicy's `rbac` / `ext_authz`).
//!
//! Not enforced yet: every port is reached in plaintext alone and nothing guards it.

use super::ProxyPolicies;
use crate::xds::util::RAW_BUFFER;
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::config::listener::v3::Filter;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;

/// How one variant of a port's filter chains is reached.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainTransport {
    /// The chains' `transport_protocol` match: `raw_buffer` or `tls`.
    pub transport_protocol: &'static str,
    /// The ALPNs matched instead of the chain's own (an mTLS chain matches Istio's);
    /// `None`: the chain's.
    pub application_protocols: Option<Vec<String>>,
    /// The downstream TLS context, for `tls`.
    pub transport_socket: Option<TransportSocket>,
}

impl ChainTransport {
    pub fn plaintext() -> Self {
        ChainTransport {
            transport_protocol: RAW_BUFFER,
            application_protocols: None,
            transport_socket: None,
        }
    }
}

/// The inbound security of one proxy.
#[derive(Clone, Copy, Debug)]
pub struct InboundSecurity<'a> {
    #[allow(dead_code)] // read once PeerAuthentication and the policies are enforced
    policies: &'a ProxyPolicies,
}

impl<'a> InboundSecurity<'a> {
    pub fn new(policies: &'a ProxyPolicies) -> Self {
        InboundSecurity { policies }
    }

    /// The transports of the chains of workload port `port` (`None`: the passthrough
    /// chains, which take the workload-level mode).
    pub fn transports(&self, _port: Option<u32>) -> Vec<ChainTransport> {
        vec![ChainTransport::plaintext()]
    }

    /// HTTP filters that go before the router of port `port`'s connection managers.
    pub fn http_filters(&self, _port: Option<u32>) -> Vec<HttpFilter> {
        Vec::new()
    }

    /// Network filters that go before the TCP proxy of port `port`'s chains.
    pub fn network_filters(&self, _port: Option<u32>) -> Vec<Filter> {
        Vec::new()
    }
}
