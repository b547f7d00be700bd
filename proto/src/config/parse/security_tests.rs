//! The `security.istio.io` kinds read from YAML (Istio's documented examples) and from
//! the API server's JSON: the typed object as parsed and accepted.

use super::*;
use crate::config::security::*;

/// The object parsed from `text`, accepted.
fn read(text: &str) -> Config {
    match parse_documents("sec.yaml", text).as_slice() {
        [Ok(parsed)] => parsed.config.clone(),
        other => panic!("{other:?}"),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Option<PolicySelector> {
    Some(PolicySelector {
        match_labels: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| v.to_string()).collect()
}

#[test]
fn security_kinds_are_known_in_v1_and_v1beta1() {
    for kind in [
        "PeerAuthentication",
        "AuthorizationPolicy",
        "RequestAuthentication",
    ] {
        for version in ["v1", "v1beta1"] {
            let k = Kind::from_api(&format!("security.istio.io/{version}"), kind).unwrap();
            assert_eq!(k.as_str(), kind);
            assert_eq!(Kind::parse(kind), Some(k));
            assert!(!k.is_cluster_scoped() && !k.is_endpoint_only());
        }
        assert_eq!(Kind::from_api("security.istio.io/v1alpha3", kind), None);
    }
}

#[test]
fn peer_authentication_from_yaml() {
    let config = read(
        "apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata:
  name: finance
  namespace: foo
spec:
  selector:
    matchLabels:
      app: finance
  mtls:
    mode: STRICT
  portLevelMtls:
    8080:
      mode: DISABLE
",
    );
    assert_eq!(config.key().to_string(), "PeerAuthentication foo/finance");
    let strict = |mode: &str| PeerMutualTls {
        mode: Some(mode.into()),
    };
    assert_eq!(
        config.spec,
        Spec::PeerAuthentication(PeerAuthentication {
            selector: labels(&[("app", "finance")]),
            mtls: Some(strict("STRICT")),
            port_level_mtls: [("8080".to_string(), strict("DISABLE"))].into(),
        })
    );
}

#[test]
fn authorization_policy_from_yaml() {
    let config = read(
        "apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata:
  name: httpbin
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
      version: v1
  action: ALLOW
  rules:
  - from:
    - source:
        principals: [\"cluster.local/ns/default/sa/sleep\"]
    - source:
        namespaces: [\"dev\"]
    to:
    - operation:
        methods: [\"GET\"]
    when:
    - key: request.auth.claims[iss]
      values: [\"https://accounts.google.com\"]
",
    );
    let Spec::AuthorizationPolicy(ap) = config.spec else {
        panic!("{config:?}");
    };
    assert_eq!(
        ap.selector,
        labels(&[("app", "httpbin"), ("version", "v1")])
    );
    assert_eq!(ap.action.as_deref(), Some("ALLOW"));
    let rule = &ap.rules[0];
    assert_eq!(rule.from.len(), 2);
    assert_eq!(
        rule.from[0].source.as_ref().unwrap().principals,
        strings(&["cluster.local/ns/default/sa/sleep"])
    );
    assert_eq!(
        rule.from[1].source.as_ref().unwrap().namespaces,
        strings(&["dev"])
    );
    assert_eq!(
        rule.to[0].operation.as_ref().unwrap().methods,
        strings(&["GET"])
    );
    assert_eq!(
        rule.when,
        [Condition {
            key: "request.auth.claims[iss]".into(),
            values: strings(&["https://accounts.google.com"]),
            not_values: vec![],
        }]
    );
    // A CUSTOM policy, as in Istio's docs, names its provider.
    let custom = read(
        "apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ext-authz, namespace: foo}
spec:
  selector:
    matchLabels:
      app: httpbin
  action: CUSTOM
  provider:
    name: \"my-custom-authz\"
  rules:
  - to:
    - operation:
        paths: [\"/admin/*\"]
",
    );
    let Spec::AuthorizationPolicy(ap) = custom.spec else {
        panic!("{custom:?}");
    };
    assert_eq!(ap.provider.unwrap().name, "my-custom-authz");
}

#[test]
fn request_authentication_from_yaml() {
    let config = read(
        "apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata:
  name: httpbin
  namespace: foo
spec:
  selector:
    matchLabels:
      app: httpbin
  jwtRules:
  - issuer: \"issuer-foo\"
    jwksUri: https://example.com/.well-known/jwks.json
    audiences: [bookstore_android.apps.example.com]
    fromHeaders:
    - name: x-jwt-assertion
      prefix: \"Bearer \"
    forwardOriginalToken: true
    outputClaimToHeaders:
    - header: \"x-jwt-claim-foo\"
      claim: \"foo\"
    timeout: 3s
",
    );
    let Spec::RequestAuthentication(ra) = config.spec else {
        panic!("{config:?}");
    };
    assert_eq!(
        ra.jwt_rules,
        [JwtRule {
            issuer: "issuer-foo".into(),
            audiences: strings(&["bookstore_android.apps.example.com"]),
            jwks_uri: "https://example.com/.well-known/jwks.json".into(),
            from_headers: vec![JwtHeader {
                name: "x-jwt-assertion".into(),
                prefix: "Bearer ".into(),
            }],
            forward_original_token: true,
            output_claim_to_headers: vec![ClaimToHeader {
                header: "x-jwt-claim-foo".into(),
                claim: "foo".into(),
            }],
            timeout: Some("3s".into()),
            ..Default::default()
        }]
    );
}

#[test]
fn security_kinds_from_api_server_json() {
    // As the API server serves them: JSON, map keys (ports) as strings, with status.
    let pa = read(
        r#"{"apiVersion": "security.istio.io/v1", "kind": "PeerAuthentication",
            "metadata": {"name": "db", "namespace": "shop", "resourceVersion": "12",
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "spec": {"selector": {"matchLabels": {"app": "db"}},
                     "mtls": {"mode": "PERMISSIVE"},
                     "portLevelMtls": {"5432": {"mode": "STRICT"}, "9102": {"mode": "DISABLE"}}},
            "status": {}}"#,
    );
    let Spec::PeerAuthentication(spec) = &pa.spec else {
        panic!("{pa:?}");
    };
    assert_eq!(
        spec.port_level_mtls.keys().collect::<Vec<_>>(),
        ["5432", "9102"]
    );
    assert_eq!(pa.meta.creation_timestamp, "2026-01-02T03:04:05Z");
    let ap = read(
        r#"{"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": {"name": "deny-admin", "namespace": "shop"},
            "spec": {"action": "DENY", "targetRefs": [{"group": "", "kind": "Service", "name": "web"}],
                     "rules": [{"from": [{"source": {"notIpBlocks": ["10.0.0.0/8"]}}],
                                "to": [{"operation": {"paths": ["/admin"], "ports": ["8080"]}}]}]}}"#,
    );
    let Spec::AuthorizationPolicy(spec) = &ap.spec else {
        panic!("{ap:?}");
    };
    assert_eq!(spec.target_refs[0].name, "web");
    assert_eq!(
        spec.rules[0].to[0].operation.as_ref().unwrap().ports,
        strings(&["8080"])
    );
    let ra = read(
        r#"{"apiVersion": "security.istio.io/v1", "kind": "RequestAuthentication",
            "metadata": {"name": "jwt", "namespace": "shop"},
            "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"},
                     "jwtRules": [{"issuer": "https://example.com", "jwks": "{\"keys\": []}",
                                   "outputPayloadToHeader": "x-jwt-payload"}]}}"#,
    );
    let Spec::RequestAuthentication(spec) = &ra.spec else {
        panic!("{ra:?}");
    };
    assert_eq!(spec.target_ref.as_ref().unwrap().kind, "Gateway");
    assert_eq!(spec.jwt_rules[0].jwks, "{\"keys\": []}");
    assert_eq!(spec.jwt_rules[0].output_payload_to_header, "x-jwt-payload");
}

#[test]
fn a_field_of_the_wrong_type_is_a_parse_error_naming_the_object() {
    let parsed = parse_documents(
        "sec.yaml",
        "apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: bad, namespace: shop}
spec:
  rules:
  - from: {source: {principals: [a]}}
",
    );
    let [Err(error)] = parsed.as_slice() else {
        panic!("{parsed:?}");
    };
    assert_eq!(error.object, "AuthorizationPolicy shop/bad");
    assert!(error.rejected.is_none(), "{error:?}");
}
