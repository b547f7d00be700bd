//! Authorization: may a stream's identity be sent a resource? One pure function,
//! [`authorize`], that the edge asks where it decides what a stream is sent.
//!
//! Istio's rules: a proxy's node must claim the namespace its identity is in (istiod
//! refuses the stream otherwise), and a gateway's TLS Secret (SDS
//! `kubernetes://<credentialName>`) is served only to an identity of the Secret's
//! namespace or to a service account granted access to Secrets there. An unauthenticated
//! stream is never sent one.

use super::identity::{Identity, Principal};
use crate::xds::types::SECRET;

/// The SDS name prefix of a Kubernetes Secret (`kubernetes://<credentialName>`).
const KUBERNETES_SECRET: &str = "kubernetes://";

/// A resource a stream asks for or is about to be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Requested<'a> {
    pub type_url: &'a str,
    pub name: &'a str,
    /// The namespace the resource is read from (a router's Secrets: its own).
    pub namespace: &'a str,
}

/// Who, beyond a namespace's own identities, may read its Secrets (Istio asks the API
/// server with a SubjectAccessReview). Nothing feeds Shoal RBAC yet: [`NoGrants`].
pub trait SecretGrants {
    fn may_read_secrets(&self, principal: &Principal, namespace: &str) -> bool;
}

/// No service account is granted another namespace's Secrets.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoGrants;

impl SecretGrants for NoGrants {
    fn may_read_secrets(&self, _: &Principal, _: &str) -> bool {
        false
    }
}

/// The answer of [`authorize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// An anonymous stream (plaintext ADS, as istiod's 15010) is sent config, never a
    /// Secret; the one place that is decided.
    AllowUnauthenticated,
    Deny {
        reason: String,
    },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        !matches!(self, Decision::Deny { .. })
    }
}

/// Whether `identity`, whose node claims `claimed_namespace`, may be sent `resource`.
pub fn authorize(
    identity: &Identity,
    claimed_namespace: &str,
    resource: &Requested<'_>,
    grants: &dyn SecretGrants,
) -> Decision {
    let is_secret = resource.type_url == SECRET && resource.name.starts_with(KUBERNETES_SECRET);
    let Some(principal) = identity.principal() else {
        if is_secret {
            return Decision::Deny {
                reason: format!(
                    "the stream is unauthenticated (plaintext or no credentials), and a Secret \
                     ({:?} of namespace {:?}) goes only to an authenticated identity allowed \
                     to read it",
                    resource.name, resource.namespace
                ),
            };
        }
        return Decision::AllowUnauthenticated;
    };
    if principal.namespace != claimed_namespace {
        return Decision::Deny {
            reason: format!(
                "the node claims namespace {claimed_namespace:?} but its identity {} is in \
                 namespace {:?}",
                principal.spiffe_id(),
                principal.namespace
            ),
        };
    }
    if is_secret
        && principal.namespace != resource.namespace
        && !grants.may_read_secrets(principal, resource.namespace)
    {
        return Decision::Deny {
            reason: format!(
                "{} in namespace {:?} may not read Secret {:?} of namespace {:?}",
                principal.spiffe_id(),
                principal.namespace,
                resource.name,
                resource.namespace
            ),
        };
    }
    Decision::Allow
}

#[cfg(test)]
mod tests;
