//! What Shoal does not implement is said, never silently dropped: spec fields of Istio
//! kinds it does not model (warnings on the object), and whole kinds of Istio's and the
//! Gateway API's it does not read (reported like rejections, so that logs, the rejected
//! metric and `/debug/rejections` show them).

use super::super::Spec;
use super::super::validate::security;
use super::doc::Doc;
use serde_json::Value;

/// API groups whose kinds change traffic or policy: an object of one Shoal does not read
/// is reported rather than skipped like a Deployment.
const POLICY_GROUPS: [&str; 5] = [
    "networking.istio.io",
    "security.istio.io",
    "telemetry.istio.io",
    "extensions.istio.io",
    "gateway.networking.k8s.io",
];

/// Why an object of `api_version`/`kind` is not applied, when its group is one of
/// [`POLICY_GROUPS`]; `None` for kinds Shoal has no business with.
pub fn unsupported_kind(api_version: &str, kind: &str, doc: Doc<'_>) -> Option<String> {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    if !POLICY_GROUPS.contains(&group) {
        return None;
    }
    let consequence = match (group, kind) {
        ("security.istio.io", kind) => {
            security::consequence(kind, &authorization_action(doc)).unwrap_or("it has no effect")
        }
        ("telemetry.istio.io", _) => "telemetry is not configured by it",
        ("gateway.networking.k8s.io", _) => {
            "the Gateway API is not implemented: use networking.istio.io Gateways and VirtualServices"
        }
        _ => "it has no effect",
    };
    Some(format!(
        "unsupported by Shoal, ignored: {api_version} {kind} ({consequence})"
    ))
}

/// An AuthorizationPolicy's `spec.action` (Istio's default: ALLOW).
fn authorization_action(doc: Doc<'_>) -> String {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Policy {
        spec: Option<PolicySpec>,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct PolicySpec {
        action: String,
    }
    let action = doc
        .decode::<Policy>()
        .ok()
        .and_then(|p| p.spec)
        .map(|s| s.action)
        .unwrap_or_default();
    if action.is_empty() {
        "ALLOW".into()
    } else {
        action
    }
}

/// The spec fields written in `doc` that the typed `spec` does not model, as
/// `spec.a.b[0].c` paths: Istio fields Shoal does not implement (or misspellings).
/// Only Istio kinds are checked: Kubernetes objects carry many fields Shoal ignores by
/// design.
pub fn unknown_fields(spec: &Spec, doc: Doc<'_>) -> Vec<String> {
    let typed = match spec {
        Spec::ServiceEntry(s) => serde_json::to_value(s),
        Spec::WorkloadEntry(s) => serde_json::to_value(s),
        Spec::WorkloadGroup(s) => serde_json::to_value(s),
        Spec::VirtualService(s) => serde_json::to_value(s),
        Spec::DestinationRule(s) => serde_json::to_value(s),
        Spec::Sidecar(s) => serde_json::to_value(s),
        Spec::Gateway(s) => serde_json::to_value(s),
        Spec::PeerAuthentication(s) => serde_json::to_value(s),
        Spec::AuthorizationPolicy(s) => serde_json::to_value(s),
        Spec::RequestAuthentication(s) => serde_json::to_value(s),
        _ => return Vec::new(),
    };
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Raw {
        spec: Option<Value>,
    }
    let raw = doc.decode::<Raw>().ok().and_then(|r| r.spec);
    let (Ok(typed), Some(raw)) = (typed, raw) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    compare(&raw, &typed, "spec", &mut out);
    out
}

/// Aliases the typed model accepts under another name.
fn alias_of(key: &str) -> Option<&'static str> {
    match key {
        "matchLabels" => Some("labels"),
        _ => None,
    }
}

