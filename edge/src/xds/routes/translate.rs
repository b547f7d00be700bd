//! VirtualService HTTP routes → Envoy routes (Istio's `TranslateRoute`).

use super::super::listeners::single_port;
use super::super::policy;
use super::super::util::{any, cluster_name, duration, parse_duration, u32_value};
use super::prefix_match;
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RedirectAction, RetryPolicy, Route, RouteAction,
    RouteMatch, WeightedCluster, header_matcher, query_parameter_matcher, redirect_action,
    retry_policy as retry, route, route_action, route_match, weighted_cluster,
};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::{
    ConsistentHashLb, Destination, HttpMatchRequest, HttpRedirect, HttpRetry, HttpRoute,
    StringMatch, VirtualService,
};
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::SidecarScope;
use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Istio's default `retryOn` for outbound routes.
pub const DEFAULT_RETRY_ON: &str =
    "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes";
const DEFAULT_ATTEMPTS: u32 = 2;

/// The routes a VirtualService contributes on `port`, in order, up to and including the
/// first catch-all (nothing after it could match).
pub fn virtual_service_routes(
    scope: &SidecarScope,
    vs: &NamedConfig<VirtualService>,
    port: u32,
    labels: &BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> Vec<Route> {
    let mut out = Vec::new();
    let mut ctx = Context {
        scope,
        vs,
        port,
        warnings,
    };
    for http in &vs.spec.http {
        if http.matches.is_empty() {
            out.extend(ctx.translate(http, None));
            break;
        }
        let mut catch_all = false;
        for m in http
            .matches
            .iter()
            .filter(|m| applies(m, port, labels, &scope.namespace))
        {
            if let Some(r) = ctx.translate(http, Some(m)) {
                catch_all = is_catch_all(&r);
                out.push(r);
                if catch_all {
                    break;
                }
            }
        }
        if catch_all {
            break;
        }
    }
    out
}

/// Whether a match condition can apply to this proxy's traffic on `port`.
fn applies(m: &HttpMatchRequest, port: u32, labels: &BTreeMap<String, String>, ns: &str) -> bool {
    if m.port.is_some_and(|p| p != port) {
        return false;
    }
    if !m.gateways.is_empty() {
        return m.gateways.iter().any(|g| g == "mesh");
    }
    m.source_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && (m.source_namespace.is_empty() || m.source_namespace == ns)
}

/// A route that matches every request: `/` (or `.*`) with no header or query conditions.
fn is_catch_all(r: &Route) -> bool {
    let Some(m) = &r.r#match else { return false };
    let everything = match &m.path_specifier {
        Some(route_match::PathSpecifier::Prefix(p)) => p == "/",
        Some(route_match::PathSpecifier::SafeRegex(re)) => re.regex == ".*",
        _ => false,
    };
    everything && m.headers.is_empty() && m.query_parameters.is_empty()
}

struct Context<'a> {
    scope: &'a SidecarScope,
    vs: &'a NamedConfig<VirtualService>,
    port: u32,
    warnings: &'a mut Vec<String>,
}

