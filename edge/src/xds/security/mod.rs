//! Where security policy meets generation, as Istio's authn and authz plugins meet its
//! listener and cluster builders: how each inbound port's filter chains are reached
//! (plaintext, mTLS, or both) and which filters guard them ([`inbound`]), and the
//! transport socket of each outbound cluster ([`outbound`]). The listener and cluster
//! builders ask these hooks and never branch on policy themselves.
//!
//! ```text
//!  ConfigIndex.security ─► ProxyPolicies::of(namespace, labels) ─► InboundSecurity
//!       (PeerAuthn, AuthorizationPolicies, RequestAuthentications)      │ transports(port)
//!                                                                       │ http_filters(port)
//!  listeners/inbound.rs ◄───────────────────────────────────────────────┘ network_filters(port)
//!  clusters.rs ◄── outbound::cluster_transport(DestinationRule tls, …)
//! ```
//!
//! Today the policies are indexed but not enforced (their objects are still reported as
//! such): every chain is plaintext and unguarded, as before.

pub mod inbound;
pub mod outbound;

pub use inbound::{ChainTransport, InboundSecurity};

use shoal_proto::config::security::RequestAuthentication;
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::security::{Authorization, PeerAuthn, SecurityPolicies};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The security policies that apply to one proxy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProxyPolicies {
    pub peer: PeerAuthn,
    pub authorization: Authorization,
    pub request_authentication: Vec<Arc<NamedConfig<RequestAuthentication>>>,
}

/// What a proxy's generated config depends on of its policies: within one index
/// generation, proxies with equal keys get equal listeners, so a deployment's pods
/// still share theirs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyKey {
    peer: PeerAuthn,
    /// The applying policies, by (namespace, name), in action order.
    policies: Vec<(String, String)>,
}

impl ProxyPolicies {
    pub fn of(
        index: &SecurityPolicies,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Self {
        if index.is_empty() {
            return ProxyPolicies::default();
        }
        ProxyPolicies {
            peer: index.peer_authentication(namespace, labels),
            authorization: index.authorization(namespace, labels),
            request_authentication: index.request_authentication(namespace, labels),
        }
    }

    pub fn key(&self) -> PolicyKey {
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
            peer: self.peer.clone(),
            policies: named,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::config::security::{AuthorizationPolicy, PolicySelector};
    use shoal_proto::model::NamespaceConfig;

    #[test]
    fn proxies_under_the_same_policies_share_a_key_and_a_mesh_without_any_has_none() {
        let policy = |name: &str, app: Option<&str>| NamedConfig {
            name: name.into(),
            namespace: "shop".into(),
            created: 0,
            spec: AuthorizationPolicy {
                selector: app.map(|a| PolicySelector {
                    match_labels: [("app".to_string(), a.to_string())].into(),
                }),
                ..Default::default()
            },
        };
        let namespaces = [(
            "shop".to_string(),
            Arc::new(NamespaceConfig {
                namespace: "shop".into(),
                authorization_policies: vec![policy("all", None), policy("web", Some("web"))],
                ..Default::default()
            }),
        )]
        .into();
        let index = SecurityPolicies::build("istio-system", &namespaces);
        let labels = |app: &str, pod: &str| -> BTreeMap<String, String> {
            [("app", app), ("pod", pod)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let key = |app: &str, pod: &str| ProxyPolicies::of(&index, "shop", &labels(app, pod)).key();
        assert_eq!(
            key("web", "web-0"),
            key("web", "web-1"),
            "pods of one deployment"
        );
        assert_ne!(key("web", "web-0"), key("db", "db-0"));
        let empty = SecurityPolicies::build("istio-system", &BTreeMap::new());
        assert_eq!(
            ProxyPolicies::of(&empty, "shop", &labels("web", "web-0")),
            ProxyPolicies::default()
        );
    }
}
