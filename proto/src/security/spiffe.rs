//! SPIFFE IDs of Istio workloads: `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`.
//! What a certificate's URI SAN, a CSR and a token's identity are compared as.

use super::identity::{AuthMethod, Principal};
use std::fmt;

const SCHEME: &str = "spiffe://";

/// A parsed workload SPIFFE ID.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SpiffeId {
    pub trust_domain: String,
    pub namespace: String,
    pub service_account: String,
}

/// Why a URI is not an Istio workload SPIFFE ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{uri:?} is not a workload SPIFFE ID (spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>): {reason}"
)]
pub struct SpiffeError {
    pub uri: String,
    pub reason: &'static str,
}

impl SpiffeId {
    pub fn new(
        trust_domain: impl Into<String>,
        namespace: impl Into<String>,
        service_account: impl Into<String>,
    ) -> Self {
        SpiffeId {
            trust_domain: trust_domain.into(),
            namespace: namespace.into(),
            service_account: service_account.into(),
        }
    }

    /// Parses `spiffe://td/ns/NS/sa/SA`; the scheme is case-insensitive, as URIs' are.
    pub fn parse(uri: &str) -> Result<SpiffeId, SpiffeError> {
        let fail = |reason| SpiffeError {
            uri: uri.to_string(),
            reason,
        };
        let has_scheme = uri
            .get(..SCHEME.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(SCHEME));
        if !has_scheme {
            return Err(fail("it does not start with spiffe://"));
        }
        let rest = &uri[SCHEME.len()..];
        let (trust_domain, path) = rest.split_once('/').ok_or(fail("it has no path"))?;
        if trust_domain.is_empty() {
            return Err(fail("the trust domain is empty"));
        }
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["ns", ns, "sa", sa] if !ns.is_empty() && !sa.is_empty() => {
                Ok(SpiffeId::new(trust_domain, *ns, *sa))
            }
            _ => Err(fail("its path is not /ns/<namespace>/sa/<service-account>")),
        }
    }

    /// The principal this ID names, proven by `method`.
    pub fn into_principal(self, method: AuthMethod) -> Principal {
        Principal {
            trust_domain: self.trust_domain,
            namespace: self.namespace,
            service_account: self.service_account,
            method,
        }
    }
}

impl fmt::Display for SpiffeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{SCHEME}{}/ns/{}/sa/{}",
            self.trust_domain, self.namespace, self.service_account
        )
    }
}

impl From<&Principal> for SpiffeId {
    fn from(p: &Principal) -> Self {
        SpiffeId::new(&p.trust_domain, &p.namespace, &p.service_account)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_id_round_trips() {
        let id = SpiffeId::parse("spiffe://cluster.local/ns/shop/sa/web").unwrap();
        assert_eq!(id, SpiffeId::new("cluster.local", "shop", "web"));
        assert_eq!(id.to_string(), "spiffe://cluster.local/ns/shop/sa/web");
        let p = id.clone().into_principal(AuthMethod::Jwt);
        assert_eq!(p.spiffe_id(), id.to_string());
        assert_eq!(SpiffeId::from(&p), id);
        assert!(SpiffeId::parse("SPIFFE://td/ns/a/sa/b").is_ok());
    }

    #[test]
    fn other_uris_are_refused_with_the_reason() {
        for (uri, reason) in [
            ("https://cluster.local/ns/a/sa/b", "spiffe://"),
            ("spiffe://cluster.local", "no path"),
            ("spiffe:///ns/a/sa/b", "trust domain"),
            ("spiffe://td/ns/a/sa/", "path"),
            ("spiffe://td/ns/a/sa/b/c", "path"),
            ("spiffe://td/sa/b/ns/a", "path"),
        ] {
            let err = SpiffeId::parse(uri).unwrap_err().to_string();
            assert!(err.contains(reason), "{uri}: {err}");
            assert!(err.contains(uri), "{err}");
        }
    }
}
