//! VirtualService HTTP routes → Envoy routes (Istio's `TranslateRoute`).

use super::matching::route_match;
use super::prefix_match;
use super::retry::retry_policy;
use crate::xds::listeners::single_port;
use crate::xds::util::{cluster_name, duration, parse_duration, u32_value};
use envoy_types::pb::envoy::config::route::v3::{
    RedirectAction, Route, RouteAction, WeightedCluster, redirect_action, route, route_action,
    route_match, weighted_cluster,
};
use shoal_proto::config::istio::{
    ConsistentHashLb, Destination, HttpMatchRequest, HttpRedirect, HttpRoute, VirtualService,
};
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::SidecarScope;
use shoal_proto::push_context::policy;
use std::collections::BTreeMap;
use std::time::Duration;

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
