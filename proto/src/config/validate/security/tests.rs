use super::*;
use crate::config::Spec;
use crate::config::parse::parse_documents;

/// Validates a spec of `kind` (YAML) alone: its warnings, or why it was rejected.
fn check(kind: &str, spec: &str) -> Result<Vec<String>, String> {
    let mut warnings = Vec::new();
    let checked = match kind {
        "PeerAuthentication" => {
            peer_authentication(&serde_norway::from_str(spec).unwrap(), &mut warnings)
        }
        "AuthorizationPolicy" => {
            authorization_policy(&serde_norway::from_str(spec).unwrap(), &mut warnings)
        }
        "RequestAuthentication" => {
            request_authentication(&serde_norway::from_str(spec).unwrap(), &mut warnings)
        }
        _ => unreachable!("{kind}"),
    };
    checked.map(|()| warnings).map_err(|e| e.0)
}

fn accepted(kind: &str, spec: &str) -> Vec<String> {
    check(kind, spec).unwrap_or_else(|e| panic!("rejected: {e}\n{spec}"))
}

/// Rejected, and the reason starts with the field path `field`.
fn rejected(kind: &str, spec: &str, field: &str, reason: &str) {
    match check(kind, spec) {
        Err(e) => {
            assert!(
                e.starts_with(&format!("{field}:")),
                "{e:?} does not name {field}"
            );
            assert!(e.contains(reason), "{e:?} does not say {reason:?}");
        }
        Ok(w) => panic!("accepted (warnings {w:?}), expected {field}: {reason}\n{spec}"),
    }
}

const PA: &str = "PeerAuthentication";
const AP: &str = "AuthorizationPolicy";
const RA: &str = "RequestAuthentication";

#[test]
fn peer_authentication_modes_and_ports() {
    accepted(PA, "mtls: {mode: STRICT}\n");
    accepted(PA, "{}\n");
    accepted(
        PA,
        "selector: {matchLabels: {app: a}}\nmtls: {mode: UNSET}\nportLevelMtls:\n  8080: {mode: DISABLE}\n  '9090': {mode: PERMISSIVE}\n",
    );
    rejected(
        PA,
        "mtls: {mode: strict}\n",
        "spec.mtls.mode",
        "unknown mode \"strict\"",
    );
    rejected(
        PA,
        "portLevelMtls: {8080: {mode: STRICT}}\n",
        "spec.portLevelMtls",
        "needs a selector",
    );
    rejected(
        PA,
        "selector: {matchLabels: {}}\nportLevelMtls: {8080: {mode: STRICT}}\n",
        "spec.portLevelMtls",
        "needs a selector",
    );
    for port in ["0", "65536", "http", "-1"] {
        rejected(
            PA,
            &format!(
                "selector: {{matchLabels: {{app: a}}}}\nportLevelMtls: {{'{port}': {{mode: STRICT}}}}\n"
            ),
            &format!("spec.portLevelMtls.{port}"),
            "not a port in 1-65535",
        );
    }
    rejected(
        PA,
        "selector: {matchLabels: {app: a}}\nportLevelMtls: {8080: {mode: ON}}\n",
        "spec.portLevelMtls.8080.mode",
        "unknown mode",
    );
}

#[test]
fn selectors_by_istio_rules() {
    rejected(
        PA,
        "selector: {matchLabels: {app: 'web-*'}}\n",
        "spec.selector.matchLabels",
        "wildcard",
    );
    rejected(
        AP,
        "selector: {matchLabels: {'': x}}\n",
        "spec.selector.matchLabels",
        "empty key",
    );
    let warnings = accepted(RA, "selector: {}\n");
    assert!(
        warnings[0].starts_with("spec.selector: workload selector specified without labels"),
        "{warnings:?}"
    );
}

