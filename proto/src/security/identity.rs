//! [`Identity`]: who a stream proved to be when it was accepted. It travels with the
//! stream's proxy model into generation, where [`super::authz`] reads it.

use std::fmt;
use std::sync::Arc;

/// How a stream's identity was established.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// Nothing was proven (plaintext ADS, no credentials).
    None,
    /// A bearer token verified by a token review or against the issuer's keys.
    Jwt,
    /// A client certificate verified against the mesh root.
    ClientCertificate,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::None => "none",
            AuthMethod::Jwt => "jwt",
            AuthMethod::ClientCertificate => "client-certificate",
        }
    }
}

/// A workload identity, as in its SPIFFE ID `spiffe://<trust_domain>/ns/<namespace>/sa/<service_account>`,
/// with how it was proven.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    pub trust_domain: String,
    pub namespace: String,
    pub service_account: String,
    /// [`AuthMethod::Jwt`] or [`AuthMethod::ClientCertificate`].
    pub method: AuthMethod,
}

impl Principal {
    /// The SPIFFE ID.
    pub fn spiffe_id(&self) -> String {
        super::spiffe::SpiffeId::from(self).to_string()
    }
}

/// Who a stream is: anonymous, or a proven principal. Behind an `Arc` so that every proxy
/// model (held by a stream and the connection registry) pays one pointer for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Identity {
    /// Nothing proven: every stream today (plaintext ADS on 15010).
    #[default]
    Anonymous,
    Authenticated(Arc<Principal>),
}

impl Identity {
    pub fn authenticated(principal: Principal) -> Identity {
        Identity::Authenticated(Arc::new(principal))
    }

    /// The proven principal; `None` when anonymous.
    pub fn principal(&self) -> Option<&Principal> {
        match self {
            Identity::Anonymous => None,
            Identity::Authenticated(p) => Some(p),
        }
    }

    pub fn method(&self) -> AuthMethod {
        self.principal().map_or(AuthMethod::None, |p| p.method)
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.principal() {
            None => f.write_str("anonymous"),
            Some(p) => write!(f, "{} ({})", p.spiffe_id(), p.method.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_names_its_spiffe_id_and_method_and_costs_a_pointer() {
        let id = Identity::authenticated(Principal {
            trust_domain: "cluster.local".into(),
            namespace: "shop".into(),
            service_account: "web".into(),
            method: AuthMethod::Jwt,
        });
        assert_eq!(
            id.to_string(),
            "spiffe://cluster.local/ns/shop/sa/web (jwt)"
        );
        assert_eq!(Identity::Anonymous.to_string(), "anonymous");
        assert_eq!(Identity::Anonymous.method(), AuthMethod::None);
        assert_eq!(
            std::mem::size_of::<Identity>(),
            std::mem::size_of::<usize>()
        );
    }
}
