//! Node versus identity: what a proxy's node claims (its namespace, and its service
//! account where the node gives one) must be what its stream proved, or the stream is
//! refused, as istiod refuses it. A pure check; the edge applies it once the first request
//! names the node. (Part of authorization: re-exported under [`super::authz`]'s siblings
//! as `security::check_node_claim`.)

use super::identity::Identity;

/// What a node says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeClaim<'a> {
    /// The namespace of its node ID / metadata `NAMESPACE`.
    pub namespace: &'a str,
    /// Metadata `SERVICE_ACCOUNT`; `None` (or empty): not claimed.
    pub service_account: Option<&'a str>,
}

/// The node's claim and the identity it contradicts; the message names both.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the node claims {claim} but the stream's identity is {spiffe_id}")]
pub struct ClaimMismatch {
    /// `namespace "x"` or `namespace "x", service account "y"`.
    pub claim: String,
    pub spiffe_id: String,
}

/// Whether `identity` may be the node that makes `claim`. An anonymous identity (plaintext
/// ADS, which proves nothing) is not checked: there is nothing to compare.
pub fn check_node_claim(identity: &Identity, claim: &NodeClaim<'_>) -> Result<(), ClaimMismatch> {
    let Some(principal) = identity.principal() else {
        return Ok(());
    };
    let sa = claim.service_account.filter(|sa| !sa.is_empty());
    let namespace_ok = principal.namespace == claim.namespace;
    let sa_ok = sa.is_none_or(|sa| principal.service_account == sa);
    if namespace_ok && sa_ok {
        return Ok(());
    }
    let claim = match sa {
        Some(sa) => format!("namespace {:?}, service account {sa:?}", claim.namespace),
        None => format!("namespace {:?}", claim.namespace),
    };
    Err(ClaimMismatch {
        claim,
        spiffe_id: principal.spiffe_id(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::{AuthMethod, Principal};

    fn web_in_shop() -> Identity {
        Identity::authenticated(Principal {
            trust_domain: "cluster.local".into(),
            namespace: "shop".into(),
            service_account: "web".into(),
            method: AuthMethod::ClientCertificate,
        })
    }

    fn claim<'a>(namespace: &'a str, sa: Option<&'a str>) -> NodeClaim<'a> {
        NodeClaim {
            namespace,
            service_account: sa,
        }
    }

    #[test]
    fn a_node_of_its_own_namespace_and_service_account_passes() {
        let id = web_in_shop();
        assert_eq!(check_node_claim(&id, &claim("shop", None)), Ok(()));
        assert_eq!(check_node_claim(&id, &claim("shop", Some("web"))), Ok(()));
        assert_eq!(check_node_claim(&id, &claim("shop", Some(""))), Ok(()));
    }

    #[test]
    fn another_namespace_is_refused_naming_the_claim_and_the_spiffe_id() {
        let err = check_node_claim(&web_in_shop(), &claim("bank", None)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(r#"namespace "bank""#), "{msg}");
        assert!(
            msg.contains("spiffe://cluster.local/ns/shop/sa/web"),
            "{msg}"
        );
    }

    #[test]
    fn another_service_account_is_refused() {
        let err = check_node_claim(&web_in_shop(), &claim("shop", Some("admin"))).unwrap_err();
        assert!(
            err.to_string().contains(r#"service account "admin""#),
            "{err}"
        );
    }

    #[test]
    fn an_anonymous_stream_has_nothing_to_compare() {
        assert_eq!(
            check_node_claim(&Identity::Anonymous, &claim("anything", Some("x"))),
            Ok(())
        );
    }
}