#[test]
fn selector_and_target_refs_are_exclusive_and_checked() {
    let service = "{group: '', kind: Service, name: web}";
    accepted(AP, &format!("targetRef: {service}\n"));
    accepted(
        RA,
        "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}, {kind: ServiceEntry, group: networking.istio.io, name: se}]\n",
    );
    for spec in [
        format!("selector: {{matchLabels: {{app: a}}}}\ntargetRef: {service}\n"),
        format!("targetRef: {service}\ntargetRefs: [{service}]\n"),
        format!("selector: {{matchLabels: {{app: a}}}}\ntargetRefs: [{service}]\n"),
    ] {
        rejected(
            AP,
            &spec,
            "spec",
            "only one of selector, targetRef or targetRefs",
        );
        rejected(
            RA,
            &spec,
            "spec",
            "only one of selector, targetRef or targetRefs",
        );
    }
    rejected(
        AP,
        "targetRef: {kind: Service, namespace: other, name: web}\n",
        "spec.targetRef.namespace",
        "cross namespace",
    );
    rejected(
        AP,
        "targetRef: {kind: Service}\n",
        "spec.targetRef.name",
        "must be set",
    );
    rejected(
        RA,
        &format!("targetRefs: [{service}, {{group: apps, kind: Deployment, name: web}}]\n"),
        "spec.targetRefs[1]",
        "\"Deployment\" of group \"apps\"",
    );
    let many: Vec<String> = (0..17)
        .map(|i| format!("{{kind: Service, name: s{i}}}"))
        .collect();
    rejected(
        AP,
        &format!("targetRefs: [{}]\n", many.join(", ")),
        "spec.targetRefs",
        "at most 16",
    );
}

#[test]
fn actions_and_providers() {
    accepted(AP, "action: AUDIT\nrules: [{}]\n");
    accepted(AP, "action: DENY\nrules: [{}]\n");
    accepted(
        AP,
        "action: CUSTOM\nprovider: {name: ext-authz}\nrules: [{}]\n",
    );
    // An ALLOW policy without rules is Istio's allow-nothing: valid.
    accepted(AP, "{}\n");
    rejected(
        AP,
        "action: REJECT\n",
        "spec.action",
        "unknown action \"REJECT\"",
    );
    rejected(
        AP,
        "action: DENY\n",
        "spec.rules",
        "DENY action without rules",
    );
    rejected(
        AP,
        "action: CUSTOM\nprovider: {name: ext-authz}\n",
        "spec.rules",
        "CUSTOM action without rules",
    );
    rejected(
        AP,
        "action: CUSTOM\nrules: [{}]\n",
        "spec.provider.name",
        "must be set",
    );
    rejected(
        AP,
        "action: CUSTOM\nprovider: {}\nrules: [{}]\n",
        "spec.provider.name",
        "must not be empty",
    );
    rejected(
        AP,
        "action: DENY\nprovider: {name: ext-authz}\nrules: [{}]\n",
        "spec.provider",
        "only for the CUSTOM action, found action DENY",
    );
    rejected(
        AP,
        "provider: {name: ext-authz}\n",
        "spec.provider",
        "found action ALLOW",
    );
}

#[test]
fn custom_policies_cannot_match_identities() {
    let custom = |rule: &str| format!("action: CUSTOM\nprovider: {{name: x}}\nrules:\n- {rule}\n");
    accepted(
        AP,
        &custom("from: [{source: {ipBlocks: [10.0.0.0/8], notRemoteIpBlocks: [1.2.3.4]}}]"),
    );
    accepted(
        AP,
        &custom("when: [{key: 'request.headers[x-user]', values: [a]}]"),
    );
    for field in [
        "principals",
        "notNamespaces",
        "requestPrincipals",
        "serviceAccounts",
        "trustDomains",
    ] {
        rejected(
            AP,
            &custom(&format!(
                "from: [{{source: {{ipBlocks: [10.0.0.1]}}}}, {{source: {{{field}: [a]}}}}]"
            )),
            &format!("spec.rules[0].from[1].source.{field}"),
            "not supported with the CUSTOM action",
        );
    }
    for key in [
        "source.principal",
        "source.namespace",
        "request.auth.claims[iss]",
    ] {
        rejected(
            AP,
            &custom(&format!("when: [{{key: '{key}', values: [a]}}]")),
            "spec.rules[0].when[0].key",
            "not supported with the CUSTOM action",
        );
    }
}

