//! Envoy's RBAC config with its policies in name order. `RBAC.policies` is a proto map,
//! which prost encodes in its `HashMap`'s (random) order: the same policies would hash
//! differently on every build and on every edge, and be resent for nothing. A map is, on
//! the wire, a repeated (key, value) message, so these mirrors encode the same bytes in
//! a fixed order. Field numbers are Envoy's (`envoy.config.rbac.v3.RBAC`,
//! `envoy.extensions.filters.{http,network}.rbac.v3.RBAC`).

use envoy_types::pb::envoy::config::rbac::v3::Policy;

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderedRbac {
    /// `RBAC.Action`: ALLOW 0, DENY 1, LOG 2.
    #[prost(int32, tag = "1")]
    pub action: i32,
    #[prost(message, repeated, tag = "2")]
    pub policies: Vec<PolicyEntry>,
}

/// One `map<string, Policy>` entry.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PolicyEntry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<Policy>,
}

/// `envoy.extensions.filters.http.rbac.v3.RBAC`: `rules` (1), `shadow_rules` (2),
/// `shadow_rules_stat_prefix` (3), `rules_stat_prefix` (6).
#[derive(Clone, PartialEq, prost::Message)]
pub struct HttpRbac {
    #[prost(message, optional, tag = "1")]
    pub rules: Option<OrderedRbac>,
    #[prost(message, optional, tag = "2")]
    pub shadow_rules: Option<OrderedRbac>,
    #[prost(string, tag = "3")]
    pub shadow_rules_stat_prefix: String,
    #[prost(string, tag = "6")]
    pub rules_stat_prefix: String,
}

impl prost::Name for HttpRbac {
    const NAME: &'static str = "RBAC";
    const PACKAGE: &'static str = "envoy.extensions.filters.http.rbac.v3";

    fn full_name() -> String {
        "envoy.extensions.filters.http.rbac.v3.RBAC".into()
    }

    fn type_url() -> String {
        "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC".into()
    }
}

/// `envoy.extensions.filters.network.rbac.v3.RBAC`: `rules` (1), `shadow_rules` (2),
/// `stat_prefix` (3), `shadow_rules_stat_prefix` (5).
#[derive(Clone, PartialEq, prost::Message)]
pub struct NetworkRbac {
    #[prost(message, optional, tag = "1")]
    pub rules: Option<OrderedRbac>,
    #[prost(message, optional, tag = "2")]
    pub shadow_rules: Option<OrderedRbac>,
    #[prost(string, tag = "3")]
    pub stat_prefix: String,
    #[prost(string, tag = "5")]
    pub shadow_rules_stat_prefix: String,
}

impl prost::Name for NetworkRbac {
    const NAME: &'static str = "RBAC";
    const PACKAGE: &'static str = "envoy.extensions.filters.network.rbac.v3";

    fn full_name() -> String {
        "envoy.extensions.filters.network.rbac.v3.RBAC".into()
    }

    fn type_url() -> String {
        "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC".into()
    }
}
