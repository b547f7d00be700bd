//! VirtualService HTTP routes → Envoy routes (Istio's `TranslateRoute`).

use super::cors::{CORS_FILTER, cors_policy};
use super::fault::{FAULT_FILTER, http_fault};
use super::headers::{self, HeaderChanges};
use super::matching::route_match;
use super::mirror::{mirror_policy, mirrors};
use super::prefix_match;
use super::retry::retry_policy;
use crate::xds::listeners::single_port;
use crate::xds::util::{any, cluster_name, duration, parse_duration, u32_value};
use base64::Engine;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, RedirectAction, Route, RouteAction, WeightedCluster, redirect_action,
    route, route_action, route_match, weighted_cluster,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatchAndSubstitute, RegexMatcher};
use shoal_proto::config::istio::{
    ConsistentHashLb, Destination, HttpDirectResponse, HttpMatchRequest, HttpRedirect, HttpRoute,
    VirtualService,
};
use shoal_proto::model::NamedConfig;
use shoal_proto::push_context::SidecarScope;
use shoal_proto::push_context::delegate::merge_delegate;
use shoal_proto::push_context::gateway::names_gateway;
use shoal_proto::push_context::policy;
use std::collections::BTreeMap;
use std::time::Duration;

/// Which gateway the proxy is, for the `gateways` of route matches: a sidecar is the
/// `mesh` gateway, a router each Gateway it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding<'a> {
    Mesh,
    Gateway { namespace: &'a str, name: &'a str },
}

impl Binding<'_> {
    /// Whether `gateways`, written in a VirtualService of `vs_namespace`, name this one
    /// (a bare Gateway name is in the VirtualService's namespace).
    fn named_in(&self, gateways: &[String], vs_namespace: &str) -> bool {
        match self {
            Binding::Mesh => gateways.iter().any(|g| g == "mesh"),
            Binding::Gateway { namespace, name } => {
                names_gateway(gateways, vs_namespace, namespace, name)
            }
        }
    }
}

/// The routes a VirtualService contributes on `port`, in order, up to and including the
/// first catch-all (nothing after it could match).
pub fn virtual_service_routes(
    scope: &SidecarScope,
    vs: &NamedConfig<VirtualService>,
    port: u32,
    labels: &BTreeMap<String, String>,
    binding: Binding<'_>,
    warnings: &mut Vec<String>,
) -> Vec<Route> {
    let mut out = Vec::new();
    let mut ctx = Context {
        scope,
        vs,
        port,
        binding,
        warnings,
    };
    for root in &vs.spec.http {
        let Some(d) = &root.delegate else {
            if ctx.add(&mut out, root, labels) {
                return out;
            }
            continue;
        };
        let Some(child) = scope.delegate(&vs.namespace, d) else {
            ctx.warn(format!(
                "route {:?} delegates to {}/{}, which does not exist or is not exported to it: route skipped",
                root.name,
                if d.namespace.is_empty() { &vs.namespace } else { &d.namespace },
                d.name
            ));
            continue;
        };
        for http in merge_delegate(root, &child.spec.http) {
            if ctx.add(&mut out, &http, labels) {
                return out;
            }
        }
    }
    out
}

/// Whether a match condition can apply to this proxy's traffic on `port`: its gateways
/// (when it names any) include the proxy's, and the proxy's labels and namespace are
/// the source's.
fn applies(
    m: &HttpMatchRequest,
    port: u32,
    labels: &BTreeMap<String, String>,
    ns: &str,
    binding: Binding<'_>,
    vs_namespace: &str,
) -> bool {
    if m.port.is_some_and(|p| p != port) {
        return false;
    }
    if !m.gateways.is_empty() && !binding.named_in(&m.gateways, vs_namespace) {
        return false;
    }
    m.source_labels
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
        && (m.source_namespace.is_empty() || m.source_namespace == ns)
}

/// A route that matches every request: `/` (or `.*`) with no header or query conditions.
pub fn is_catch_all(r: &Route) -> bool {
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
    binding: Binding<'a>,
    warnings: &'a mut Vec<String>,
}

