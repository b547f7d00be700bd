//! Who may read `/debug/*`: a caller on this host, or one whose bearer token proves an
//! identity of the control plane's namespace (istiod's rule; the decision itself is
//! `shoal_proto::security::authorize_debug`). `/metrics` and `/healthz/ready` stay open.

use axum::http::{HeaderMap, StatusCode, header::AUTHORIZATION};
use shoal_proto::security::{
    Authenticator, Credentials, DebugCaller, Decision, Identity, authorize_debug,
};
use std::net::SocketAddr;
use std::sync::Arc;

/// The debug pages' access rule.
#[derive(Clone)]
pub struct DebugAccess {
    /// `None`: every caller may read them (`--debug-auth false`, Istio's
    /// `DEBUG_AUTH=false`; not for production).
    rule: Option<Rule>,
}

#[derive(Clone)]
struct Rule {
    /// Verifies the bearer token of a caller from elsewhere; without one only callers on
    /// this host are answered.
    authenticator: Option<Arc<dyn Authenticator>>,
    system_namespace: String,
}

impl Default for DebugAccess {
    /// Callers on this host only.
    fn default() -> Self {
        DebugAccess::local_or_authenticated(None, "istio-system")
    }
}

impl DebugAccess {
    /// A caller on this host, or one authenticated by `authenticator` as an identity of
    /// `system_namespace`.
    pub fn local_or_authenticated(
        authenticator: Option<Arc<dyn Authenticator>>,
        system_namespace: impl Into<String>,
    ) -> Self {
        DebugAccess {
            rule: Some(Rule {
                authenticator,
                system_namespace: system_namespace.into(),
            }),
        }
    }

    /// Anyone.
    pub fn open() -> Self {
        DebugAccess { rule: None }
    }

    /// `Ok` when `peer` presenting `headers` may read a debug page; otherwise the status
    /// and the reason to answer.
    pub async fn check(
        &self,
        peer: SocketAddr,
        headers: &HeaderMap,
    ) -> Result<(), (StatusCode, String)> {
        let Some(rule) = &self.rule else {
            return Ok(());
        };
        let local = peer.ip().is_loopback();
        let identity = match (&rule.authenticator, local) {
            (Some(authenticator), false) => {
                let bearer_token = headers
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(Credentials::bearer);
                if bearer_token.is_none() {
                    Identity::Anonymous
                } else {
                    let credentials = Credentials {
                        bearer_token,
                        ..Default::default()
                    };
                    authenticator
                        .authenticate(&credentials)
                        .await
                        .map_err(|e| {
                            (StatusCode::UNAUTHORIZED, format!("not authenticated: {e}"))
                        })?
                }
            }
            _ => Identity::Anonymous,
        };
        let caller = DebugCaller {
            local,
            identity: &identity,
        };
        match authorize_debug(caller, &rule.system_namespace) {
            Decision::Deny { reason } => {
                let status = if identity.principal().is_some() {
                    StatusCode::FORBIDDEN
                } else {
                    StatusCode::UNAUTHORIZED
                };
                tracing::debug!(%peer, %reason, "debug page refused");
                Err((status, reason))
            }
            Decision::Allow | Decision::AllowUnauthenticated => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use shoal_proto::security::{AuthMethod, AuthnError, Principal};

    /// A test double: `Bearer <namespace>` proves `sa/istioctl` of that namespace; any
    /// other token is refused.
    struct NamespaceTokens;

    #[async_trait]
    impl Authenticator for NamespaceTokens {
        fn name(&self) -> &'static str {
            "namespace-tokens"
        }

        async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError> {
            match credentials.bearer_token.as_deref() {
                Some(ns @ ("istio-system" | "shop")) => Ok(Identity::authenticated(Principal {
                    trust_domain: "cluster.local".into(),
                    namespace: ns.into(),
                    service_account: "istioctl".into(),
                    method: AuthMethod::Jwt,
                })),
                _ => Err(AuthnError::Rejected {
                    authenticator: "namespace-tokens",
                    reason: "unknown token".into(),
                }),
            }
        }
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
        headers
    }

    #[tokio::test]
    async fn remote_callers_need_a_token_of_the_system_namespace() {
        let access =
            DebugAccess::local_or_authenticated(Some(Arc::new(NamespaceTokens)), "istio-system");
        let (local, remote): (SocketAddr, SocketAddr) = (
            "127.0.0.1:4000".parse().unwrap(),
            "10.1.2.3:4000".parse().unwrap(),
        );
        assert!(access.check(local, &HeaderMap::new()).await.is_ok());
        assert!(
            access
                .check("[::1]:4000".parse().unwrap(), &HeaderMap::new())
                .await
                .is_ok()
        );
        assert!(access.check(remote, &bearer("istio-system")).await.is_ok());
        let (status, reason) = access.check(remote, &HeaderMap::new()).await.unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{reason}");
        let (status, reason) = access.check(remote, &bearer("shop")).await.unwrap_err();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(reason.contains("ns/shop/sa/istioctl"), "{reason}");
        let (status, reason) = access.check(remote, &bearer("forged")).await.unwrap_err();
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(
            reason.contains("unknown token") && !reason.contains("forged"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn without_an_authenticator_only_this_host_is_answered_and_open_answers_all() {
        let remote: SocketAddr = "10.1.2.3:4000".parse().unwrap();
        let access = DebugAccess::default();
        assert!(access.check(remote, &bearer("istio-system")).await.is_err());
        assert!(
            DebugAccess::open()
                .check(remote, &HeaderMap::new())
                .await
                .is_ok()
        );
    }
}