impl Context<'_> {
    fn warn(&mut self, what: String) {
        self.warnings.push(format!(
            "VirtualService {}/{}: {what}",
            self.vs.namespace, self.vs.name
        ));
    }

    /// One Envoy route for (`http`, `m`); `None` when it cannot be expressed, which drops
    /// this route rather than have Envoy reject the whole configuration.
    fn translate(&mut self, http: &HttpRoute, m: Option<&HttpMatchRequest>) -> Option<Route> {
        let name = match m {
            Some(m) if !m.name.is_empty() => format!("{}.{}", http.name, m.name),
            _ => http.name.clone(),
        };
        let r#match = match m {
            Some(m) => match route_match(m) {
                Ok(rm) => rm,
                Err(bad) => {
                    self.warn(format!(
                        "route {name:?}: invalid regex {bad:?}, route skipped"
                    ));
                    return None;
                }
            },
            None => prefix_match("/"),
        };
        let action = match &http.redirect {
            Some(redirect) => route::Action::Redirect(self.redirect(redirect, &name)?),
            None => route::Action::Route(self.route_action(http, &name)?),
        };
        Some(Route {
            name,
            r#match: Some(r#match),
            action: Some(action),
            ..Default::default()
        })
    }

    fn redirect(&mut self, r: &HttpRedirect, route: &str) -> Option<RedirectAction> {
        use redirect_action::RedirectResponseCode as Code;
        let code = match r.redirect_code {
            0 | 301 => Code::MovedPermanently,
            302 => Code::Found,
            303 => Code::SeeOther,
            307 => Code::TemporaryRedirect,
            308 => Code::PermanentRedirect,
            other => {
                self.warn(format!(
                    "route {route:?}: unsupported redirect code {other}"
                ));
                return None;
            }
        };
        Some(RedirectAction {
            host_redirect: r.authority.clone(),
            path_rewrite_specifier: (!r.uri.is_empty())
                .then(|| redirect_action::PathRewriteSpecifier::PathRedirect(r.uri.clone())),
            response_code: code as i32,
            ..Default::default()
        })
    }

    /// The port traffic to a destination goes to: its own, else the service's only port,
    /// else the listener's.
    fn dest_port(&self, d: &Destination) -> u32 {
        d.port
            .as_ref()
            .map(|p| p.number)
            .or_else(|| single_port(self.scope, &d.host))
            .unwrap_or(self.port)
    }

    /// The cluster a destination resolves to.
    fn cluster(&mut self, d: &Destination) -> String {
        let port = self.dest_port(d);
        if !d.subset.is_empty() && self.scope.has_host(&d.host) {
            let defined = self
                .scope
                .destination_rule(&d.host)
                .is_some_and(|r| r.spec.subsets.iter().any(|s| s.name == d.subset));
            if !defined {
                self.warn(format!(
                    "subset {:?} of {} is not defined by any DestinationRule (requests to it will fail with 503)",
                    d.subset, d.host
                ));
            }
        }
        cluster_name(port, &d.subset, &d.host)
    }

    /// The consistent hash a destination's DestinationRule asks for.
    fn hash(&self, d: &Destination) -> Option<&ConsistentHashLb> {
        let rule = &self.scope.destination_rule(&d.host)?.spec;
        let subset = rule.subsets.iter().find(|s| s.name == d.subset);
        policy::effective(Some(rule), subset, self.dest_port(d)).consistent_hash()
    }

    fn route_action(&mut self, http: &HttpRoute, route: &str) -> Option<RouteAction> {
        let mut action = RouteAction {
            // Istio's default is no timeout (0 disables Envoy's 15 s default).
            timeout: Some(
                parse_duration(http.timeout.as_deref()).unwrap_or_else(|| duration(Duration::ZERO)),
            ),
            ..Default::default()
        };
        let mut consistent_hash = false;
        match http.route.as_slice() {
            [] => {
                self.warn(format!("route {route:?} has no destination, route skipped"));
                return None;
            }
            // A single destination takes all traffic, whatever its weight says.
            [only] => {
                action.cluster_specifier = Some(route_action::ClusterSpecifier::Cluster(
                    self.cluster(&only.destination),
                ));
                consistent_hash = self.hash(&only.destination).is_some();
            }
            many => {
                let mut clusters: Vec<_> = many
                    .iter()
                    .filter(|d| d.weight > 0)
                    .map(|d| (&d.destination, u32::try_from(d.weight).unwrap_or(0)))
                    .collect();
                if clusters.is_empty() {
                    // All weights zero is an invalid split: spread evenly rather than
                    // give Envoy a total weight of zero.
                    clusters = many.iter().map(|d| (&d.destination, 1)).collect();
                }
                let clusters = clusters
                    .into_iter()
                    .map(|(d, weight)| weighted_cluster::ClusterWeight {
                        name: self.cluster(d),
                        weight: Some(u32_value(weight)),
                        ..Default::default()
                    })
                    .collect();
                action.cluster_specifier = Some(route_action::ClusterSpecifier::WeightedClusters(
                    WeightedCluster {
                        clusters,
                        ..Default::default()
                    },
                ));
            }
        }
        for d in &http.route {
            if let Some(hp) = self.hash(&d.destination).and_then(hash_policy)
                && !action.hash_policy.contains(&hp)
            {
                action.hash_policy.push(hp);
            }
        }
        action.retry_policy = retry_policy(http.retries.as_ref(), consistent_hash);
        if let Some(rw) = &http.rewrite {
            if !rw.uri.is_empty() {
                action.prefix_rewrite = rw.uri.clone();
            }
            if !rw.authority.is_empty() {
                action.host_rewrite_specifier = Some(
                    route_action::HostRewriteSpecifier::HostRewriteLiteral(rw.authority.clone()),
                );
            }
        }
        Some(action)
    }
}

