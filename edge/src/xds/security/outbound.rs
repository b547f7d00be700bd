//! The outbound side: the transport socket of each cluster. Today the TLS a
//! DestinationRule asks a sidecar to originate ([`tls`]: SIMPLE and MUTUAL); auto mTLS
//! and ISTIO_MUTUAL are not built yet (their clusters stay plaintext).

pub mod tls;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, UpstreamHttpProtocolOptions};
use shoal_proto::config::istio::ClientTlsSettings;

/// What a cluster's transport is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterTransport {
    pub transport_socket: Option<TransportSocket>,
    /// SNI and SAN checks from the request's host, for the HTTP protocol options.
    pub auto_sni: Option<UpstreamHttpProtocolOptions>,
}

impl ClusterTransport {
    /// Sets the cluster's transport socket (the HTTP options are the caller's).
    pub fn apply(&self, cluster: &mut Cluster) {
        cluster.transport_socket = self.transport_socket.clone();
    }
}

/// The transport of a cluster whose DestinationRule asks for `tls`; `h2`: the cluster
/// speaks HTTP/2 (advertised with ALPN).
pub fn cluster_transport(tls: Option<&ClientTlsSettings>, h2: bool) -> ClusterTransport {
    match tls::upstream_tls(tls, h2) {
        Some(t) => ClusterTransport {
            transport_socket: Some(t.transport_socket),
            auto_sni: t.auto,
        },
        None => ClusterTransport::default(),
    }
}
