//! AuthorizationPolicy on a proxyless gRPC server: the RBAC HTTP filter on its
//! connection manager (gRFC A41), made by the sidecar's translation
//! ([`crate::xds::security::authz`]) from the policies cut to what gRPC evaluates. What
//! gRPC cannot evaluate is reported, naming the policy and the proxy, and fails closed:
//!
//! - a `when` on a `grpc-` header or `:scheme` (gRPC NACKs the listener for them), and
//!   request principals or `request.auth.*` (gRPC authenticates no JWT): an ALLOW rule
//!   using one is dropped (it never matches), a DENY or CUSTOM rule loses it (it denies
//!   more), as the sidecar's translation treats what a chain cannot see;
//! - CUSTOM (no ext_authz in gRPC): its rules deny, as on sidecars without the provider
//!   (Istio's `grpcgen` drops CUSTOM: Shoal fails closed instead);
//! - AUDIT: gRPC ignores RBAC's LOG action, so it is left out.
//!
//! gRPC NACKs two HTTP filters of one name, so the DENY filter is named apart (Istio's
//! names: `envoy.filters.http.rbac.DENY`, then `envoy.filters.http.rbac`).

use crate::xds::security::authz;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
use shoal_proto::config::security::{AuthorizationPolicy, AuthorizationRule};
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::security::Authorization;
use std::sync::Arc;

pub const RBAC_DENY_FILTER: &str = "envoy.filters.http.rbac.DENY";
pub const RBAC_ALLOW_FILTER: &str = "envoy.filters.http.rbac";

type Policy = Arc<NamedConfig<AuthorizationPolicy>>;

/// The RBAC filters of a gRPC server `proxy` under `authz`, DENY (and CUSTOM) first,
/// then ALLOW; none without policies.
pub fn http_filters(
    authz: &Authorization,
    proxy: &str,
    warnings: &mut Vec<String>,
) -> Vec<HttpFilter> {
    for p in &authz.custom {
        warnings.push(format!(
            "AuthorizationPolicy {}/{}: CUSTOM is not supported by proxyless gRPC server {proxy}; its rules deny (fail closed)",
            p.namespace, p.name
        ));
    }
    for p in &authz.audit {
        warnings.push(format!(
            "AuthorizationPolicy {}/{}: AUDIT is not supported by proxyless gRPC server {proxy} (gRPC ignores RBAC's LOG action); left out",
            p.namespace, p.name
        ));
    }
    let cut = |policies: &[Policy], deny: bool, warnings: &mut Vec<String>| -> Vec<Policy> {
        policies
            .iter()
            .map(|p| for_grpc(p, deny, proxy, warnings))
            .collect()
    };
    let deny = Authorization {
        custom: cut(&authz.custom, true, warnings),
        deny: cut(&authz.deny, true, warnings),
        ..Default::default()
    };
    let allow = Authorization {
        allow: cut(&authz.allow, false, warnings),
        ..Default::default()
    };
    let mut filters = Vec::new();
    for (name, a) in [(RBAC_DENY_FILTER, &deny), (RBAC_ALLOW_FILTER, &allow)] {
        filters.extend(authz::http_filters(a).into_iter().map(|mut f| {
            f.name = name.to_string();
            f
        }));
    }
    filters
}

/// `policy` without what gRPC cannot evaluate: for an ALLOW policy (`deny` false) the
/// rules using it are dropped, for a DENY the fields. Unchanged policies are shared.
fn for_grpc(policy: &Policy, deny: bool, proxy: &str, warnings: &mut Vec<String>) -> Policy {
    let mut changed = false;
    let mut rules = Vec::with_capacity(policy.spec.rules.len());
    for (i, rule) in policy.spec.rules.iter().enumerate() {
        let unsupported = unsupported(rule);
        if unsupported.is_empty() {
            rules.push(rule.clone());
            continue;
        }
        changed = true;
        let what = unsupported.join(", ");
        if deny {
            warnings.push(format!(
                "AuthorizationPolicy {}/{} rule {i}: {what} cannot be evaluated by proxyless gRPC server {proxy}; ignored, so the rule denies more (fail closed)",
                policy.namespace, policy.name
            ));
            rules.push(without_unsupported(rule));
        } else {
            warnings.push(format!(
                "AuthorizationPolicy {}/{} rule {i}: {what} cannot be evaluated by proxyless gRPC server {proxy}; the rule never matches (fail closed)",
                policy.namespace, policy.name
            ));
        }
    }
    if !changed {
        return policy.clone();
    }
    let mut cut = (**policy).clone();
    cut.spec.rules = rules;
    Arc::new(cut)
}

/// Whether a `when` key is one gRPC cannot evaluate.
fn unsupported_key(key: &str) -> bool {
    if key.starts_with("request.auth.") {
        return true;
    }
    key.strip_prefix("request.headers[")
        .and_then(|k| k.strip_suffix(']'))
        .is_some_and(|h| {
            let h = h.to_ascii_lowercase();
            h.starts_with("grpc-") || h == ":scheme"
        })
}

/// What of `rule` gRPC cannot evaluate, as the report names it.
fn unsupported(rule: &AuthorizationRule) -> Vec<String> {
    let mut out = Vec::new();
    let jwt = rule
        .from
        .iter()
        .filter_map(|f| f.source.as_ref())
        .any(|s| !s.request_principals.is_empty() || !s.not_request_principals.is_empty());
    if jwt {
        out.push("requestPrincipals".to_string());
    }
    out.extend(
        rule.when
            .iter()
            .filter(|c| unsupported_key(&c.key))
            .map(|c| format!("when {}", c.key)),
    );
    out
}

fn without_unsupported(rule: &AuthorizationRule) -> AuthorizationRule {
    let mut r = rule.clone();
    for from in &mut r.from {
        if let Some(s) = &mut from.source {
            s.request_principals.clear();
            s.not_request_principals.clear();
        }
    }
    r.when.retain(|c| !unsupported_key(&c.key));
    r
}
