//! Envoy's `JwtAuthentication` with its providers in name order. `providers` is a proto
//! map, which prost encodes in its `HashMap`'s (random) order, so the same filter would
//! hash differently on every build (see `authz::ordered` for the RBAC twin). Field
//! numbers are Envoy's (`envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication`).

use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwtProvider, RequirementRule,
};

/// `JwtAuthentication`: `providers` (1), `rules` (2), `bypass_cors_preflight` (4).
#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderedJwtAuthentication {
    #[prost(message, repeated, tag = "1")]
    pub providers: Vec<ProviderEntry>,
    #[prost(message, repeated, tag = "2")]
    pub rules: Vec<RequirementRule>,
    #[prost(bool, tag = "4")]
    pub bypass_cors_preflight: bool,
}

/// One `map<string, JwtProvider>` entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProviderEntry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<JwtProvider>,
}

impl prost::Name for OrderedJwtAuthentication {
    const NAME: &'static str = "JwtAuthentication";
    const PACKAGE: &'static str = "envoy.extensions.filters.http.jwt_authn.v3";

    fn full_name() -> String {
        "envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication".into()
    }

    fn type_url() -> String {
        "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication".into()
    }
}