/// Istio's `TranslateRouteMatch`. Fails with the offending pattern when a regex would not
/// compile (RE2 and Rust's `regex` accept the same syntax: no backreferences, no
/// lookaround).
pub fn route_match(m: &HttpMatchRequest) -> Result<RouteMatch, String> {
    let mut out = RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
        case_sensitive: Some(BoolValue {
            value: !m.ignore_uri_case,
        }),
        ..Default::default()
    };
    for (name, sm) in &m.headers {
        out.headers.push(header(name, sm)?);
    }
    for (name, sm) in &m.without_headers {
        let mut h = header(name, sm)?;
        h.invert_match = true;
        // A missing header then counts as not matching the excluded value.
        h.treat_missing_header_as_empty = !is_present_match(sm);
        out.headers.push(h);
    }
    out.headers.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(uri) = &m.uri {
        out.path_specifier = Some(if let Some(exact) = &uri.exact {
            route_match::PathSpecifier::Path(exact.clone())
        } else if let Some(prefix) = &uri.prefix {
            route_match::PathSpecifier::Prefix(prefix.clone())
        } else if let Some(re) = &uri.regex {
            route_match::PathSpecifier::SafeRegex(regex(re)?)
        } else {
            route_match::PathSpecifier::Prefix("/".into())
        });
    }
    for (name, sm) in [
        (":method", &m.method),
        (":authority", &m.authority),
        (":scheme", &m.scheme),
    ] {
        if let Some(sm) = sm {
            out.headers.push(header(name, sm)?);
        }
    }
    for (name, sm) in &m.query_params {
        let specifier = match string_matcher(sm)? {
            Some(s) => query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(s),
            None => query_parameter_matcher::QueryParameterMatchSpecifier::PresentMatch(true),
        };
        out.query_parameters.push(QueryParameterMatcher {
            name: name.clone(),
            query_parameter_match_specifier: Some(specifier),
        });
    }
    Ok(out)
}

/// Istio reads an empty match, or the regex `*`, as "present".
fn is_present_match(sm: &StringMatch) -> bool {
    sm.regex.as_deref() == Some("*")
        || (sm.exact.is_none() && sm.prefix.is_none() && sm.regex.is_none())
}

/// Whether `re` compiles, memoized: every scope's build checks the same few patterns,
/// and compiling one costs tens of microseconds.
fn regex_compiles(re: &str) -> bool {
    static CHECKED: LazyLock<Mutex<HashMap<String, bool>>> = LazyLock::new(Default::default);
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ok) = checked.get(re) {
        return *ok;
    }
    if checked.len() >= 4096 {
        checked.clear();
    }
    let ok = regex::Regex::new(re).is_ok();
    checked.insert(re.to_string(), ok);
    ok
}

fn regex(re: &str) -> Result<RegexMatcher, String> {
    if !regex_compiles(re) {
        return Err(re.to_string());
    }
    Ok(RegexMatcher {
        regex: re.to_string(),
        ..Default::default()
    })
}

fn string_matcher(sm: &StringMatch) -> Result<Option<StringMatcher>, String> {
    if is_present_match(sm) {
        return Ok(None);
    }
    let pattern = if let Some(exact) = &sm.exact {
        string_matcher::MatchPattern::Exact(exact.clone())
    } else if let Some(prefix) = &sm.prefix {
        string_matcher::MatchPattern::Prefix(prefix.clone())
    } else if let Some(re) = &sm.regex {
        string_matcher::MatchPattern::SafeRegex(regex(re)?)
    } else {
        return Ok(None);
    };
    Ok(Some(StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    }))
}