#[test]
fn empty_rule_entries_are_errors() {
    let rule = |r: &str| format!("action: DENY\nrules:\n- {{}}\n- {r}\n");
    rejected(
        AP,
        &rule("from: [{}]"),
        "spec.rules[1].from[0].source",
        "must be set",
    );
    rejected(
        AP,
        &rule("from: [{source: {}}]"),
        "spec.rules[1].from[0].source",
        "must not be empty",
    );
    rejected(
        AP,
        &rule("to: [{}]"),
        "spec.rules[1].to[0].operation",
        "must be set",
    );
    rejected(
        AP,
        &rule("to: [{operation: {methods: [GET]}}, {operation: {}}]"),
        "spec.rules[1].to[1].operation",
        "must not be empty",
    );
    rejected(
        AP,
        &rule("when: [{values: [a]}]"),
        "spec.rules[1].when[0].key",
        "must not be empty",
    );
    rejected(
        AP,
        &rule("when: [{key: source.ip}]"),
        "spec.rules[1].when[0]",
        "at least one of values or notValues",
    );
    rejected(
        AP,
        &rule("from: [{source: {principals: [a, '']}}]"),
        "spec.rules[1].from[0].source.principals[1]",
        "empty value",
    );
    rejected(
        AP,
        &rule("to: [{operation: {notMethods: ['']}}]"),
        "spec.rules[1].to[0].operation.notMethods[0]",
        "empty value",
    );
}

#[test]
fn sources_by_istio_rules() {
    let from = |source: &str| {
        format!("rules:\n- from:\n  - source: {{namespaces: [a]}}\n  - source: {source}\n")
    };
    accepted(
        AP,
        &from("{ipBlocks: [10.0.0.1, 10.0.0.0/8, '2001:db8::/32'], notIpBlocks: ['::1']}"),
    );
    rejected(
        AP,
        &from("{ipBlocks: [10.0.0.1, 10.0.0.0/8, 10.0.0.0/33]}"),
        "spec.rules[0].from[1].source.ipBlocks[2]",
        "bad CIDR range \"10.0.0.0/33\"",
    );
    rejected(
        AP,
        &from("{remoteIpBlocks: [10.0.0.256]}"),
        "spec.rules[0].from[1].source.remoteIpBlocks[0]",
        "bad IP address",
    );
    rejected(
        AP,
        &from("{notRemoteIpBlocks: [x/8]}"),
        "spec.rules[0].from[1].source.notRemoteIpBlocks[0]",
        "bad CIDR",
    );
    rejected(
        AP,
        &from("{serviceAccounts: [shop/web], namespaces: [shop]}"),
        "spec.rules[0].from[1].source",
        "cannot set serviceAccounts with namespaces or principals",
    );
    accepted(
        AP,
        &from("{serviceAccounts: [web, shop/web], notServiceAccounts: [shop/db]}"),
    );
    for (account, reason) in [
        ("shop/*", "wildcard"),
        (
            "a/b/c",
            "not 'serviceAccount' or 'namespace/serviceAccount'",
        ),
        ("/web", "not 'serviceAccount'"),
    ] {
        rejected(
            AP,
            &from(&format!("{{serviceAccounts: ['{account}']}}")),
            "spec.rules[0].from[1].source.serviceAccounts[0]",
            reason,
        );
    }
    let seventeen: Vec<String> = (0..17).map(|i| format!("sa{i}")).collect();
    rejected(
        AP,
        &from(&format!(
            "{{notServiceAccounts: [{}]}}",
            seventeen.join(", ")
        )),
        "spec.rules[0].from[1].source.notServiceAccounts",
        "at most 16",
    );
    accepted(
        AP,
        &from("{trustDomains: ['*.example.com', cluster.local, '*']}"),
    );
    rejected(
        AP,
        &from("{notTrustDomains: ['a*b']}"),
        "spec.rules[0].from[1].source.notTrustDomains[0]",
        "wildcard",
    );
    rejected(
        AP,
        &from("{trustDomains: [td/ns]}"),
        "spec.rules[0].from[1].source.trustDomains[0]",
        "must not contain '/'",
    );
}