impl Context<'_> {
    fn warn(&mut self, what: String) {
        self.warnings.push(format!(
            "VirtualService {}/{}: {what}",
            self.vs.namespace, self.vs.name
        ));
    }

    /// Adds the Envoy routes of `http` to `out`; true once one matches every request
    /// (nothing after it could match).
    fn add(
        &mut self,
        out: &mut Vec<Route>,
        http: &HttpRoute,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        if http.matches.is_empty() {
            out.extend(self.translate(http, None));
            return true;
        }
        let (port, namespace) = (self.port, &self.scope.namespace);
        let (binding, vs_namespace) = (self.binding, self.vs.namespace.as_str());
        for m in http
            .matches
            .iter()
            .filter(|m| applies(m, port, labels, namespace, binding, vs_namespace))
        {
            if let Some(r) = self.translate(http, Some(m)) {
                let catch_all = is_catch_all(&r);
                out.push(r);
                if catch_all {
                    return true;
                }
            }
        }
        false
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
        let action = if let Some(redirect) = &http.redirect {
            route::Action::Redirect(self.redirect(redirect, &name)?)
        } else if let Some(direct) = &http.direct_response {
            route::Action::DirectResponse(direct_response(direct))
        } else {
            route::Action::Route(self.route_action(http, &name)?)
        };
        // A single destination's header operations apply to the whole route; those of
        // weighted destinations go on their cluster weights.
        let single = match http.route.as_slice() {
            [only] => only.headers.as_ref(),
            _ => None,
        };
        let (request, response) = headers::changes(http.headers.iter().chain(single));
        let mut route = Route {
            name,
            r#match: Some(r#match),
            action: Some(action),
            request_headers_to_add: request.add,
            request_headers_to_remove: request.remove,
            response_headers_to_add: response.add,
            response_headers_to_remove: response.remove,
            ..Default::default()
        };
        if let Some(fault) = &http.fault {
            route
                .typed_per_filter_config
                .insert(FAULT_FILTER.into(), any(&http_fault(fault)));
        }
        if let Some(cors) = &http.cors_policy {
            route
                .typed_per_filter_config
                .insert(CORS_FILTER.into(), any(&cors_policy(cors)));
        }
        Some(route)
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
            port_redirect: r.port.unwrap_or(0),
            scheme_rewrite_specifier: (!r.scheme.is_empty())
                .then(|| redirect_action::SchemeRewriteSpecifier::SchemeRedirect(r.scheme.clone())),
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
                    .map(|d| (d, u32::try_from(d.weight).unwrap_or(0)))
                    .collect();
                if clusters.is_empty() {
                    // All weights zero is an invalid split: spread evenly rather than
                    // give Envoy a total weight of zero.
                    clusters = many.iter().map(|d| (d, 1)).collect();
                }
                let clusters = clusters
                    .into_iter()
                    .map(|(d, weight)| {
                        let (request, response) = headers::changes(d.headers.iter());
                        let HeaderChanges { add, remove } = request;
                        weighted_cluster::ClusterWeight {
                            name: self.cluster(&d.destination),
                            weight: Some(u32_value(weight)),
                            request_headers_to_add: add,
                            request_headers_to_remove: remove,
                            response_headers_to_add: response.add,
                            response_headers_to_remove: response.remove,
                            ..Default::default()
                        }
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
        for (d, share) in mirrors(http) {
            let cluster = self.cluster(d);
            action
                .request_mirror_policies
                .push(mirror_policy(cluster, share));
        }
        if let Some(rw) = &http.rewrite {
            if !rw.uri.is_empty() {
                action.prefix_rewrite = rw.uri.clone();
            }
            if let Some(re) = &rw.uri_regex_rewrite {
                action.regex_rewrite = Some(RegexMatchAndSubstitute {
                    pattern: Some(RegexMatcher {
                        regex: re.pattern.clone(),
                        ..Default::default()
                    }),
                    substitution: re.rewrite.clone(),
                });
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

/// A fixed response, with its body inline.
fn direct_response(d: &HttpDirectResponse) -> DirectResponseAction {
    let body = d.body.as_ref().and_then(|b| {
        let specifier = match (&b.string, &b.bytes) {
            (Some(s), _) => data_source::Specifier::InlineString(s.clone()),
            (None, Some(bytes)) => data_source::Specifier::InlineBytes(
                base64::engine::general_purpose::STANDARD
                    .decode(bytes)
                    .unwrap_or_default(),
            ),
            (None, None) => return None,
        };
        Some(DataSource {
            specifier: Some(specifier),
            ..Default::default()
        })
    });
    DirectResponseAction {
        status: d.status,
        body,
        ..Default::default()
    }
}

/// Istio's `ConsistentHashToHashPolicy`. A cookie with a `ttl` is set by Envoy on the
/// first response when the request carries none, which is what makes it sticky.
pub fn hash_policy(h: &ConsistentHashLb) -> Option<route_action::HashPolicy> {
    use route_action::hash_policy::{self, PolicySpecifier};
    let specifier = if let Some(header) = &h.http_header_name {
        PolicySpecifier::Header(hash_policy::Header {
            header_name: header.clone(),
            ..Default::default()
        })
    } else if let Some(cookie) = &h.http_cookie {
        PolicySpecifier::Cookie(hash_policy::Cookie {
            name: cookie.name.clone(),
            ttl: parse_duration(cookie.ttl.as_deref()),
            path: cookie.path.clone(),
            attributes: cookie
                .attributes
                .iter()
                .map(|a| hash_policy::CookieAttribute {
                    name: a.name.clone(),
                    value: a.value.clone(),
                })
                .collect(),
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
