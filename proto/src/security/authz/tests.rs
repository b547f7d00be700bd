use super::*;
use crate::security::identity::AuthMethod;
use crate::xds::types::CLUSTER;

fn router_of(namespace: &str) -> Identity {
    Identity::authenticated(Principal {
        trust_domain: "cluster.local".into(),
        namespace: namespace.into(),
        service_account: "ingressgateway".into(),
        method: AuthMethod::Jwt,
    })
}

fn secret(namespace: &str) -> Requested<'_> {
    Requested {
        type_url: SECRET,
        name: "kubernetes://shop-cert",
        namespace,
    }
}

/// Grants `ingressgateway` of `gateways` the Secrets of `shop`.
struct Granted;

impl SecretGrants for Granted {
    fn may_read_secrets(&self, p: &Principal, namespace: &str) -> bool {
        p.namespace == "gateways" && p.service_account == "ingressgateway" && namespace == "shop"
    }
}

#[test]
fn a_secret_of_the_identitys_own_namespace_is_allowed() {
    let id = router_of("shop");
    assert_eq!(
        authorize(&id, "shop", &secret("shop"), &NoGrants),
        Decision::Allow
    );
}

#[test]
fn a_secret_of_another_namespace_is_denied_naming_both() {
    let id = router_of("gateways");
    let Decision::Deny { reason } = authorize(&id, "gateways", &secret("shop"), &NoGrants) else {
        panic!("allowed")
    };
    assert!(
        reason.contains("\"gateways\"") && reason.contains("\"shop\""),
        "{reason}"
    );
    assert!(reason.contains("kubernetes://shop-cert"), "{reason}");
}

#[test]
fn a_service_account_granted_the_secrets_is_allowed() {
    let id = router_of("gateways");
    assert_eq!(
        authorize(&id, "gateways", &secret("shop"), &Granted),
        Decision::Allow
    );
    let Decision::Deny { .. } = authorize(&id, "gateways", &secret("bank"), &Granted) else {
        panic!("granted beyond its grant")
    };
}

#[test]
fn a_node_claiming_another_namespace_than_its_identity_is_denied() {
    let id = router_of("gateways");
    for resource in [
        secret("shop"),
        Requested {
            type_url: CLUSTER,
            name: "outbound|80||web.shop.svc.cluster.local",
            namespace: "shop",
        },
    ] {
        let Decision::Deny { reason } = authorize(&id, "shop", &resource, &NoGrants) else {
            panic!("allowed {resource:?}")
        };
        assert!(
            reason.contains("claims namespace \"shop\"") && reason.contains("\"gateways\""),
            "{reason}"
        );
    }
}

#[test]
fn other_resources_of_an_honest_node_are_allowed() {
    let id = router_of("shop");
    let cluster = Requested {
        type_url: CLUSTER,
        name: "outbound|80||web.bank.svc.cluster.local",
        namespace: "bank",
    };
    assert_eq!(authorize(&id, "shop", &cluster, &NoGrants), Decision::Allow);
}

#[test]
fn an_anonymous_stream_gets_config_but_never_a_secret() {
    for namespace in ["shop", "bank"] {
        let decision = authorize(&Identity::Anonymous, "shop", &secret(namespace), &NoGrants);
        let Decision::Deny { reason } = decision else {
            panic!("an anonymous stream may read Secrets of {namespace}: {decision:?}")
        };
        assert!(
            reason.contains("unauthenticated") && reason.contains("kubernetes://shop-cert"),
            "{reason}"
        );
    }
    let cluster = Requested {
        type_url: CLUSTER,
        name: "outbound|80||web.shop.svc.cluster.local",
        namespace: "shop",
    };
    let decision = authorize(&Identity::Anonymous, "shop", &cluster, &NoGrants);
    assert_eq!(decision, Decision::AllowUnauthenticated);
    assert!(decision.is_allowed());
}
