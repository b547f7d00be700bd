//! `action: CUSTOM`: Envoy's ext_authz filter, asked only for the requests the CUSTOM
//! policies' rules match, as Istio builds it.
//!
//! An RBAC filter holds those rules as *shadow* rules (it never denies): a match
//! records the rule's name, prefixed `istio-ext-authz`, in the filter's dynamic
//! metadata (`istio_ext_authz_shadow_effective_policy_id`), and the ext_authz filter
//! after it runs only when that metadata is there. So a request no CUSTOM rule matches
//! never reaches the authorizer.
//!
//! On TCP chains only a gRPC provider can check (Envoy's network ext_authz); an HTTP
//! provider leaves TCP traffic to the other actions, as in Istio. CUSTOM policies whose
//! provider cannot be used (unknown, broken, or more than one per workload) are not
//! built here: their rules deny (see the module above).

use super::ordered::{HttpRbac, NetworkRbac, OrderedRbac};
use super::rules::string_match;
use super::{HTTP_RBAC, NETWORK_RBAC};
use crate::xds::util::{any, duration};
use envoy_types::pb::envoy::config::core::v3::{
    GrpcService, HeaderValue, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3 as http_authz;
use envoy_types::pb::envoy::extensions::filters::network::ext_authz::v3 as tcp_authz;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListStringMatcher, MetadataMatcher, StringMatcher, ValueMatcher, metadata_matcher,
    string_matcher, value_matcher,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use shoal_proto::push_context::security::ext_authz::{ExtAuthzApi, ExtAuthzProvider, HttpCheck};

const HTTP_EXT_AUTHZ: &str = "envoy.filters.http.ext_authz";
const NETWORK_EXT_AUTHZ: &str = "envoy.filters.network.ext_authz";
/// The prefix of every CUSTOM rule's name, which the ext_authz filter looks for.
pub const RULE_PREFIX: &str = "istio-ext-authz";
/// The RBAC shadow rules' stat prefix, which also prefixes their metadata keys.
const SHADOW_PREFIX: &str = "istio_ext_authz_";
/// Envoy's `ApiVersion.V3`.
const V3: i32 = 2;

/// The HTTP filters of CUSTOM policies with a usable provider: the shadow RBAC, then
/// ext_authz. `rules` are the policies' rules named with [`RULE_PREFIX`].
pub fn http_filters(rules: OrderedRbac, provider: &ExtAuthzProvider) -> Vec<HttpFilter> {
    let rbac = HttpFilter {
        name: HTTP_RBAC.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&HttpRbac {
            shadow_rules: Some(rules),
            shadow_rules_stat_prefix: SHADOW_PREFIX.into(),
            ..Default::default()
        }))),
        ..Default::default()
    };
    let services = match &provider.api {
        ExtAuthzApi::Http(check) => {
            http_authz::ext_authz::Services::HttpService(http_service(provider, check))
        }
        ExtAuthzApi::Grpc => http_authz::ext_authz::Services::GrpcService(grpc_service(provider)),
    };
    let allowed_headers = match &provider.api {
        ExtAuthzApi::Http(check) => headers(&check.request_headers),
        ExtAuthzApi::Grpc => None,
    };
    let ext_authz = http_authz::ExtAuthz {
        services: Some(services),
        transport_api_version: V3,
        failure_mode_allow: provider.fail_open,
        status_on_error: provider
            .status_on_error
            .map(|code| HttpStatus { code: code as i32 }),
        filter_enabled_metadata: Some(enabled_by(HTTP_RBAC)),
        with_request_body: provider.body.as_ref().map(|b| http_authz::BufferSettings {
            max_request_bytes: b.max_request_bytes,
            allow_partial_message: b.allow_partial_message,
            pack_as_bytes: b.pack_as_bytes,
        }),
        allowed_headers,
        ..Default::default()
    };
    let ext_authz = HttpFilter {
        name: HTTP_EXT_AUTHZ.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&ext_authz))),
        ..Default::default()
    };
    vec![rbac, ext_authz]
}

/// The network filters of CUSTOM policies on a TCP chain: a gRPC provider's shadow RBAC
/// and network ext_authz; none for an HTTP provider.
pub fn network_filters(rules: OrderedRbac, provider: &ExtAuthzProvider) -> Vec<Filter> {
    if !matches!(provider.api, ExtAuthzApi::Grpc) {
        return Vec::new();
    }
    let rbac = Filter {
        name: NETWORK_RBAC.into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&NetworkRbac {
            shadow_rules: Some(rules),
            shadow_rules_stat_prefix: SHADOW_PREFIX.into(),
            stat_prefix: "tcp.".into(),
            ..Default::default()
        }))),
    };
    let ext_authz = tcp_authz::ExtAuthz {
        stat_prefix: "tcp.".into(),
        grpc_service: Some(grpc_service(provider)),
        failure_mode_allow: provider.fail_open,
        transport_api_version: V3,
        filter_enabled_metadata: Some(enabled_by(NETWORK_RBAC)),
        ..Default::default()
    };
    let ext_authz = Filter {
        name: NETWORK_EXT_AUTHZ.into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&ext_authz))),
    };
    vec![rbac, ext_authz]
}

fn http_service(provider: &ExtAuthzProvider, check: &HttpCheck) -> http_authz::HttpService {
    let authorization_request =
        (!check.additional_headers.is_empty()).then(|| http_authz::AuthorizationRequest {
            headers_to_add: check
                .additional_headers
                .iter()
                .map(|(key, value)| HeaderValue {
                    key: key.clone(),
                    value: value.clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
    let shapes_response = !(check.upstream_on_allow.is_empty()
        && check.downstream_on_deny.is_empty()
        && check.downstream_on_allow.is_empty());
    let authorization_response = shapes_response.then(|| http_authz::AuthorizationResponse {
        allowed_upstream_headers: headers(&check.upstream_on_allow),
        allowed_client_headers: headers(&check.downstream_on_deny),
        allowed_client_headers_on_success: headers(&check.downstream_on_allow),
        ..Default::default()
    });
    http_authz::HttpService {
        server_uri: Some(HttpUri {
            uri: format!("http://{}", provider.hostname),
            timeout: Some(duration(provider.timeout)),
            http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(
                provider.cluster.clone(),
            )),
        }),
        path_prefix: check.path_prefix.clone(),
        authorization_request,
        authorization_response,
        ..Default::default()
    }
}

fn grpc_service(provider: &ExtAuthzProvider) -> GrpcService {
    GrpcService {
        timeout: Some(duration(provider.timeout)),
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
            grpc_service::EnvoyGrpc {
                cluster_name: provider.cluster.clone(),
                authority: provider.hostname.clone(),
                ..Default::default()
            },
        )),
        ..Default::default()
    }
}

/// Header names as case-insensitive matchers (`prefix*`, `*suffix`, exact).
fn headers(names: &[String]) -> Option<ListStringMatcher> {
    (!names.is_empty()).then(|| ListStringMatcher {
        patterns: names.iter().map(|h| string_match(h, true)).collect(),
    })
}

/// "The RBAC filter `filter` recorded a CUSTOM rule as matched".
fn enabled_by(filter: &str) -> MetadataMatcher {
    MetadataMatcher {
        filter: filter.into(),
        path: vec![metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(format!(
                "{SHADOW_PREFIX}shadow_effective_policy_id"
            ))),
        }],
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::StringMatch(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::Prefix(RULE_PREFIX.into())),
                ..Default::default()
            })),
        }),
        ..Default::default()
    }
}