#[test]
fn operations_by_istio_rules() {
    let to = |operation: &str| format!("rules:\n- to:\n  - operation: {operation}\n");
    accepted(
        AP,
        &to("{ports: ['80', '8080'], methods: [GET], paths: ['/api/{*}/items/{**}', '/info*']}"),
    );
    rejected(
        AP,
        &to("{ports: ['80', http]}"),
        "spec.rules[0].to[0].operation.ports[1]",
        "bad port \"http\"",
    );
    rejected(
        AP,
        &to("{notPorts: ['65536']}"),
        "spec.rules[0].to[0].operation.notPorts[0]",
        "bad port",
    );
    rejected(
        AP,
        &to("{paths: ['/ok', '/a/{**}/b/{*}']}"),
        "spec.rules[0].to[0].operation.paths[1]",
        "{**} is not the last operator",
    );
    rejected(
        AP,
        &to("{notPaths: ['/a/{id}']}"),
        "spec.rules[0].to[0].operation.notPaths[0]",
        "beyond a supported path template",
    );
    rejected(
        AP,
        &to("{paths: ['/a/{*}/b*c']}"),
        "spec.rules[0].to[0].operation.paths[0]",
        "not a valid path literal",
    );
}

#[test]
fn when_keys_from_istios_list() {
    let when = |key: &str, values: &str| {
        format!(
            "rules:\n- when:\n  - {{key: 'source.namespace', values: [a]}}\n  - {{key: '{key}', {values}}}\n"
        )
    };
    for key in [
        "request.headers[User-Agent]",
        "source.principal",
        "request.auth.principal",
        "request.auth.audiences",
        "request.auth.presenter",
        "request.auth.claims[groups]",
        "connection.sni",
        "experimental.envoy.filters.a.b[c]",
    ] {
        accepted(AP, &when(key, "values: [x]"));
    }
    accepted(AP, &when("source.ip", "notValues: [10.0.0.0/8]"));
    accepted(AP, &when("destination.port", "values: ['443']"));
    accepted(AP, &when("source.serviceAccount", "values: [shop/web]"));
    for (key, values, field, reason) in [
        ("source.name", "values: [x]", "key", "unknown attribute"),
        (
            "destination.namespace",
            "values: [x]",
            "key",
            "replaced by the policy's own namespace",
        ),
        (
            "destination.labels[app]",
            "values: [x]",
            "key",
            "replaced by the selector",
        ),
        ("destination.user", "values: [x]", "key", "deprecated"),
        (
            "request.headers[]",
            "values: [x]",
            "key",
            "should have format a[b]",
        ),
        (
            "request.auth.claims",
            "notValues: [x]",
            "key",
            "should have format a[b]",
        ),
        (
            "source.ip",
            "values: [10.0.0.1/40]",
            "values[0]",
            "bad CIDR",
        ),
        (
            "destination.ip",
            "notValues: [a.b]",
            "notValues[0]",
            "bad IP",
        ),
        (
            "destination.port",
            "values: [https]",
            "values[0]",
            "bad port",
        ),
        (
            "source.serviceAccount",
            "values: ['*']",
            "values[0]",
            "wildcard",
        ),
        (
            "source.trustDomain",
            "values: ['a*b']",
            "values[0]",
            "wildcard",
        ),
        ("connection.sni", "values: ['']", "values[0]", "empty value"),
    ] {
        rejected(
            AP,
            &when(key, values),
            &format!("spec.rules[0].when[1].{field}"),
            reason,
        );
    }
}

#[test]
fn deny_rules_of_http_attributes_alone_warn_of_tcp_traffic() {
    let warned = |spec: &str| {
        accepted(AP, spec)
            .iter()
            .any(|w| w.contains("deny all traffic to TCP ports"))
    };
    assert!(warned(
        "action: DENY\nrules:\n- to: [{operation: {paths: [/admin]}}]\n"
    ));
    assert!(warned(
        "action: DENY\nrules:\n- from: [{source: {requestPrincipals: ['*']}}]\n"
    ));
    assert!(!warned(
        "action: DENY\nrules:\n- to: [{operation: {paths: [/admin], ports: ['8080']}}]\n"
    ));
    assert!(!warned(
        "action: DENY\nrules:\n- from: [{source: {namespaces: [a]}}]\n"
    ));
    assert!(!warned("rules:\n- to: [{operation: {paths: [/admin]}}]\n"));
}

