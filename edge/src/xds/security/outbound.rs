//! The outbound side: the transport socket of each cluster, as Istio's cluster builder
//! sets it (`applyUpstreamTLSSettings`, `buildAutoMtlsSettings`):
//!
//! - a DestinationRule's `tls.mode`: ISTIO_MUTUAL is the mesh's mTLS ([`mesh_tls`]);
//!   SIMPLE and MUTUAL originate TLS with the rule's files ([`tls`]); DISABLE is
//!   plaintext;
//! - no mode, auto mTLS on (`enableAutoMtls`), a client with the mesh's identity, a
//!   mesh-internal service whose namespace does not DISABLE mTLS: both, chosen per endpoint by Envoy's transport socket
//!   matches — mTLS to endpoints labelled `security.istio.io/tlsMode: istio` (the EDS
//!   metadata `envoy.transport_socket_match`), plaintext to the others;
//!
//! the mesh's mTLS naming the cluster as SNI and verifying the destination's SPIFFE IDs
//! (its endpoints' service accounts).

pub mod tls;

use super::mesh_tls;
use crate::xds::util::any;
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    TransportSocket, UpstreamHttpProtocolOptions, transport_socket,
};
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind as ValueKind};
use shoal_proto::config::istio::ClientTlsSettings;
use shoal_proto::config::mesh::MeshConfig;
use shoal_proto::model::Service;
use shoal_proto::push_context::security::{MtlsMode, SecurityPolicies};

/// The endpoint label (set by Istio's injector) that says a workload has a sidecar.
pub const TLS_MODE_LABEL: &str = "security.istio.io/tlsMode";

/// Whether a workload with `labels` has the mesh's identity (`tlsMode: istio`).
pub fn has_mesh_identity(labels: &std::collections::BTreeMap<String, String>) -> bool {
    labels.get(TLS_MODE_LABEL).map(String::as_str) == Some(TLS_MODE_ISTIO)
}
/// The EDS metadata filter Envoy matches transport sockets on, and its key.
pub const TRANSPORT_SOCKET_MATCH: &str = "envoy.transport_socket_match";
pub const TLS_MODE_KEY: &str = "tlsMode";
pub const TLS_MODE_ISTIO: &str = "istio";

/// What a cluster's transport is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterTransport {
    pub transport_socket: Option<TransportSocket>,
    pub transport_socket_matches: Vec<cluster::TransportSocketMatch>,
    /// SNI and SAN checks from the request's host, for the HTTP protocol options.
    pub auto_sni: Option<UpstreamHttpProtocolOptions>,
}

impl ClusterTransport {
    /// Sets the cluster's transport (the HTTP options are the caller's).
    pub fn apply(&self, cluster: &mut Cluster) {
        cluster.transport_socket = self.transport_socket.clone();
        cluster.transport_socket_matches = self.transport_socket_matches.clone();
    }
}

/// One outbound cluster, as its transport needs it.
#[derive(Clone, Copy, Debug)]
pub struct ClusterTarget<'a> {
    /// The cluster's name: the SNI of its mTLS (`outbound_.<port>_.<subset>_.<host>` is
    /// Istio's form; a peer matches it only with `AUTO_PASSTHROUGH`).
    pub name: &'a str,
    pub service: &'a Service,
    /// The DestinationRule's `tls` for this port and subset.
    pub tls: Option<&'a ClientTlsSettings>,
    /// HTTP/2 (`h2` in SIMPLE/MUTUAL ALPN; `istio-h2` in the mesh's).
    pub h2: bool,
    /// HTTP of any version (the mesh's ALPN says so), else TCP.
    pub http: bool,
}

/// The mesh around a cluster: its config, its PeerAuthentications, and whether the
/// client has the mesh's identity (without a certificate, auto mTLS is plaintext).
#[derive(Clone, Copy, Debug)]
pub struct MeshSecurity<'a> {
    pub mesh: &'a MeshConfig,
    pub policies: &'a SecurityPolicies,
    pub client_identity: bool,
}

