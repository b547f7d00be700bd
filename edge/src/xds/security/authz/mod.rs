//! AuthorizationPolicy as Envoy's RBAC filters, as Istio's authz builder makes them, in
//! Istio's evaluation order: CUSTOM, then DENY, then ALLOW (AUDIT only logs).
//!
//! - A DENY filter denies what any of its policies' rules match.
//! - Once an ALLOW policy selects the workload, an ALLOW filter admits only what one of
//!   its rules matches: a policy without rules admits nothing, a rule `{}` everything.
//! - CUSTOM (an ext_authz provider from mesh config) is not built: its rules deny, as
//!   Istio fails closed on a provider it cannot use.
//!
//! The filters are the same on every port (rules name the ports they apply to); HTTP
//! chains get the HTTP filters, TCP chains the network ones ([`rules`] says what a TCP
//! chain cannot see, and how it fails closed).

mod ordered;
pub mod request_auth;
pub mod rules;

use crate::xds::util::any;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_filter,
};
use ordered::{HttpRbac, NetworkRbac, OrderedRbac, PolicyEntry};
use prost::Message;
use rules::Translation;
use shoal_proto::config::security::AuthorizationPolicy;
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::security::Authorization;
use std::sync::Arc;

const HTTP_RBAC: &str = "envoy.filters.http.rbac";
const HCM: &str = "envoy.filters.network.http_connection_manager";
const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
const NETWORK_RBAC: &str = "envoy.filters.network.rbac";
const ALLOW: i32 = 0;
const DENY: i32 = 1;
const LOG: i32 = 2;

/// One RBAC config per action present, in evaluation order: (action, config).
fn configs(authz: &Authorization, http: bool) -> Vec<OrderedRbac> {
    let mut out = Vec::new();
    // CUSTOM without its provider fails closed: a DENY of what it names.
    let deny: Vec<_> = authz.custom.iter().chain(&authz.deny).collect();
    if !deny.is_empty() {
        out.push(rbac(DENY, &deny, Translation { deny: true, http }));
    }
    if !authz.allow.is_empty() {
        let allow: Vec<_> = authz.allow.iter().collect();
        out.push(rbac(ALLOW, &allow, Translation { deny: false, http }));
    }
    if !authz.audit.is_empty() {
        let audit: Vec<_> = authz.audit.iter().collect();
        out.push(rbac(LOG, &audit, Translation { deny: true, http }));
    }
    out
}

/// The policies' rules as one RBAC config, each rule named
/// `ns[<namespace>]-policy[<name>]-rule[<index>]` (Istio's names), in name order.
fn rbac(
    action: i32,
    policies: &[&Arc<NamedConfig<AuthorizationPolicy>>],
    t: Translation,
) -> OrderedRbac {
    let mut entries: Vec<PolicyEntry> = policies
        .iter()
        .flat_map(|p| {
            p.spec
                .rules
                .iter()
                .enumerate()
                .filter_map(move |(i, rule)| {
                    rules::policy(rule, t).map(|value| PolicyEntry {
                        key: format!("ns[{}]-policy[{}]-rule[{i}]", p.namespace, p.name),
                        value: Some(value),
                    })
                })
        })
        .collect();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    OrderedRbac {
        action,
        policies: entries,
    }
}

/// The RBAC HTTP filters of a workload under `authz` (none without policies).
pub fn http_filters(authz: &Authorization) -> Vec<HttpFilter> {
    configs(authz, true)
        .into_iter()
        .map(|rules| HttpFilter {
            name: HTTP_RBAC.into(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&HttpRbac {
                rules: Some(rules),
                rules_stat_prefix: String::new(),
            }))),
            ..Default::default()
        })
        .collect()
}

/// The RBAC network filters of a workload's TCP chains under `authz`.
pub fn network_filters(authz: &Authorization) -> Vec<Filter> {
    configs(authz, false)
        .into_iter()
        .map(|rules| Filter {
            name: NETWORK_RBAC.into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&NetworkRbac {
                rules: Some(rules),
                stat_prefix: "tcp.".into(),
            }))),
        })
        .collect()
}

/// Puts `authz`'s filters in front of chains built without them (a gateway's): before
/// the HTTP filters of each connection manager (after `authn`, RequestAuthentication's
/// `jwt_authn`, whose payload they match), before each TCP proxy.
pub fn guard_chains(chains: &mut [FilterChain], authz: &Authorization, authn: Option<&HttpFilter>) {
    if authz.is_empty() && authn.is_none() {
        return;
    }
    let network = network_filters(authz);
    let http: Vec<HttpFilter> = authn
        .cloned()
        .into_iter()
        .chain(http_filters(authz))
        .collect();
    for chain in chains {
        let mut guarded = Vec::with_capacity(chain.filters.len() + network.len());
        for mut f in std::mem::take(&mut chain.filters) {
            match f.name.as_str() {
                HCM => {
                    if let Some(filter::ConfigType::TypedConfig(cfg)) = &mut f.config_type
                        && let Ok(mut hcm) = HttpConnectionManager::decode(cfg.value.as_slice())
                    {
                        hcm.http_filters.splice(0..0, http.iter().cloned());
                        *cfg = any(&hcm);
                    }
                }
                TCP_PROXY => guarded.extend(network.iter().cloned()),
                _ => {}
            }
            guarded.push(f);
        }
        chain.filters = guarded;
    }
}

#[cfg(test)]
mod tests;