#[test]
fn jwt_rules_by_istio_rules() {
    accepted(
        RA,
        "jwtRules:\n- issuer: https://example.com\n  jwksUri: https://example.com/.well-known/jwks.json\n  audiences: [a]\n  fromHeaders: [{name: x-jwt, prefix: 'Bearer '}]\n  fromParams: [token]\n  fromCookies: [auth]\n  outputClaimToHeaders: [{header: x-jwt-claim-foo, claim: foo}]\n  timeout: 5s\n  spaceDelimitedClaims: [roles]\n",
    );
    // Istio's rule: an issuer or a jwksUri.
    accepted(RA, "jwtRules: [{jwksUri: 'http://[::1]:8080/keys'}]\n");
    let rule = |r: &str| format!("jwtRules:\n- issuer: first\n- {r}\n");
    for (r, field, reason) in [
        (
            "audiences: [a]",
            "spec.jwtRules[1].issuer",
            "issuer or jwksUri must be set",
        ),
        (
            "{issuer: x, audiences: ['']}",
            "spec.jwtRules[1].audiences[0]",
            "empty value",
        ),
        (
            "{issuer: x, jwksUri: 'https://a/k', jwks: '{\"keys\": []}'}",
            "spec.jwtRules[1]",
            "only one of jwks or jwksUri",
        ),
        (
            "{issuer: x, jwksUri: 'ftp://a/k'}",
            "spec.jwtRules[1].jwksUri",
            "scheme \"ftp\"",
        ),
        (
            "{issuer: x, jwksUri: 'example.com/k'}",
            "spec.jwtRules[1].jwksUri",
            "must have scheme",
        ),
        (
            "{issuer: x, jwksUri: 'https:///k'}",
            "spec.jwtRules[1].jwksUri",
            "has no host",
        ),
        (
            "{issuer: x, jwksUri: 'https://a:http/k'}",
            "spec.jwtRules[1].jwksUri",
            "port",
        ),
        (
            "{issuer: x, jwks: 'not json'}",
            "spec.jwtRules[1].jwks",
            "jwks parse error",
        ),
        (
            "{issuer: x, jwks: '{\"keys\": [{\"kty\": \"RSA\", \"e\": \"AQAB\"}]}'}",
            "spec.jwtRules[1].jwks",
            "no \"n\" member",
        ),
        (
            "{issuer: x, fromHeaders: [{prefix: a}]}",
            "spec.jwtRules[1].fromHeaders[0].name",
            "must not be empty",
        ),
        (
            "{issuer: x, fromParams: ['']}",
            "spec.jwtRules[1].fromParams[0]",
            "empty value",
        ),
        (
            "{issuer: x, fromCookies: [a, '']}",
            "spec.jwtRules[1].fromCookies[1]",
            "empty value",
        ),
        (
            "{issuer: x, outputClaimToHeaders: [{header: ':authority', claim: a}]}",
            "spec.jwtRules[1].outputClaimToHeaders[0].header",
            "not a valid header name",
        ),
        (
            "{issuer: x, outputClaimToHeaders: [{claim: a}]}",
            "spec.jwtRules[1].outputClaimToHeaders[0].header",
            "must not be empty",
        ),
        (
            "{issuer: x, outputClaimToHeaders: [{header: x-a}]}",
            "spec.jwtRules[1].outputClaimToHeaders[0].claim",
            "must not be empty",
        ),
        (
            "{issuer: x, timeout: apple}",
            "spec.jwtRules[1].timeout",
            "duration",
        ),
        (
            "{issuer: x, timeout: 0s}",
            "spec.jwtRules[1].timeout",
            "at least 1ms",
        ),
        (
            "{issuer: x, spaceDelimitedClaims: ['']}",
            "spec.jwtRules[1].spaceDelimitedClaims[0]",
            "empty value",
        ),
    ] {
        rejected(RA, &rule(r), field, reason);
    }
}

#[test]
fn inline_jwks_with_private_keys_warn() {
    let public = r#"{"keys": [{"kty": "EC", "crv": "P-256", "x": "a", "y": "b"}]}"#;
    let private = r#"{"kty": "RSA", "n": "a", "e": "AQAB", "d": "secret"}"#;
    assert!(
        accepted(
            RA,
            &format!("jwtRules: [{{issuer: x, jwks: '{public}'}}]\n")
        )
        .is_empty()
    );
    let warnings = accepted(
        RA,
        &format!("jwtRules: [{{issuer: x, jwks: '{private}'}}]\n"),
    );
    assert_eq!(
        warnings,
        [
            "spec.jwtRules[0].jwks: key at index 0 contains private key material; only public keys are used for verification"
        ]
    );
}