fn compare(raw: &Value, typed: &Value, path: &str, out: &mut Vec<String>) {
    match (raw, typed) {
        (Value::Object(raw), Value::Object(typed)) => {
            for (key, value) in raw {
                let known = typed
                    .get(key)
                    .or_else(|| alias_of(key).and_then(|a| typed.get(a)));
                match known {
                    Some(t) => compare(value, t, &format!("{path}.{key}"), out),
                    None => out.push(format!("{path}.{key}")),
                }
            }
        }
        (Value::Array(raw), Value::Array(typed)) => {
            for (i, (r, t)) in raw.iter().zip(typed).enumerate() {
                compare(r, t, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::istio::VirtualService;

    #[test]
    fn unknown_fields_are_named_by_path() {
        let doc = "spec:
  hosts: [a]
  http:
  - route:
    - destination: {host: a}
    mirrorPolicy: {}
    match:
    - uri: {prefix: /}
      statPrefix: x
";
        let vs: VirtualService = serde_norway::from_str::<serde_json::Value>(doc)
            .ok()
            .and_then(|v| serde_json::from_value(v["spec"].clone()).ok())
            .unwrap();
        assert_eq!(
            unknown_fields(&Spec::VirtualService(vs), Doc::Yaml(doc)),
            [
                "spec.http[0].match[0].statPrefix",
                "spec.http[0].mirrorPolicy"
            ]
        );
    }

    #[test]
    fn authorization_policies_say_what_is_not_enforced() {
        let deny = "spec:\n  action: DENY\n";
        let reason = unsupported_kind(
            "security.istio.io/v1",
            "AuthorizationPolicy",
            Doc::Yaml(deny),
        )
        .unwrap();
        assert!(reason.contains("DENY rules are NOT enforced"), "{reason}");
        let allow = unsupported_kind(
            "security.istio.io/v1",
            "AuthorizationPolicy",
            Doc::Yaml("spec: {}\n"),
        );
        assert!(allow.unwrap().contains("ALLOW rules"));
        assert!(
            unsupported_kind("gateway.networking.k8s.io/v1", "HTTPRoute", Doc::Yaml("")).is_some()
        );
        assert_eq!(unsupported_kind("v1", "ConfigMap", Doc::Yaml("")), None);
    }

    #[test]
    fn a_valid_request_authentication_is_enforced_not_reported() {
        let doc = "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: x, namespace: shop}\nspec: {jwtRules: [{issuer: x, jwksUri: 'https://x/jwks'}]}\n";
        let parsed = crate::config::parse::parse_documents("p.yaml", doc);
        assert!(matches!(parsed.as_slice(), [Ok(_)]), "{parsed:?}");
    }

    #[test]
    fn unknown_fields_of_security_kinds() {
        // Keys written as numbers (YAML) or as strings (the API server's JSON) alike.
        let doc = "spec:
  selector: {matchLabels: {app: a}}
  portLevelMtls:
    8080: {mode: STRICT, tls: x}
  mtls: {mode: STRICT}
  extra: 1
";
        let pa = serde_norway::from_str::<serde_json::Value>(doc)
            .ok()
            .and_then(|v| serde_json::from_value(v["spec"].clone()).ok())
            .unwrap();
        assert_eq!(
            unknown_fields(&Spec::PeerAuthentication(pa), Doc::Yaml(doc)),
            ["spec.extra", "spec.portLevelMtls.8080.tls"]
        );
        let doc = "spec:
  rules:
  - from: [{source: {principals: [a], trustDomain: [b]}}]
    to: [{operation: {paths: [/], verbs: [GET]}}]
";
        let ap = serde_norway::from_str::<serde_json::Value>(doc)
            .ok()
            .and_then(|v| serde_json::from_value(v["spec"].clone()).ok())
            .unwrap();
        assert_eq!(
            unknown_fields(&Spec::AuthorizationPolicy(ap), Doc::Yaml(doc)),
            [
                "spec.rules[0].from[0].source.trustDomain",
                "spec.rules[0].to[0].operation.verbs"
            ]
        );
        let doc = "spec:\n  jwtRules: [{issuer: x, jwks_uri: y, presence: MANDATORY}]\n";
        let ra = serde_norway::from_str::<serde_json::Value>(doc)
            .ok()
            .and_then(|v| serde_json::from_value(v["spec"].clone()).ok())
            .unwrap();
        assert_eq!(
            unknown_fields(&Spec::RequestAuthentication(ra), Doc::Yaml(doc)),
            ["spec.jwtRules[0].jwks_uri", "spec.jwtRules[0].presence"]
        );
    }
}