/// The transport of `target`. `identities` gives the destination's SPIFFE IDs (read from
/// its endpoints: the caller watches them when it is called), asked only when the mesh's
/// mTLS names them.
pub fn cluster_transport(
    target: ClusterTarget<'_>,
    mesh: MeshSecurity<'_>,
    identities: impl FnOnce() -> Vec<String>,
) -> ClusterTransport {
    let Some(tls) = target.tls else {
        if !auto_mtls(target.service, mesh) {
            return ClusterTransport::default();
        }
        return ClusterTransport {
            transport_socket_matches: vec![
                cluster::TransportSocketMatch {
                    name: "tlsMode-istio".into(),
                    r#match: Some(Struct {
                        fields: [(
                            TLS_MODE_KEY.to_string(),
                            Value {
                                kind: Some(ValueKind::StringValue(TLS_MODE_ISTIO.into())),
                            },
                        )]
                        .into(),
                    }),
                    transport_socket: Some(istio_mutual(target, &identities())),
                },
                cluster::TransportSocketMatch {
                    name: "tlsMode-disabled".into(),
                    r#match: Some(Struct::default()),
                    transport_socket: Some(raw_buffer()),
                },
            ],
            ..Default::default()
        };
    };
    // A rule's `tls` without a mode is DISABLE, as in Istio's API.
    match tls.mode.as_deref().unwrap_or("DISABLE") {
        "ISTIO_MUTUAL" => {
            // The rule's SANs, when it names any, else the service's accounts.
            let ids = if tls.subject_alt_names.is_empty() {
                identities()
            } else {
                tls.subject_alt_names.clone()
            };
            ClusterTransport {
                transport_socket: Some(istio_mutual(target, &ids)),
                ..Default::default()
            }
        }
        "SIMPLE" | "MUTUAL" => match tls::upstream_tls(Some(tls), target.h2) {
            Some(t) => ClusterTransport {
                transport_socket: Some(t.transport_socket),
                auto_sni: t.auto,
                ..Default::default()
            },
            None => ClusterTransport::default(),
        },
        _ => ClusterTransport::default(),
    }
}

/// Istio's auto mTLS applies to a mesh-internal service unless its namespace (or the
/// mesh) DISABLEs mTLS, from a client that has a certificate.
pub fn auto_mtls(service: &Service, mesh: MeshSecurity<'_>) -> bool {
    mesh.client_identity
        && mesh.mesh.auto_mtls()
        && !service.mesh_external
        && mesh
            .policies
            .peer_authentication(&service.namespace, &Default::default())
            .mode
            != MtlsMode::Disable
}

fn istio_mutual(target: ClusterTarget<'_>, ids: &[String]) -> TransportSocket {
    let alpns: &[&str] = match (target.http, target.h2) {
        (true, true) => &[mesh_tls::ISTIO_H2_ALPN],
        (true, false) => &[mesh_tls::ISTIO_HTTP11_ALPN],
        (false, _) => &mesh_tls::ISTIO_TCP_ALPNS,
    };
    mesh_tls::upstream(target.name, ids, alpns)
}

fn raw_buffer() -> TransportSocket {
    TransportSocket {
        name: "envoy.transport_sockets.raw_buffer".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(
            &RawBuffer::default(),
        ))),
    }
}

/// The SPIFFE IDs of `accounts` (service accounts, or SPIFFE IDs already) in
/// `trust_domain`, sorted and deduplicated.
pub fn spiffe_ids<'a>(
    trust_domain: &str,
    namespace: &str,
    accounts: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut ids: Vec<String> = accounts
        .into_iter()
        .filter(|a| !a.is_empty())
        .map(|a| {
            if a.starts_with("spiffe://") {
                a.to_string()
            } else {
                format!("spiffe://{trust_domain}/ns/{namespace}/sa/{a}")
            }
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}
