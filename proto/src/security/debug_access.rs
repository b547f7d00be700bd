//! Who may read the `/debug/*` pages (config dumps, syncz, the ring): as istiod, a
//! caller on the same host, or an authenticated identity of the system namespace. Health
//! and metrics stay open; they are decided elsewhere.

use super::authz::Decision;
use super::identity::Identity;

/// Where a debug request comes from and who it proved to be.
#[derive(Clone, Copy, Debug)]
pub struct DebugCaller<'a> {
    /// The peer is on this host (a loopback address).
    pub local: bool,
    pub identity: &'a Identity,
}

/// Whether `caller` may read a debug page of a control plane running in
/// `system_namespace`.
pub fn authorize_debug(caller: DebugCaller<'_>, system_namespace: &str) -> Decision {
    if caller.local {
        return Decision::Allow;
    }
    match caller.identity.principal() {
        None => Decision::Deny {
            reason: format!(
                "the debug endpoints answer a caller on this host, or one that presents a \
                 token of an identity in namespace {system_namespace:?}; this caller presented \
                 none"
            ),
        },
        Some(p) if p.namespace != system_namespace => Decision::Deny {
            reason: format!(
                "{} is not in the control plane's namespace {system_namespace:?}",
                p.spiffe_id()
            ),
        },
        Some(_) => Decision::Allow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::identity::{AuthMethod, Principal};

    fn of(namespace: &str) -> Identity {
        Identity::authenticated(Principal {
            trust_domain: "cluster.local".into(),
            namespace: namespace.into(),
            service_account: "istioctl".into(),
            method: AuthMethod::Jwt,
        })
    }

    #[test]
    fn localhost_or_the_system_namespace_may_read_debug_pages() {
        let anonymous = Identity::Anonymous;
        let local = DebugCaller {
            local: true,
            identity: &anonymous,
        };
        assert_eq!(authorize_debug(local, "istio-system"), Decision::Allow);
        let admin = of("istio-system");
        let remote_admin = DebugCaller {
            local: false,
            identity: &admin,
        };
        assert_eq!(
            authorize_debug(remote_admin, "istio-system"),
            Decision::Allow
        );
    }

    #[test]
    fn a_remote_caller_without_an_identity_of_the_system_namespace_is_refused() {
        let anonymous = Identity::Anonymous;
        let shop = of("shop");
        for (identity, says) in [
            (&anonymous, "presented none"),
            (&shop, "ns/shop/sa/istioctl"),
        ] {
            let caller = DebugCaller {
                local: false,
                identity,
            };
            let Decision::Deny { reason } = authorize_debug(caller, "istio-system") else {
                panic!("{identity} allowed")
            };
            assert!(
                reason.contains(says) && reason.contains("istio-system"),
                "{reason}"
            );
        }
    }
}
