//! One AuthorizationPolicy rule as an Envoy RBAC `Policy`, as Istio's authz builder
//! makes it: the rule matches when one `from`, one `to` and every `when` match, so the
//! Envoy policy's principals are the `from`s (each the AND of its fields, each field the
//! OR of its values, `not*` negated) and its permissions the `to`s, each ANDed with the
//! `when` conditions of its side.
//!
//! Values: `*` matches any non-empty value, `prefix*` and `*suffix` as written, else
//! exact. Principals are SPIFFE IDs without the scheme (`cluster.local/ns/x/sa/y`).
//!
//! On a TCP chain the request's fields (hosts, methods, paths, request headers, request
//! principals, JWT claims) cannot be seen. As Istio: a rule using one is dropped from an
//! ALLOW policy (it can never match) and the field is dropped from a DENY policy (it then
//! denies more): both fail closed. On HTTP chains request principals and JWT claims
//! match the payload RequestAuthentication's `jwt_authn` verified ([`request_auth`]).

use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::rbac::v3::{
    Permission, Policy, Principal, permission, principal,
};
use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, header_matcher};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    PathMatcher, RegexMatcher, StringMatcher, path_matcher, string_matcher,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use shoal_proto::config::security::{AuthorizationRule, Condition, Operation, Source};

use super::request_auth;

/// Whether rules become an ALLOW-like (fail closed by matching less) or a DENY-like
/// (fail closed by matching more) policy, and for which chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    pub deny: bool,
    pub http: bool,
}

/// The rule as an Envoy policy; `None` when it can never match on this chain.
pub fn policy(rule: &AuthorizationRule, t: Translation) -> Option<Policy> {
    let mut principals = Vec::new();
    for from in &rule.from {
        let source = from.source.clone().unwrap_or_default();
        principals.push(and_principals_or_any(source_ids(&source, t)));
    }
    let mut when_ids = Vec::new();
    let mut when_rules = Vec::new();
    for c in &rule.when {
        // A condition this chain cannot see: the ALLOW rule never matches, the DENY rule
        // denies without it.
        if !t.deny && !visible(&c.key, t) {
            return None;
        }
        match condition(c, t) {
            Some(Side::Principal(p)) => when_ids.push(p),
            Some(Side::Permission(p)) => when_rules.push(p),
            None => {}
        }
    }
    let mut permissions = Vec::new();
    for to in &rule.to {
        let operation = to.operation.clone().unwrap_or_default();
        permissions.push(and_permissions_or_any(operation_rules(&operation, t)));
    }
    if permissions.is_empty() {
        permissions.push(any_permission());
    }
    if principals.is_empty() {
        principals.push(any_principal());
    }
    if !when_rules.is_empty() {
        permissions = permissions
            .into_iter()
            .map(|p| {
                and_permissions(
                    std::iter::once(p)
                        .chain(when_rules.iter().cloned())
                        .collect(),
                )
            })
            .collect();
    }
    if !when_ids.is_empty() {
        principals = principals
            .into_iter()
            .map(|p| and_principals(std::iter::once(p).chain(when_ids.iter().cloned()).collect()))
            .collect();
    }
    Some(Policy {
        permissions,
        principals,
        ..Default::default()
    })
}

/// The AND of a source's fields (none: any peer).
fn and_principals_or_any(ids: Vec<Principal>) -> Principal {
    if ids.is_empty() {
        any_principal()
    } else {
        and_principals(ids)
    }
}

/// The AND of an operation's fields (none: any request).
fn and_permissions_or_any(rules: Vec<Permission>) -> Permission {
    if rules.is_empty() {
        any_permission()
    } else {
        and_permissions(rules)
    }
}

/// Whether a `when` key (or a field of that kind) can be seen on this chain.
fn visible(key: &str, t: Translation) -> bool {
    !key.starts_with("request.") || t.http
}