fn header(name: &str, sm: &StringMatch) -> Result<HeaderMatcher, String> {
    let specifier = match string_matcher(sm)? {
        Some(s) => header_matcher::HeaderMatchSpecifier::StringMatch(s),
        None => header_matcher::HeaderMatchSpecifier::PresentMatch(true),
    };
    Ok(HeaderMatcher {
        name: name.to_string(),
        header_match_specifier: Some(specifier),
        ..Default::default()
    })
}

/// Istio's `ConvertPolicy`. No policy: 2 attempts on connection-level failures, trying
/// another host each time (unless hashing, where the host is the point). `attempts: 0`
/// disables retries.
pub fn retry_policy(r: Option<&HttpRetry>, consistent_hash: bool) -> Option<RetryPolicy> {
    let mut out = RetryPolicy {
        retry_on: DEFAULT_RETRY_ON.into(),
        num_retries: Some(u32_value(DEFAULT_ATTEMPTS)),
        host_selection_retry_max_attempts: 5,
        ..Default::default()
    };
    if !consistent_hash {
        out.retry_host_predicate.push(retry::RetryHostPredicate {
            name: "envoy.retry_host_predicates.previous_hosts".into(),
            config_type: Some(retry::retry_host_predicate::ConfigType::TypedConfig(any(
                &PreviousHostsPredicate::default(),
            ))),
        });
    }
    let Some(r) = r else { return Some(out) };
    let attempts = u32::try_from(r.attempts).ok().filter(|a| *a > 0)?;
    out.num_retries = Some(u32_value(attempts));
    if !r.retry_on.is_empty() {
        let (on, codes) = parse_retry_on(&r.retry_on);
        out.retry_on = on;
        out.retriable_status_codes = codes;
    }
    out.per_try_timeout = parse_duration(r.per_try_timeout.as_deref());
    Some(out)
}

/// Splits Istio's `retryOn`: numbers are status codes, which need Envoy's
/// `retriable-status-codes` condition.
fn parse_retry_on(s: &str) -> (String, Vec<u32>) {
    let mut on = Vec::new();
    let mut codes = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<u32>() {
            Ok(code) => codes.push(code),
            Err(_) => on.push(part.to_string()),
        }
    }
    if !codes.is_empty() && !on.iter().any(|p| p == "retriable-status-codes") {
        on.push("retriable-status-codes".into());
    }
    (on.join(","), codes)
}

/// Istio's `ConsistentHashToHashPolicy`.
pub fn hash_policy(h: &ConsistentHashLb) -> Option<route_action::HashPolicy> {
    use route_action::hash_policy::{self, PolicySpecifier};
    let specifier = if let Some(header) = &h.http_header_name {
        PolicySpecifier::Header(hash_policy::Header {
            header_name: header.clone(),
            ..Default::default()
        })
    } else if h.use_source_ip == Some(true) {
        PolicySpecifier::ConnectionProperties(hash_policy::ConnectionProperties { source_ip: true })
    } else if let Some(name) = &h.http_query_parameter_name {
        PolicySpecifier::QueryParameter(hash_policy::QueryParameter { name: name.clone() })
    } else {
        return None;
    };
    Some(route_action::HashPolicy {
        policy_specifier: Some(specifier),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_on_splits_status_codes() {
        assert_eq!(
            parse_retry_on("5xx, 503,gateway-error"),
            (
                "5xx,gateway-error,retriable-status-codes".to_string(),
                vec![503]
            )
        );
        assert_eq!(parse_retry_on("reset"), ("reset".to_string(), vec![]));
    }

    #[test]
    fn retry_defaults_and_disable() {
        let d = retry_policy(None, false).unwrap();
        assert_eq!(d.retry_on, DEFAULT_RETRY_ON);
        assert_eq!(d.num_retries.unwrap().value, 2);
        assert_eq!(d.retry_host_predicate.len(), 1);
        assert!(
            retry_policy(None, true)
                .unwrap()
                .retry_host_predicate
                .is_empty()
        );
        let off = HttpRetry::default();
        assert_eq!(retry_policy(Some(&off), false), None);
    }

    #[test]
    fn bad_regex_is_reported() {
        let m = HttpMatchRequest {
            uri: Some(StringMatch {
                regex: Some("(unclosed".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(route_match(&m), Err("(unclosed".to_string()));
    }
}
