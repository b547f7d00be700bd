//! Istio `corsPolicy` → the per-route config of Envoy's CORS filter (Istio's
//! `translateCORSPolicy`).

use super::matching::string_matcher;
use crate::xds::util::fractional_percent;
use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio;
use shoal_proto::config::validate::parse_duration;

/// The HTTP filter that applies it (in every outbound HTTP connection manager).
pub const CORS_FILTER: &str = "envoy.filters.http.cors";

pub fn cors_policy(cors: &istio::CorsPolicy) -> CorsPolicy {
    let mut origins: Vec<StringMatcher> = cors
        .allow_origins
        .iter()
        .filter_map(|o| string_matcher(o).ok().flatten())
        .collect();
    // The deprecated `allowOrigin` lists exact origins.
    origins.extend(cors.allow_origin.iter().map(|o| StringMatcher {
        match_pattern: Some(string_matcher::MatchPattern::Exact(o.clone())),
        ..Default::default()
    }));
    CorsPolicy {
        allow_origin_string_match: origins,
        allow_methods: cors.allow_methods.join(","),
        allow_headers: cors.allow_headers.join(","),
        expose_headers: cors.expose_headers.join(","),
        max_age: cors
            .max_age
            .as_deref()
            .and_then(|a| parse_duration(a).ok())
            .map(|d| d.as_secs().to_string())
            .unwrap_or_default(),
        allow_credentials: cors.allow_credentials.map(|value| BoolValue { value }),
        filter_enabled: Some(RuntimeFractionalPercent {
            default_value: Some(fractional_percent(100.0)),
            ..Default::default()
        }),
        forward_not_matching_preflights: Some(BoolValue {
            value: cors.unmatched_preflights.as_deref() != Some("IGNORE"),
        }),
        ..Default::default()
    }
}