fn source_ids(s: &Source, t: Translation) -> Vec<Principal> {
    let mut out = Vec::new();
    let mut field = |values: &[String], negate: bool, id: &dyn Fn(&str) -> Principal| {
        if values.is_empty() {
            return;
        }
        let p = or_principals(values.iter().map(|v| id(v)).collect());
        out.push(if negate { not_principal(p) } else { p });
    };
    field(&s.principals, false, &|v| authenticated(v));
    field(&s.not_principals, true, &|v| authenticated(v));
    field(&s.namespaces, false, &namespace_id);
    field(&s.not_namespaces, true, &namespace_id);
    field(&s.service_accounts, false, &service_account_id);
    field(&s.not_service_accounts, true, &service_account_id);
    field(&s.ip_blocks, false, &|v| Principal {
        identifier: Some(principal::Identifier::DirectRemoteIp(cidr(v))),
    });
    field(&s.not_ip_blocks, true, &|v| Principal {
        identifier: Some(principal::Identifier::DirectRemoteIp(cidr(v))),
    });
    field(&s.remote_ip_blocks, false, &|v| Principal {
        identifier: Some(principal::Identifier::RemoteIp(cidr(v))),
    });
    field(&s.not_remote_ip_blocks, true, &|v| Principal {
        identifier: Some(principal::Identifier::RemoteIp(cidr(v))),
    });
    let jwt = !s.request_principals.is_empty() || !s.not_request_principals.is_empty();
    if t.http {
        field(
            &s.request_principals,
            false,
            &request_auth::request_principal,
        );
        field(
            &s.not_request_principals,
            true,
            &request_auth::request_principal,
        );
    }
    // Request principals cannot be seen on TCP, trust domains are not modelled: an ALLOW
    // source naming them never matches; a DENY source ignores them.
    let trust = !s.trust_domains.is_empty() || !s.not_trust_domains.is_empty();
    if ((jwt && !t.http) || trust) && !t.deny {
        out.push(not_principal(any_principal()));
    }
    out
}

fn operation_rules(o: &Operation, t: Translation) -> Vec<Permission> {
    let mut out = Vec::new();
    let http_fields = !o.hosts.is_empty()
        || !o.not_hosts.is_empty()
        || !o.methods.is_empty()
        || !o.not_methods.is_empty()
        || !o.paths.is_empty()
        || !o.not_paths.is_empty();
    if http_fields && !t.http && !t.deny {
        // Never matches on TCP: an ALLOW rule that needs the request.
        out.push(not_permission(any_permission()));
        return out;
    }
    let mut field = |values: &[String], negate: bool, rule: &dyn Fn(&str) -> Option<Permission>| {
        let rules: Vec<Permission> = values.iter().filter_map(|v| rule(v)).collect();
        if rules.is_empty() {
            return;
        }
        let p = or_permissions(rules);
        out.push(if negate { not_permission(p) } else { p });
    };
    field(&o.ports, false, &port);
    field(&o.not_ports, true, &port);
    if t.http {
        field(&o.hosts, false, &|v| Some(header(":authority", v, true)));
        field(&o.not_hosts, true, &|v| Some(header(":authority", v, true)));
        field(&o.methods, false, &|v| Some(header(":method", v, false)));
        field(&o.not_methods, true, &|v| Some(header(":method", v, false)));
        field(&o.paths, false, &|v| Some(path(v)));
        field(&o.not_paths, true, &|v| Some(path(v)));
    }
    out
}

enum Side {
    Principal(Principal),
    Permission(Permission),
}

