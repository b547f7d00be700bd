//! Where security policy meets generation, as Istio's authn and authz plugins meet its
//! listener and cluster builders: how each inbound port's filter chains are reached
//! (plaintext, mTLS, or both) and which filters guard them ([`inbound`]), and the
//! transport socket of each outbound cluster ([`outbound`]). The listener and cluster
//! builders ask these hooks and never branch on policy themselves.
//!
//! ```text
//!  ConfigIndex.security ─► ProxyPolicies::of(ns, labels, identity) ─► InboundSecurity
//!       (PeerAuthn, AuthorizationPolicies, RequestAuthentications)      │ transports(port)
//!                                                                       │ http_filters(port)
//!  listeners/inbound.rs ◄───────────────────────────────────────────────┘ network_filters(port)
//!  clusters.rs ◄── outbound::cluster_transport(DestinationRule tls, …)
//! ```
//!
//! PeerAuthentication, auto mTLS, AuthorizationPolicy and RequestAuthentication
//! ([`jwt`]: `jwt_authn` before the RBAC filters, keys of `jwksUri`s fetched by the
//! edge) are enforced.

pub mod authz;
pub mod inbound;
pub mod jwt;
pub mod mesh_tls;
pub mod outbound;

pub use inbound::{ChainTransport, InboundSecurity};

use crate::proxy::Proxy;
use shoal_proto::config::security::RequestAuthentication;
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::security::{Authorization, PeerAuthn, SecurityPolicies};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether a proxy holds the mesh's identity, so that it can speak the mesh's mTLS: its
/// agent authenticated its stream (an agent that proves a workload identity also serves
/// its certificate to Envoy over SDS), or its workload is labelled as injected
/// (`security.istio.io/tlsMode: istio`, which is also what auto mTLS looks for at the
/// other end). An anonymous, unlabelled proxy has no certificate and no `sds-grpc`.
pub fn mesh_identity(proxy: &Proxy) -> bool {
    proxy.identity.principal().is_some() || outbound::has_mesh_identity(&proxy.labels)
}

/// The security policies that apply to one proxy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyPolicies {
    /// The workload has an agent serving it the mesh's certificate over SDS (see
    /// [`mesh_identity`]). Without it, PERMISSIVE is plaintext only.
    pub mesh_identity: bool,
    pub peer: PeerAuthn,
    pub authorization: Authorization,
    pub request_authentication: Vec<Arc<NamedConfig<RequestAuthentication>>>,
}

/// What a proxy's generated config depends on of its policies: within one index
/// generation, proxies with equal keys get equal listeners, so a deployment's pods
/// still share theirs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyKey {
    mesh_identity: bool,
    peer: PeerAuthn,
    /// The applying policies, by (namespace, name), in action order.
    policies: Vec<(String, String)>,
    /// The version of the fetched JWKS its RequestAuthentications use (0: none used).
    jwks_version: u64,
}

impl ProxyPolicies {
    pub fn of(
        index: &SecurityPolicies,
        namespace: &str,
        labels: &BTreeMap<String, String>,
        mesh_identity: bool,
    ) -> Self {
        if index.is_empty() {
            return ProxyPolicies {
                mesh_identity,
                ..Default::default()
            };
        }
        ProxyPolicies {
            mesh_identity,
            peer: index.peer_authentication(namespace, labels),
            authorization: index.authorization(namespace, labels),
            request_authentication: index.request_authentication(namespace, labels),
        }
    }

    /// Its key, with the keys fetched for `jwksUri`s in `jwks`.
    pub fn key(&self, jwks: &jwt::keys::JwksStore) -> PolicyKey {
        let a = &self.authorization;
        let named = a
            .custom
            .iter()
            .chain(&a.deny)
            .chain(&a.allow)
            .chain(&a.audit)
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .chain(
                self.request_authentication
                    .iter()
                    .map(|p| (p.namespace.clone(), p.name.clone())),
            )
            .collect();
        PolicyKey {
            mesh_identity: self.mesh_identity,
            peer: self.peer.clone(),
            policies: named,
            jwks_version: jwt::keys_version(&self.request_authentication, jwks),
        }
    }
}

#[cfg(test)]
mod tests;
