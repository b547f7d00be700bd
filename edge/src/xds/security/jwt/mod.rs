//! RequestAuthentication as Envoy's `jwt_authn` HTTP filter, as Istio builds it for an
//! Envoy without its `istio_authn` filter:
//!
//! - one provider per JWT rule of the policies that select the workload (`origins-<i>`,
//!   rules in issuer order), each writing the verified payload to the dynamic metadata
//!   `envoy.filters.http.jwt_authn` / `payload`, where AuthorizationPolicy's RBAC matches
//!   `requestPrincipals` and `request.auth.*` (`authz::request_auth`);
//! - a request without a token passes (AuthorizationPolicy decides), one with a token no
//!   provider accepts (bad signature, expired, wrong issuer or audience) gets 401: the
//!   requirement is "any provider, or none present" for one rule, and for several
//!   "any one provider, or each provider's (provider or missing)" (the outer OR lets
//!   providers share a location).
//!
//! Keys: `jwks` inline as written; `jwksUri` from the [`keys::JwksStore`] the edge fills
//! (`crate::jwks`), or, never fetched, [`keys::UNFETCHED_JWKS`], which refuses every
//! token (fail closed).

pub mod keys;
mod ordered;

use crate::xds::util::any;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::route::v3::{RouteMatch, route_match};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwtClaimToHeader, JwtHeader, JwtProvider, JwtRequirement, JwtRequirementAndList,
    JwtRequirementOrList, RequirementRule, jwt_provider, jwt_requirement, requirement_rule,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::google::protobuf::Empty;
use keys::{JwksStore, UNFETCHED_JWKS};
use ordered::{OrderedJwtAuthentication, ProviderEntry};
use shoal_proto::config::security::{JwtRule, RequestAuthentication};
use shoal_proto::model::NamedConfig;
use std::sync::Arc;

/// The filter's name, also the dynamic metadata namespace of its payloads.
pub const JWT_AUTHN: &str = "envoy.filters.http.jwt_authn";
/// The key under [`JWT_AUTHN`] the verified payload is written to.
pub const PAYLOAD: &str = "payload";
/// Claims always split on spaces for matching (Istio's defaults).
const SPACE_DELIMITED: [&str; 2] = ["permission", "scope"];

/// The JWT rules of `policies`, in issuer order (Istio's, so the config is stable).
fn rules(policies: &[Arc<NamedConfig<RequestAuthentication>>]) -> Vec<&JwtRule> {
    let mut rules: Vec<&JwtRule> = policies.iter().flat_map(|p| &p.spec.jwt_rules).collect();
    rules.sort_by(|a, b| a.issuer.cmp(&b.issuer));
    rules
}

/// The `jwksUri`s `policies` name (what the edge must fetch for them).
pub fn jwks_uris(
    policies: &[Arc<NamedConfig<RequestAuthentication>>],
) -> impl Iterator<Item = &str> {
    policies
        .iter()
        .flat_map(|p| &p.spec.jwt_rules)
        .filter(|r| r.jwks.is_empty() && !r.jwks_uri.is_empty())
        .map(|r| r.jwks_uri.as_str())
}

/// What a proxy's filter depends on of the fetched keys: the store's version when one
/// of its rules uses a `jwksUri`, else nothing (its config never changes with keys).
pub fn keys_version(policies: &[Arc<NamedConfig<RequestAuthentication>>], keys: &JwksStore) -> u64 {
    if jwks_uris(policies).next().is_some() {
        keys.version()
    } else {
        0
    }
}

/// The `jwt_authn` filter of a workload selected by `policies` (none without rules).
pub fn http_filter(
    policies: &[Arc<NamedConfig<RequestAuthentication>>],
    keys: &JwksStore,
) -> Option<HttpFilter> {
    let rules = rules(policies);
    if rules.is_empty() {
        return None;
    }
    let mut providers = Vec::with_capacity(rules.len());
    let mut each_or_missing = Vec::with_capacity(rules.len());
    let mut any_one = Vec::with_capacity(rules.len() + 1);
    for (i, rule) in rules.iter().enumerate() {
        let name = format!("origins-{i}");
        providers.push(ProviderEntry {
            key: name.clone(),
            value: Some(provider(rule, keys)),
        });
        each_or_missing.push(requires_any(vec![
            provider_named(&name),
            requirement(jwt_requirement::RequiresType::AllowMissing(Empty {})),
        ]));
        any_one.push(provider_named(&name));
    }
    let requires = if each_or_missing.len() == 1 {
        each_or_missing.pop().unwrap_or_default()
    } else {
        any_one.push(requirement(jwt_requirement::RequiresType::RequiresAll(
            JwtRequirementAndList {
                requirements: each_or_missing,
            },
        )));
        requires_any(any_one)
    };
    let config = OrderedJwtAuthentication {
        providers,
        rules: vec![RequirementRule {
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            requirement_type: Some(requirement_rule::RequirementType::Requires(requires)),
        }],
        bypass_cors_preflight: true,
    };
    Some(HttpFilter {
        name: JWT_AUTHN.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&config))),
        ..Default::default()
    })
}

fn provider(rule: &JwtRule, keys: &JwksStore) -> JwtProvider {
    let jwks: String = if !rule.jwks.is_empty() {
        rule.jwks.clone()
    } else if rule.jwks_uri.is_empty() {
        // OIDC discovery from the issuer is not done: no keys, every token refused.
        UNFETCHED_JWKS.into()
    } else {
        keys.get(&rule.jwks_uri)
            .map_or_else(|| UNFETCHED_JWKS.into(), |doc| doc.to_string())
    };
    let mut space_delimited: Vec<String> = rule
        .space_delimited_claims
        .iter()
        .cloned()
        .chain(SPACE_DELIMITED.iter().map(|c| (*c).to_string()))
        .collect();
    space_delimited.sort();
    space_delimited.dedup();
    JwtProvider {
        issuer: rule.issuer.clone(),
        audiences: rule.audiences.clone(),
        forward: rule.forward_original_token,
        forward_payload_header: rule.output_payload_to_header.clone(),
        payload_in_metadata: PAYLOAD.into(),
        normalize_payload_in_metadata: Some(jwt_provider::NormalizePayload {
            space_delimited_claims: space_delimited,
        }),
        from_headers: rule
            .from_headers
            .iter()
            .map(|h| JwtHeader {
                name: h.name.clone(),
                value_prefix: h.prefix.clone(),
            })
            .collect(),
        from_params: rule.from_params.clone(),
        from_cookies: rule.from_cookies.clone(),
        claim_to_headers: rule
            .output_claim_to_headers
            .iter()
            .map(|c| JwtClaimToHeader {
                header_name: c.header.clone(),
                claim_name: c.claim.clone(),
                ..Default::default()
            })
            .collect(),
        jwks_source_specifier: Some(jwt_provider::JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(jwks)),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn requirement(t: jwt_requirement::RequiresType) -> JwtRequirement {
    JwtRequirement {
        requires_type: Some(t),
    }
}

fn provider_named(name: &str) -> JwtRequirement {
    requirement(jwt_requirement::RequiresType::ProviderName(name.into()))
}

fn requires_any(requirements: Vec<JwtRequirement>) -> JwtRequirement {
    requirement(jwt_requirement::RequiresType::RequiresAny(
        JwtRequirementOrList { requirements },
    ))
}

#[cfg(test)]
mod tests;
