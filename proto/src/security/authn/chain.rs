//! [`Chain`]: several authenticators tried in order, as istiod tries its own (client
//! certificate, then JWT): the first that succeeds names the identity; if none does, the
//! error lists each one's reason, so a refused proxy's operator sees why for every way.

use super::{Authenticator, AuthnError, Credentials};
use crate::security::identity::Identity;
use async_trait::async_trait;
use std::sync::Arc;

const NAME: &str = "chain";

/// Authenticators tried in order; the first success wins.
#[derive(Clone, Default)]
pub struct Chain {
    authenticators: Vec<Arc<dyn Authenticator>>,
}

impl Chain {
    pub fn new(authenticators: Vec<Arc<dyn Authenticator>>) -> Self {
        Chain { authenticators }
    }

    /// Adds one more, tried after those already in.
    pub fn then(mut self, authenticator: Arc<dyn Authenticator>) -> Self {
        self.authenticators.push(authenticator);
        self
    }

    /// The names, in order (for the startup log).
    pub fn names(&self) -> Vec<&'static str> {
        self.authenticators.iter().map(|a| a.name()).collect()
    }
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Chain").field(&self.names()).finish()
    }
}

#[async_trait]
impl Authenticator for Chain {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError> {
        let mut reasons = Vec::with_capacity(self.authenticators.len());
        let mut all_missing = true;
        for authenticator in &self.authenticators {
            match authenticator.authenticate(credentials).await {
                Ok(identity) => return Ok(identity),
                Err(AuthnError::Missing(what)) => {
                    reasons.push(format!("{}: {what}", authenticator.name()));
                }
                Err(rejected) => {
                    all_missing = false;
                    reasons.push(rejected.to_string());
                }
            }
        }
        if all_missing {
            return Err(AuthnError::Missing(
                "neither a client certificate nor a bearer token",
            ));
        }
        Err(AuthnError::Rejected {
            authenticator: NAME,
            reason: format!(
                "no authenticator accepted the stream: {}",
                reasons.join("; ")
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::identity::{AuthMethod, Principal};
    use futures::FutureExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Answers with a fixed result and counts its calls.
    struct Fixed(&'static str, Result<Identity, AuthnError>, AtomicUsize);

    #[async_trait]
    impl Authenticator for Fixed {
        fn name(&self) -> &'static str {
            self.0
        }
        async fn authenticate(&self, _: &Credentials) -> Result<Identity, AuthnError> {
            self.2.fetch_add(1, Ordering::Relaxed);
            self.1.clone()
        }
    }

    fn ok(sa: &str, method: AuthMethod) -> Result<Identity, AuthnError> {
        Ok(Identity::authenticated(Principal {
            trust_domain: "cluster.local".into(),
            namespace: "shop".into(),
            service_account: sa.into(),
            method,
        }))
    }

    fn rejected(name: &'static str, reason: &str) -> Result<Identity, AuthnError> {
        Err(AuthnError::Rejected {
            authenticator: name,
            reason: reason.into(),
        })
    }

    fn fixed(name: &'static str, r: Result<Identity, AuthnError>) -> Arc<Fixed> {
        Arc::new(Fixed(name, r, AtomicUsize::new(0)))
    }

    fn run(chain: &Chain) -> Result<Identity, AuthnError> {
        chain
            .authenticate(&Credentials::default())
            .now_or_never()
            .unwrap()
    }

    #[test]
    fn the_first_success_wins_and_later_ones_are_not_asked() {
        let cert = fixed(
            "client-certificate",
            ok("cert", AuthMethod::ClientCertificate),
        );
        let jwt = fixed("jwt", ok("jwt", AuthMethod::Jwt));
        let chain = Chain::new(vec![cert.clone(), jwt.clone()]);
        assert_eq!(run(&chain), ok("cert", AuthMethod::ClientCertificate));
        assert_eq!(jwt.2.load(Ordering::Relaxed), 0);

        let cert = fixed(
            "client-certificate",
            Err(AuthnError::Missing("no client certificate")),
        );
        let chain = Chain::default().then(cert).then(jwt);
        assert_eq!(run(&chain), ok("jwt", AuthMethod::Jwt));
        assert_eq!(
            format!("{chain:?}"),
            r#"Chain(["client-certificate", "jwt"])"#
        );
    }

    #[test]
    fn when_all_fail_the_error_lists_each_reason() {
        let chain = Chain::new(vec![
            fixed(
                "client-certificate",
                Err(AuthnError::Missing("no client certificate")),
            ),
            fixed("jwt", rejected("jwt", "the token expired at 5")),
            fixed(
                "kube-token-review",
                rejected("kube-token-review", "not authenticated"),
            ),
        ]);
        let e = run(&chain).unwrap_err().to_string();
        for part in [
            "client-certificate: no client certificate",
            "jwt: the token expired at 5",
            "kube-token-review: not authenticated",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }
    }

    #[test]
    fn nothing_presented_to_any_is_missing_credentials() {
        let chain = Chain::new(vec![
            fixed(
                "client-certificate",
                Err(AuthnError::Missing("no client certificate")),
            ),
            fixed("jwt", Err(AuthnError::Missing("no bearer token"))),
        ]);
        assert!(matches!(run(&chain), Err(AuthnError::Missing(_))));
        assert!(matches!(
            run(&Chain::default()),
            Err(AuthnError::Missing(_))
        ));
    }
}
