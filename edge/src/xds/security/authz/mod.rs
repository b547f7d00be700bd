//! AuthorizationPolicy as Envoy's RBAC filters, as Istio's authz builder makes them, in
//! Istio's evaluation order: CUSTOM, then DENY, then ALLOW (AUDIT only logs).
//!
//! - A DENY filter denies what any of its policies' rules match.
//! - Once an ALLOW policy selects the workload, an ALLOW filter admits only what one of
//!   its rules matches: a policy without rules admits nothing, a rule `{}` everything.
//! - CUSTOM asks the ext_authz provider of the mesh config that its policies name, for
//!   the requests their rules match ([`custom`]); with a provider it cannot use (not
//!   defined, broken, or several per workload) its rules deny, as Istio fails closed.
//!
//! The filters are the same on every port (rules name the ports they apply to); HTTP
//! chains get the HTTP filters, TCP chains the network ones ([`rules`] says what a TCP
//! chain cannot see, and how it fails closed).

pub mod custom;
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
use shoal_proto::push_context::security::ext_authz::ExtAuthzProvider;
use std::sync::Arc;

const HTTP_RBAC: &str = "envoy.filters.http.rbac";
const HCM: &str = "envoy.filters.network.http_connection_manager";
const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
const NETWORK_RBAC: &str = "envoy.filters.network.rbac";
const ALLOW: i32 = 0;
const DENY: i32 = 1;
const LOG: i32 = 2;
/// Istio's name suffix of a CUSTOM rule that denies because its provider is unusable.
const BAD_CUSTOM_SUFFIX: &str = "-deny-due-to-bad-CUSTOM-action";

/// One RBAC config per enforcing action present, in evaluation order. CUSTOM policies
/// whose provider cannot be used deny what their rules match (Istio fails closed).
fn configs(authz: &Authorization, http: bool) -> Vec<OrderedRbac> {
    let mut out = Vec::new();
    let failed_custom = match &authz.ext_authz {
        Some(Ok(_)) => &[][..],
        _ => &authz.custom[..],
    };
    if !failed_custom.is_empty() || !authz.deny.is_empty() {
        let t = Translation { deny: true, http };
        let mut rules = rbac(DENY, &authz.deny, t, "");
        let failed = rbac(DENY, failed_custom, t, BAD_CUSTOM_SUFFIX);
        rules.policies.extend(failed.policies);
        rules.policies.sort_by(|a, b| a.key.cmp(&b.key));
        out.push(rules);
    }
    if !authz.allow.is_empty() {
        out.push(rbac(
            ALLOW,
            &authz.allow,
            Translation { deny: false, http },
            "",
        ));
    }
    if !authz.audit.is_empty() {
        out.push(rbac(
            LOG,
            &authz.audit,
            Translation { deny: true, http },
            "",
        ));
    }
    out
}

/// The CUSTOM policies' rules with their usable provider, named for the ext_authz
/// filter (`istio-ext-authz-ns[…]-policy[…]-rule[…]`).
fn custom(authz: &Authorization, http: bool) -> Option<(OrderedRbac, &ExtAuthzProvider)> {
    let Some(Ok(provider)) = &authz.ext_authz else {
        return None;
    };
    let mut rules = rbac(DENY, &authz.custom, Translation { deny: true, http }, "");
    for rule in &mut rules.policies {
        rule.key = format!("{}-{}", custom::RULE_PREFIX, rule.key);
    }
    Some((rules, provider))
}

/// The policies' rules as one RBAC config, each rule named
/// `ns[<namespace>]-policy[<name>]-rule[<index>]<suffix>` (Istio's names), in name order.
fn rbac(
    action: i32,
    policies: &[Arc<NamedConfig<AuthorizationPolicy>>],
    t: Translation,
    suffix: &str,
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
                        key: format!("ns[{}]-policy[{}]-rule[{i}]{suffix}", p.namespace, p.name),
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

/// The HTTP filters of a workload under `authz` (none without policies): CUSTOM's
/// ext_authz, then the RBAC filters.
pub fn http_filters(authz: &Authorization) -> Vec<HttpFilter> {
    let custom = custom(authz, true).map(|(rules, provider)| custom::http_filters(rules, provider));
    let rbac = configs(authz, true).into_iter().map(|rules| HttpFilter {
        name: HTTP_RBAC.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&HttpRbac {
            rules: Some(rules),
            ..Default::default()
        }))),
        ..Default::default()
    });
    custom.into_iter().flatten().chain(rbac).collect()
}

/// The network filters of a workload's TCP chains under `authz`.
pub fn network_filters(authz: &Authorization) -> Vec<Filter> {
    let custom =
        custom(authz, false).map(|(rules, provider)| custom::network_filters(rules, provider));
    let rbac = configs(authz, false).into_iter().map(|rules| Filter {
        name: NETWORK_RBAC.into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&NetworkRbac {
            rules: Some(rules),
            stat_prefix: "tcp.".into(),
            ..Default::default()
        }))),
    });
    custom.into_iter().flatten().chain(rbac).collect()
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
