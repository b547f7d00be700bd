//! The security of a proxyless gRPC server's listener (gRFC A36), by its
//! PeerAuthentication mode for the port, as Istio's `grpcgen` makes it:
//!
//! - STRICT: mTLS, a client certificate required ([`super::tls::downstream`]);
//! - PERMISSIVE: gRPC's filter chains cannot tell TLS from plaintext (a chain matching
//!   `transport_protocol: tls` never matches), so it cannot accept both: a workload
//!   labelled `security.istio.io/tlsMode: istio` (its clients use mTLS: auto mTLS)
//!   gets STRICT, any other plaintext;
//! - DISABLE: plaintext.
//!
//! STRICT for a server without xDS credentials cannot be TLS (gRPC would NACK the
//! listener, and a server NACKing an update keeps serving its old, plaintext one): it
//! fails closed instead, plaintext with an RBAC filter that denies every call, and is
//! reported. The AuthorizationPolicies' filters ([`super::authz`]) come before the
//! router in either case.

use super::{authz, tls};
use crate::xds::security::ProxyPolicies;
use crate::xds::security::outbound::has_mesh_identity;
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use shoal_proto::config::security::{AuthorizationPolicy, AuthorizationRule};
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::security::{Authorization, MtlsMode};
use std::sync::Arc;

/// The name of the policy that stands for STRICT a server cannot meet (in its RBAC
/// rule names: `ns[<namespace>]-policy[<this>]-rule[0]`).
pub const STRICT_UNMET_POLICY: &str = "shoal-strict-without-xds-credentials";

/// What one of the server's filter chains is reached by and guarded with.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerChain {
    /// The chain's name suffix: `mtls` or `plaintext`.
    pub name: &'static str,
    pub transport_socket: Option<TransportSocket>,
    /// The HTTP filters before the router.
    pub http_filters: Vec<HttpFilter>,
}

/// The server side of one proxyless gRPC workload.
pub struct ServerSecurity<'a> {
    policies: &'a ProxyPolicies,
    proxy: &'a str,
    namespace: &'a str,
    /// Labelled `security.istio.io/tlsMode: istio`: PERMISSIVE is STRICT.
    labelled: bool,
    xds_credentials: bool,
    http_filters: Vec<HttpFilter>,
}

impl<'a> ServerSecurity<'a> {
    /// Builds the AuthorizationPolicy filters once for every port (they are the same).
    pub fn new(
        policies: &'a ProxyPolicies,
        proxy: &'a crate::proxy::Proxy,
        warnings: &mut Vec<String>,
    ) -> Self {
        ServerSecurity {
            policies,
            proxy: &proxy.id,
            namespace: &proxy.namespace,
            labelled: has_mesh_identity(&proxy.labels),
            xds_credentials: super::xds_credentials(proxy),
            http_filters: authz::http_filters(&policies.authorization, &proxy.id, warnings),
        }
    }

    /// The chain of workload port `port`.
    pub fn chain(&self, port: u32, warnings: &mut Vec<String>) -> ServerChain {
        let mode = match self.policies.peer.mode_for(port) {
            MtlsMode::Permissive if self.labelled => MtlsMode::Strict,
            MtlsMode::Permissive => {
                tracing::debug!(
                    proxy = self.proxy,
                    port,
                    "PERMISSIVE on a proxyless gRPC server without tlsMode=istio: plaintext"
                );
                MtlsMode::Disable
            }
            mode => mode,
        };
        match mode {
            MtlsMode::Strict if self.xds_credentials => ServerChain {
                name: "mtls",
                transport_socket: Some(tls::downstream()),
                http_filters: self.http_filters.clone(),
            },
            MtlsMode::Strict => {
                warnings.push(format!(
                    "PeerAuthentication STRICT on port {port} of proxyless gRPC server {}, which has no xDS credentials (label security.istio.io/tlsMode=istio, or an authenticated agent, says its bootstrap has certificate_providers): every call is denied (fail closed)",
                    self.proxy
                ));
                ServerChain {
                    name: "plaintext",
                    transport_socket: None,
                    http_filters: deny_all(self.namespace),
                }
            }
            _ => ServerChain {
                name: "plaintext",
                transport_socket: None,
                http_filters: self.http_filters.clone(),
            },
        }
    }
}

/// An RBAC filter that denies every call.
fn deny_all(namespace: &str) -> Vec<HttpFilter> {
    let everything = Arc::new(NamedConfig {
        name: STRICT_UNMET_POLICY.into(),
        namespace: namespace.into(),
        created: 0,
        spec: AuthorizationPolicy {
            rules: vec![AuthorizationRule::default()],
            action: Some("DENY".into()),
            ..Default::default()
        },
    });
    let all = Authorization {
        deny: vec![everything],
        ..Default::default()
    };
    let mut none = Vec::new();
    authz::http_filters(&all, "", &mut none)
}
