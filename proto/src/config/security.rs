//! `security.istio.io` specs (PeerAuthentication, AuthorizationPolicy,
//! RequestAuthentication), as users write them (camelCase YAML), following Istio's
//! `security/v1` API. As in [`super::istio`], only the fields Istio defines are modelled,
//! a field of the wrong type is an error, and oneofs are structs of options so that the
//! types stay encodable by non-self-describing codecs in snapshots.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The workloads a policy applies to (`matchLabels`); absent: every workload of the
/// namespace (of the mesh, in the root namespace).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicySelector {
    pub match_labels: BTreeMap<String, String>,
}

/// A policy attached to a resource instead of a selector (`targetRef`, `targetRefs`):
/// Istio's `PolicyTargetReference` (a Gateway API Gateway, a Service, a ServiceEntry).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyTargetReference {
    pub group: String,
    pub kind: String,
    pub name: String,
    /// Must not be set: Istio does not support referencing another namespace.
    pub namespace: String,
}

/// `PeerAuthentication`: the mTLS mode a workload's inbound traffic is accepted in.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PeerAuthentication {
    pub selector: Option<PolicySelector>,
    pub mtls: Option<PeerMutualTls>,
    /// Per workload port (the key, a port number as text: YAML writes it as a number,
    /// the API server's JSON as a string); needs a `selector`.
    pub port_level_mtls: BTreeMap<String, PeerMutualTls>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PeerMutualTls {
    /// `UNSET` (inherit), `DISABLE`, `PERMISSIVE` or `STRICT`.
    pub mode: Option<String>,
}

/// `AuthorizationPolicy`: who may do what to the selected workloads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthorizationPolicy {
    pub selector: Option<PolicySelector>,
    pub target_ref: Option<PolicyTargetReference>,
    pub target_refs: Vec<PolicyTargetReference>,
    pub rules: Vec<AuthorizationRule>,
    /// `ALLOW` (default), `DENY`, `AUDIT` or `CUSTOM`.
    pub action: Option<String>,
    /// For `CUSTOM`: the extension provider (mesh config `extensionProviders`).
    pub provider: Option<ExtensionProvider>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtensionProvider {
    pub name: String,
}

/// One rule: it matches when one `from`, one `to` and every `when` match (an absent
/// list matches anything).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuthorizationRule {
    pub from: Vec<RuleFrom>,
    pub to: Vec<RuleTo>,
    pub when: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RuleFrom {
    pub source: Option<Source>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RuleTo {
    pub operation: Option<Operation>,
}

/// The peer: each set field must match (one of its values), each `not*` must not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Source {
    pub principals: Vec<String>,
    pub not_principals: Vec<String>,
    pub request_principals: Vec<String>,
    pub not_request_principals: Vec<String>,
    pub namespaces: Vec<String>,
    pub not_namespaces: Vec<String>,
    pub service_accounts: Vec<String>,
    pub not_service_accounts: Vec<String>,
    pub ip_blocks: Vec<String>,
    pub not_ip_blocks: Vec<String>,
    pub remote_ip_blocks: Vec<String>,
    pub not_remote_ip_blocks: Vec<String>,
    /// The trust domain of the peer's identity (`cluster.local`; `*` wildcards at an end).
    pub trust_domains: Vec<String>,
    pub not_trust_domains: Vec<String>,
}

/// The request: each set field must match (one of its values), each `not*` must not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Operation {
    pub hosts: Vec<String>,
    pub not_hosts: Vec<String>,
    pub ports: Vec<String>,
    pub not_ports: Vec<String>,
    pub methods: Vec<String>,
    pub not_methods: Vec<String>,
    pub paths: Vec<String>,
    pub not_paths: Vec<String>,
}

/// `when`: an attribute (`request.headers[x]`, `source.ip`, `request.auth.claims[iss]`,
/// `connection.sni`, ...) and the values it must (not) have.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    pub key: String,
    pub values: Vec<String>,
    pub not_values: Vec<String>,
}

/// `RequestAuthentication`: the JWTs a workload accepts (a request with an invalid one
/// is refused; one without any is let through, for AuthorizationPolicy to decide).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestAuthentication {
    pub selector: Option<PolicySelector>,
    pub target_ref: Option<PolicyTargetReference>,
    pub target_refs: Vec<PolicyTargetReference>,
    pub jwt_rules: Vec<JwtRule>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JwtRule {
    pub issuer: String,
    pub audiences: Vec<String>,
    pub jwks_uri: String,
    /// The JWKS inline (JSON text); exclusive with `jwks_uri`.
    pub jwks: String,
    pub from_headers: Vec<JwtHeader>,
    pub from_params: Vec<String>,
    pub from_cookies: Vec<String>,
    pub output_payload_to_header: String,
    pub forward_original_token: bool,
    pub output_claim_to_headers: Vec<ClaimToHeader>,
    /// How long fetching `jwks_uri` may take (an Istio duration).
    pub timeout: Option<String>,
    /// Claims split on whitespace for matching, beside `scope` and `permission`.
    pub space_delimited_claims: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JwtHeader {
    pub name: String,
    pub prefix: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClaimToHeader {
    pub header: String,
    pub claim: String,
}