/// Parses one object; its error's reason when rejected.
fn reason_of(yaml: &str) -> String {
    match parse_documents("p.yaml", yaml).as_slice() {
        [Err(e)] => e.reason.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn peer_authorization_and_request_authentication_policies_are_enforced() {
    let header = |kind: &str| {
        format!(
            "apiVersion: security.istio.io/v1\nkind: {kind}\nmetadata: {{name: x, namespace: shop}}\n"
        )
    };
    let deny = format!(
        "{}spec:\n  action: DENY\n  rules:\n  - to: [{{operation: {{paths: [/admin], ports: ['80']}}}}]\n",
        header(AP)
    );
    let peer = format!("{}spec: {{mtls: {{mode: STRICT}}}}\n", header(PA));
    let request = format!(
        "{}spec: {{jwtRules: [{{issuer: https://example.com}}]}}\n",
        header(RA)
    );
    for enforced in [deny, peer, request] {
        let parsed = parse_documents("p.yaml", &enforced);
        assert!(matches!(parsed.as_slice(), [Ok(_)]), "{parsed:?}");
    }
    // An invalid one is rejected for what is wrong with it.
    let invalid = format!("{}spec: {{action: DENY}}\n", header(AP));
    assert!(reason_of(&invalid).starts_with("spec.rules: DENY action without rules"));
}

#[test]
fn what_an_authorization_policy_cannot_express_is_warned_as_failing_closed() {
    let mut warnings = Vec::new();
    let ap: security::AuthorizationPolicy = serde_norway::from_str(
        "action: CUSTOM\nprovider: {name: ext}\nrules:\n- to: [{operation: {paths: [/x]}}]\n",
    )
    .unwrap();
    fails_closed(&ap, &mut warnings);
    // A CUSTOM provider is checked against the mesh config where both are known
    // (`shoal analyze`, the edge), not on the policy alone.
    assert!(warnings.is_empty(), "{warnings:?}");
    // Request principals and JWT claims are enforced: no warning.
    let mut warnings = Vec::new();
    let ap: security::AuthorizationPolicy = serde_norway::from_str(
        "rules:\n- from: [{source: {requestPrincipals: ['*']}}]\n  when: [{key: 'request.auth.claims[groups]', values: [a]}]\n",
    )
    .unwrap();
    fails_closed(&ap, &mut warnings);
    assert_eq!(warnings, Vec::<String>::new());
    let ap: security::AuthorizationPolicy =
        serde_norway::from_str("rules:\n- from: [{source: {trustDomains: [td]}}]\n").unwrap();
    fails_closed(&ap, &mut warnings);
    assert!(
        warnings[0].contains("never match (fail closed)"),
        "{warnings:?}"
    );
}

#[test]
fn every_security_kind_is_enforced() {
    let config = |spec| Config {
        meta: Default::default(),
        spec,
    };
    assert_eq!(
        not_enforced(&config(Spec::Sidecar(Default::default()))),
        None
    );
    let audit = config(Spec::AuthorizationPolicy(security::AuthorizationPolicy {
        action: Some("AUDIT".into()),
        ..Default::default()
    }));
    assert_eq!(not_enforced(&audit), None);
    let ra = config(Spec::RequestAuthentication(Default::default()));
    assert_eq!(not_enforced(&ra), None);
}

#[test]
fn request_authentication_shoal_cannot_enforce_is_warned_as_failing_closed() {
    let warnings = accepted(RA, "jwtRules: [{issuer: https://example.com}]\n");
    assert_eq!(
        warnings,
        [
            "spec.jwtRules[0]: keys by OIDC discovery from the issuer are not supported by Shoal: set jwksUri or jwks; tokens of this rule are refused (fail closed)"
        ]
    );
    let warnings = accepted(
        RA,
        "targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\njwtRules: [{issuer: x, jwksUri: 'https://x/jwks'}]\n",
    );
    assert_eq!(
        warnings,
        [
            "spec.targetRef(s): Shoal does not serve Gateway API gateways or waypoints: the policy applies to no proxy"
        ]
    );
    assert!(accepted(RA, "jwtRules: [{issuer: x, jwksUri: 'https://x/jwks'}]\n").is_empty());
}
