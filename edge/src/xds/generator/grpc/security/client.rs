//! The transport of a proxyless gRPC client's cluster (its CDS hook), as the sidecar's
//! [`outbound::cluster_transport`] decides it, within what gRPC implements (gRFC A29):
//!
//! - DestinationRule `tls.mode: ISTIO_MUTUAL`: the mesh's mTLS, naming the rule's SANs
//!   or else the destination's service accounts (as Istio's `grpcgen`);
//! - no mode, auto mTLS (Istio's `grpcgen` has none; Shoal gives gRPC the sidecar's rule
//!   where gRPC can follow it): gRPC has no `transport_socket_matches`, so the choice is
//!   per cluster rather than per endpoint: mTLS when every endpoint the cluster selects
//!   is labelled `security.istio.io/tlsMode: istio`, plaintext otherwise (and reported
//!   when only some are);
//! - SIMPLE and MUTUAL (certificate files) are not supported by gRPC's xDS: reported,
//!   and left plaintext as Istio leaves them; DISABLE is plaintext.
//!
//! A client gets TLS only when it has xDS credentials ([`super::xds_credentials`]):
//! gRPC NACKs a cluster naming a certificate provider its bootstrap lacks, whatever
//! credentials the channel uses. A rule asking ISTIO_MUTUAL of a client without them
//! gets no cluster: its calls fail rather than go out in plaintext, and it is reported.

use super::tls;
use crate::xds::endpoints::EndpointFilter;
use crate::xds::security::outbound::{self, MeshSecurity, has_mesh_identity};
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use shoal_proto::config::istio::ClientTlsSettings;
use shoal_proto::model::{Service, ServiceKey};
use shoal_proto::push_context::PushContext;

/// How a gRPC client reaches one cluster.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientTransport {
    Plaintext,
    MutualTls(TransportSocket),
    /// No cluster: the policy asks what this client cannot do safely.
    Refused,
}

/// One cluster of a gRPC client.
#[derive(Clone, Copy, Debug)]
pub struct ClusterTarget<'a> {
    pub name: &'a str,
    pub service: &'a Service,
    /// The endpoints the cluster selects (service port, subset labels).
    pub filter: &'a EndpointFilter,
    /// The DestinationRule's `tls` for this port and subset, and who says so.
    pub tls: Option<&'a ClientTlsSettings>,
    pub owner: &'a str,
}

/// The client: its node ID (for reports) and whether it has xDS credentials.
#[derive(Clone, Copy, Debug)]
pub struct Client<'a> {
    pub id: &'a str,
    pub xds_credentials: bool,
}

/// The transport of `target` for `client`. `watched` gets the services whose endpoints
/// the answer read (it changes when their endpoints do); `warnings` what was not done
/// as asked.
pub fn transport(
    target: ClusterTarget<'_>,
    client: Client<'_>,
    push: &PushContext,
    watched: &mut Vec<ServiceKey>,
    warnings: &mut Vec<String>,
) -> ClientTransport {
    let index = push.index();
    let name = target.name;
    let mode = target.tls.map(|t| t.mode.as_deref().unwrap_or("DISABLE"));
    let identities = |watched: &mut Vec<ServiceKey>| {
        watched.push(target.service.key());
        crate::xds::clusters::identities(target.service, push, index.mesh.trust_domain())
    };
    match mode {
        Some("ISTIO_MUTUAL") if !client.xds_credentials => {
            warnings.push(format!(
                "{}cluster {name}: ISTIO_MUTUAL for proxyless gRPC client {} that has no xDS credentials (label security.istio.io/tlsMode=istio, or an authenticated agent, says its bootstrap has certificate_providers); the cluster is not sent",
                target.owner, client.id
            ));
            ClientTransport::Refused
        }
        Some("ISTIO_MUTUAL") => {
            let sans = match target.tls {
                Some(t) if !t.subject_alt_names.is_empty() => t.subject_alt_names.clone(),
                _ => identities(watched),
            };
            ClientTransport::MutualTls(tls::upstream(&sans))
        }
        Some(other @ ("SIMPLE" | "MUTUAL")) => {
            warnings.push(format!(
                "{}cluster {name}: tls mode {other} is not supported for proxyless gRPC client {} (gRPC takes certificates from its bootstrap's providers only); plaintext, as Istio",
                target.owner, client.id
            ));
            ClientTransport::Plaintext
        }
        Some(_) => ClientTransport::Plaintext,
        None => {
            let mesh = MeshSecurity {
                mesh: &index.mesh,
                policies: &index.security,
                client_identity: client.xds_credentials,
            };
            if !outbound::auto_mtls(target.service, mesh) {
                return ClientTransport::Plaintext;
            }
            watched.push(target.service.key());
            let endpoints = push.endpoints(&target.service.key());
            let (mut meshed, mut plain) = (0usize, 0usize);
            for ep in endpoints
                .iter()
                .flat_map(|e| e.endpoints.iter())
                .filter(|ep| target.filter.selects(ep))
            {
                if has_mesh_identity(&ep.labels) {
                    meshed += 1;
                } else {
                    plain += 1;
                }
            }
            if meshed > 0 && plain > 0 {
                warnings.push(format!(
                    "cluster {name}: {meshed} endpoints are labelled security.istio.io/tlsMode=istio and {plain} are not; proxyless gRPC client {} cannot choose mTLS per endpoint, so it connects in plaintext",
                    client.id
                ));
            }
            if meshed > 0 && plain == 0 {
                ClientTransport::MutualTls(tls::upstream(&identities(watched)))
            } else {
                ClientTransport::Plaintext
            }
        }
    }
}