/// A `when` condition on the side of the policy its attribute belongs to; `None` when
/// this chain cannot see it (the caller has dropped an ALLOW rule already).
fn condition(c: &Condition, t: Translation) -> Option<Side> {
    if !visible(&c.key, t) {
        return None;
    }
    let key = c.key.as_str();
    let both = |one: &dyn Fn(&str) -> Side| -> Option<Side> {
        let sides: Vec<Side> = c.values.iter().map(|v| one(v)).collect();
        let nots: Vec<Side> = c.not_values.iter().map(|v| one(v)).collect();
        combine(sides, nots)
    };
    let header_name = key
        .strip_prefix("request.headers[")
        .and_then(|k| k.strip_suffix(']'));
    match key {
        _ if header_name.is_some() => {
            let name = header_name.unwrap_or_default().to_string();
            both(&|v| Side::Permission(header(&name, v, false)))
        }
        "source.ip" => both(&|v| {
            Side::Principal(Principal {
                identifier: Some(principal::Identifier::DirectRemoteIp(cidr(v))),
            })
        }),
        "remote.ip" => both(&|v| {
            Side::Principal(Principal {
                identifier: Some(principal::Identifier::RemoteIp(cidr(v))),
            })
        }),
        "request.auth.principal" => both(&|v| Side::Principal(request_auth::request_principal(v))),
        _ if key.starts_with("request.auth.") => match request_auth::claim_path(key) {
            Some(path) => {
                both(&|v| Side::Principal(request_auth::claim_is(&path, string_match(v, false))))
            }
            // A key naming no claim (validation refuses it) fails closed.
            None => Some(Side::Permission(not_permission(any_permission()))),
        },
        "source.namespace" => both(&|v| Side::Principal(namespace_id(v))),
        "source.principal" => both(&|v| Side::Principal(authenticated(v))),
        "source.serviceAccount" => both(&|v| Side::Principal(service_account_id(v))),
        "destination.ip" => both(&|v| {
            Side::Permission(Permission {
                rule: Some(permission::Rule::DestinationIp(cidr(v))),
            })
        }),
        "destination.port" => {
            both(&|v| Side::Permission(port(v).unwrap_or_else(|| not_permission(any_permission()))))
        }
        "connection.sni" => both(&|v| {
            Side::Permission(Permission {
                rule: Some(permission::Rule::RequestedServerName(string_match(
                    v, false,
                ))),
            })
        }),
        // Validation refuses keys Istio does not support; anything else fails closed.
        _ => Some(Side::Permission(not_permission(any_permission()))),
    }
}

/// `values` ORed, `not_values` each negated, all ANDed (on one side: one attribute).
fn combine(values: Vec<Side>, not_values: Vec<Side>) -> Option<Side> {
    let principal = matches!(values.first().or(not_values.first())?, Side::Principal(_));
    if principal {
        let ids = |v: Vec<Side>| -> Vec<Principal> {
            v.into_iter()
                .filter_map(|s| match s {
                    Side::Principal(p) => Some(p),
                    Side::Permission(_) => None,
                })
                .collect()
        };
        let mut parts = Vec::new();
        let (yes, no) = (ids(values), ids(not_values));
        if !yes.is_empty() {
            parts.push(or_principals(yes));
        }
        if !no.is_empty() {
            parts.push(not_principal(or_principals(no)));
        }
        Some(Side::Principal(and_principals(parts)))
    } else {
        let rules = |v: Vec<Side>| -> Vec<Permission> {
            v.into_iter()
                .filter_map(|s| match s {
                    Side::Permission(p) => Some(p),
                    Side::Principal(_) => None,
                })
                .collect()
        };
        let mut parts = Vec::new();
        let (yes, no) = (rules(values), rules(not_values));
        if !yes.is_empty() {
            parts.push(or_permissions(yes));
        }
        if !no.is_empty() {
            parts.push(not_permission(or_permissions(no)));
        }
        Some(Side::Permission(and_permissions(parts)))
    }
}

/// `*`, `prefix*`, `*suffix` or exact, as a string matcher.
pub(super) fn string_match(value: &str, ignore_case: bool) -> StringMatcher {
    use string_matcher::MatchPattern;
    let pattern = if value == "*" {
        MatchPattern::SafeRegex(RegexMatcher {
            regex: ".+".into(),
            ..Default::default()
        })
    } else if let Some(prefix) = value.strip_suffix('*') {
        MatchPattern::Prefix(prefix.into())
    } else if let Some(suffix) = value.strip_prefix('*') {
        MatchPattern::Suffix(suffix.into())
    } else {
        MatchPattern::Exact(value.into())
    };
    StringMatcher {
        match_pattern: Some(pattern),
        ignore_case,
    }
}

/// A peer whose certificate names `principal` (`spiffe://` added).
fn authenticated(principal: &str) -> Principal {
    let spiffe = if principal == "*" {
        "*".to_string()
    } else {
        format!("spiffe://{principal}")
    };
    Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(string_match(&spiffe, false)),
            },
        )),
    }
}

fn regex_principal(regex: String) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Authenticated(
            principal::Authenticated {
                principal_name: Some(StringMatcher {
                    match_pattern: Some(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
                        regex,
                        ..Default::default()
                    })),
                    ignore_case: false,
                }),
            },
        )),
    }
}

/// A peer of namespace `ns` (a `*` wildcard as in values).
fn namespace_id(ns: &str) -> Principal {
    let ns = wildcard_regex(ns);
    regex_principal(format!("spiffe://[^/]+/ns/{ns}/sa/[^/]+"))
}

/// A peer of service account `namespace/name`.
fn service_account_id(value: &str) -> Principal {
    let (ns, sa) = value.split_once('/').unwrap_or(("[^/]+", value));
    regex_principal(format!(
        "spiffe://[^/]+/ns/{}/sa/{}",
        wildcard_regex(ns),
        wildcard_regex(sa)
    ))
}

/// A value with Istio's `*` wildcards as a regex fragment (the rest quoted).
fn wildcard_regex(value: &str) -> String {
    if value == "[^/]+" {
        return value.to_string();
    }
    value
        .split('*')
        .map(regex_quote)
        .collect::<Vec<_>>()
        .join("[^/]*")
}

fn regex_quote(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn header(name: &str, value: &str, ignore_case: bool) -> Permission {
    Permission {
        rule: Some(permission::Rule::Header(HeaderMatcher {
            name: name.into(),
            header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(
                string_match(value, ignore_case),
            )),
            ..Default::default()
        })),
    }
}

fn path(value: &str) -> Permission {
    Permission {
        rule: Some(permission::Rule::UrlPath(PathMatcher {
            rule: Some(path_matcher::Rule::Path(string_match(value, false))),
        })),
    }
}

fn port(value: &str) -> Option<Permission> {
    value.parse::<u32>().ok().map(|p| Permission {
        rule: Some(permission::Rule::DestinationPort(p)),
    })
}

/// An IP or CIDR; an unparsable one (validation refuses them) matches nothing.
fn cidr(value: &str) -> CidrRange {
    let (ip, len) = match value.split_once('/') {
        Some((ip, len)) => (ip, len.parse().ok()),
        None => (value, None),
    };
    let len = len.unwrap_or(if ip.contains(':') { 128 } else { 32 });
    CidrRange {
        address_prefix: ip.into(),
        prefix_len: Some(UInt32Value { value: len }),
    }
}

pub fn any_permission() -> Permission {
    Permission {
        rule: Some(permission::Rule::Any(true)),
    }
}

pub fn any_principal() -> Principal {
    Principal {
        identifier: Some(principal::Identifier::Any(true)),
    }
}

fn not_permission(p: Permission) -> Permission {
    Permission {
        rule: Some(permission::Rule::NotRule(Box::new(p))),
    }
}

fn not_principal(p: Principal) -> Principal {
    Principal {
        identifier: Some(principal::Identifier::NotId(Box::new(p))),
    }
}

fn and_permissions(mut rules: Vec<Permission>) -> Permission {
    if rules.len() == 1 {
        return rules.pop().unwrap_or_else(any_permission);
    }
    Permission {
        rule: Some(permission::Rule::AndRules(permission::Set { rules })),
    }
}

fn or_permissions(mut rules: Vec<Permission>) -> Permission {
    if rules.len() == 1 {
        return rules.pop().unwrap_or_else(any_permission);
    }
    Permission {
        rule: Some(permission::Rule::OrRules(permission::Set { rules })),
    }
}

fn and_principals(mut ids: Vec<Principal>) -> Principal {
    if ids.len() == 1 {
        return ids.pop().unwrap_or_else(any_principal);
    }
    Principal {
        identifier: Some(principal::Identifier::AndIds(principal::Set { ids })),
    }
}

fn or_principals(mut ids: Vec<Principal>) -> Principal {
    if ids.len() == 1 {
        return ids.pop().unwrap_or_else(any_principal);
    }
    Principal {
        identifier: Some(principal::Identifier::OrIds(principal::Set { ids })),
    }
}
