//! LDS, inbound side: `virtualInbound` and the listeners a Sidecar `ingress` binds, as
//! Istio's `listener_inbound.go` makes them. How each port's chains are reached
//! (plaintext, mTLS) and the filters guarding them come from the proxy's
//! [`InboundSecurity`]: each chain below is made once per transport it gives.
//!
//! ```text
//!  virtualInbound 0.0.0.0:15006   listener filters: original_dst, http_inspector
//!    ├ virtualInbound-blackhole       dst port 15006            → BlackHoleCluster
//!    ├ virtualInbound-catchall-http   ALPN http/1.1|h2c         → HCM → InboundPassthroughCluster
//!    ├ virtualInbound                 anything else             → InboundPassthroughCluster
//!    ├ 0.0.0.0_<port>  HTTP port      dst port                  → HCM → inbound|<port>||
//!    ├ 0.0.0.0_<port>  TCP port       dst port                  → inbound|<port>||
//!    └ 0.0.0.0_<port>  unknown: sniffed, the HTTP chain (ALPN) and the TCP chain
//! ```
//! The chains come from the proxy's service targets, one per workload port (the first
//! service wins), or, when its Sidecar has `ingress` listeners, from those instead. A
//! chain whose capture mode is NONE (or every chain, without interception) becomes a
//! listener of its own that binds `<bind>:<port>`.

use super::super::security::{ChainTransport, InboundSecurity};
use super::super::util::{
    BLACKHOLE_CLUSTER, INBOUND_PASSTHROUGH_CLUSTER, TLS_TRANSPORT, VIRTUAL_INBOUND,
    VIRTUAL_INBOUND_BLACKHOLE_CHAIN, VIRTUAL_INBOUND_CATCH_ALL_HTTP_CHAIN, VIRTUAL_INBOUND_PORT,
    WILDCARD_IP, address, any, duration, inbound_cluster_name, u32_value,
};
use super::{ListenerOptions, tcp_proxy_filter, transparent};
use crate::proxy::InterceptionMode;
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter,
    ListenerFilterChainMatchPredicate, filter, listener_filter,
    listener_filter_chain_match_predicate,
};
use envoy_types::pb::envoy::config::route::v3::{
    Decorator, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, route,
    route_action, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector;
use envoy_types::pb::envoy::extensions::filters::listener::original_dst::v3::OriginalDst;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
use envoy_types::pb::envoy::r#type::v3::Int32Range;
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::model::Protocol;
use shoal_proto::push_context::SidecarScope;
use std::collections::{BTreeMap, BTreeSet};

/// How a chain's traffic is read: as Istio's listener protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChainProtocol {
    Http,
    Tcp,
    /// Not declared: sniffed by the HTTP inspector.
    Auto,
}

impl ChainProtocol {
    fn of(protocol: Protocol) -> Option<ChainProtocol> {
        match protocol {
            Protocol::Http | Protocol::Http2 | Protocol::Grpc => Some(ChainProtocol::Http),
            Protocol::Tcp | Protocol::Https | Protocol::Tls => Some(ChainProtocol::Tcp),
            Protocol::Unknown => Some(ChainProtocol::Auto),
            Protocol::Udp => None,
        }
    }
}

/// What one inbound port's filter chains are made from (Istio's `inboundChainConfig`).
#[derive(Clone, Debug)]
struct ChainConfig {
    /// The workload port: the chains' `destination_port`.
    target_port: u32,
    /// The service port (names the HTTP virtual host).
    service_port: u32,
    protocol: Protocol,
    /// For the route's tracing decorator.
    hostname: String,
    /// Names the chains (`<bind>_<port>`) and, when bound, is the listener's address.
    bind: String,
    bind_to_port: bool,
}

impl ChainConfig {
    fn name(&self) -> String {
        format!("{}_{}", self.bind, self.target_port)
    }

    fn cluster(&self) -> String {
        inbound_cluster_name(self.target_port)
    }
}

/// Whether a Sidecar ingress listener binds its port itself.
fn binds(capture_mode: &str, mode: InterceptionMode) -> bool {
    match capture_mode {
        "NONE" => true,
        "IPTABLES" => false,
        _ => mode == InterceptionMode::None,
    }
}

/// The chain configs of a proxy, by target port: its Sidecar's ingress listeners when it
/// has any, else its service targets (none without interception: the application owns
/// its ports then, as in Istio).
fn chain_configs(scope: &SidecarScope, opts: ListenerOptions<'_>) -> Vec<ChainConfig> {
    let mut by_port: BTreeMap<u32, ChainConfig> = BTreeMap::new();
    if scope.ingress.is_empty() {
        if opts.mode == InterceptionMode::None {
            return Vec::new();
        }
        for p in opts.inbound {
            by_port.entry(p.target_port).or_insert_with(|| ChainConfig {
                target_port: p.target_port,
                service_port: p.service_port,
                protocol: p.protocol,
                hostname: p.hostname.clone(),
                bind: WILDCARD_IP.to_string(),
                bind_to_port: false,
            });
        }
    } else {
        // Sidecar config has no service: Istio's synthetic `<sidecar>.<namespace>`.
        let hostname = sidecar_hostname(&scope.id);
        for ingress in &scope.ingress {
            let Some(port) = &ingress.port else { continue };
            let bind = if ingress.bind.is_empty() {
                // Istio binds the proxy's own (global unicast) address.
                opts.proxy_ip.to_string()
            } else {
                ingress.bind.clone()
            };
            by_port.entry(port.number).or_insert_with(|| ChainConfig {
                target_port: port.number,
                service_port: port.number,
                protocol: Protocol::infer("", None, &port.protocol),
                hostname: hostname.clone(),
                bind,
                bind_to_port: binds(&ingress.capture_mode, opts.mode),
            });
        }
    }
    by_port
        .into_values()
        .filter(|c| c.protocol.is_proxied())
        .collect()
}

/// `namespace/name@proxy-namespace` (a scope id) as `name.namespace`.
fn sidecar_hostname(scope_id: &str) -> String {
    let id = scope_id.split('@').next().unwrap_or(scope_id);
    match id.split_once('/') {
        Some((ns, name)) => format!("{name}.{ns}"),
        None => id.to_string(),
    }
}

/// The inbound listeners of a proxy: `virtualInbound` when traffic is captured, and one
/// listener per chain config that binds its port.
pub fn build(scope: &SidecarScope, opts: ListenerOptions<'_>) -> Vec<Listener> {
    let configs = chain_configs(scope, opts);
    let mut out = Vec::new();
    let mut virtual_chains = Vec::new();
    let security = opts.inbound_security;
    for cc in &configs {
        let chains = chains_for(cc, security);
        if cc.bind_to_port {
            out.push(inbound_listener(
                cc.name(),
                &cc.bind,
                cc.target_port,
                true,
                opts.mode,
                chains,
            ));
        } else {
            virtual_chains.extend(chains);
        }
    }
    if opts.mode != InterceptionMode::None {
        let mut chains = passthrough_chains(security);
        chains.extend(virtual_chains);
        out.push(inbound_listener(
            VIRTUAL_INBOUND.into(),
            WILDCARD_IP,
            VIRTUAL_INBOUND_PORT,
            false,
            opts.mode,
            chains,
        ));
    }
    out
}

fn inbound_listener(
    name: String,
    ip: &str,
    port: u32,
    bind_to_port: bool,
    mode: InterceptionMode,
    chains: Vec<FilterChain>,
) -> Listener {
    let mut filters = Vec::new();
    if !bind_to_port {
        filters.push(ListenerFilter {
            name: "envoy.filters.listener.original_dst".into(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &OriginalDst::default(),
            ))),
            ..Default::default()
        });
    }
    filters.extend(tls_inspector(&chains));
    filters.extend(http_inspector(&chains));
    Listener {
        name,
        address: Some(address(ip, port)),
        filter_chains: chains,
        listener_filters: filters,
        // MeshConfig `protocolDetectionTimeout` defaults to 0s: sniffing waits for the
        // client's first bytes, and server-first protocols must declare their port.
        listener_filters_timeout: Some(duration(std::time::Duration::ZERO)),
        continue_on_listener_filters_timeout: true,
        transparent: if bind_to_port {
            None
        } else {
            transparent(mode)
        },
        traffic_direction: TrafficDirection::Inbound as i32,
        ..Default::default()
    }
}

/// The TLS inspector, when some chain is reached over TLS (it tells mTLS from plaintext
/// and reads the ALPN the HTTP inspector would otherwise guess).
fn tls_inspector(chains: &[FilterChain]) -> Option<ListenerFilter> {
    let tls = chains.iter().any(|c| {
        c.filter_chain_match
            .as_ref()
            .is_some_and(|m| m.transport_protocol == TLS_TRANSPORT)
    });
    tls.then(|| ListenerFilter {
        name: "envoy.filters.listener.tls_inspector".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &TlsInspector::default(),
        ))),
        ..Default::default()
    })
}

/// The HTTP inspector, when a chain matches on what it detects: enabled for every port
/// but those whose chains do not (declared HTTP and TCP ports, and 15006), as Istio
/// derives it from the chains.
fn http_inspector(chains: &[FilterChain]) -> Option<ListenerFilter> {
    // Per destination port (0: any), whether some chain there needs the inspector.
    let mut needs: BTreeMap<u32, bool> = BTreeMap::new();
    for c in chains {
        let m = c.filter_chain_match.as_ref();
        let port = m
            .and_then(|m| m.destination_port.as_ref())
            .map_or(0, |p| p.value);
        let http = m.is_some_and(|m| !m.application_protocols.is_empty());
        *needs.entry(port).or_default() |= http;
    }
    if !needs.values().any(|n| *n) {
        return None;
    }
    let disabled: BTreeSet<u32> = needs
        .iter()
        .filter(|(_, n)| !**n)
        .map(|(p, _)| *p)
        .collect();
    Some(ListenerFilter {
        name: "envoy.filters.listener.http_inspector".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &HttpInspector::default(),
        ))),
        filter_disabled: port_predicate(&disabled),
    })
}

/// Matches connections to any of `ports` (`None` when there are none).
fn port_predicate(ports: &BTreeSet<u32>) -> Option<ListenerFilterChainMatchPredicate> {
    use listener_filter_chain_match_predicate::{MatchSet, Rule};
    let mut rules: Vec<ListenerFilterChainMatchPredicate> = ports
        .iter()
        .filter_map(|p| i32::try_from(*p).ok())
        .map(|p| ListenerFilterChainMatchPredicate {
            rule: Some(Rule::DestinationPortRange(Int32Range {
                start: p,
                end: p + 1,
            })),
        })
        .collect();
    match rules.len() {
        0 => None,
        1 => rules.pop(),
        _ => Some(ListenerFilterChainMatchPredicate {
            rule: Some(Rule::OrMatch(MatchSet { rules })),
        }),
    }
}

/// A chain's match: its port, its transport, and for a sniffed port's HTTP chain the
/// transport's HTTP ALPNs.
fn chain_match(
    port: Option<u32>,
    sniffed_http: bool,
    transport: &ChainTransport,
) -> Option<FilterChainMatch> {
    let application_protocols = if sniffed_http {
        transport.http_alpns.iter().map(|a| a.to_string()).collect()
    } else {
        Vec::new()
    };
    Some(FilterChainMatch {
        destination_port: port.map(u32_value),
        transport_protocol: transport.transport_protocol.into(),
        application_protocols,
        ..Default::default()
    })
}

/// `chains` once per transport of `port`, each reached by it (its match's transport and
/// ALPNs, its TLS context).
fn per_transport(
    security: &InboundSecurity<'_>,
    port: Option<u32>,
    protocol: Option<Protocol>,
    chains: impl Fn(&ChainTransport) -> Vec<FilterChain>,
) -> Vec<FilterChain> {
    security
        .transports(port, protocol)
        .iter()
        .flat_map(|transport| {
            chains(transport).into_iter().map(|c| FilterChain {
                transport_socket: transport.transport_socket.clone(),
                ..c
            })
        })
        .collect()
}

/// The chains of one port: HTTP, TCP, or both behind sniffing, once per transport.
fn chains_for(cc: &ChainConfig, security: &InboundSecurity<'_>) -> Vec<FilterChain> {
    let cluster = cc.cluster();
    let port = Some(cc.target_port);
    let http = || FilterChain {
        name: cc.name(),
        filters: vec![hcm_filter(
            HttpChain {
                stat_prefix: format!("inbound_{}", cc.name()),
                cluster: cluster.clone(),
                service_port: cc.service_port,
                operation: format!("{}:{}/*", cc.hostname, cc.service_port),
                http2: matches!(cc.protocol, Protocol::Http2 | Protocol::Grpc),
            },
            security.http_filters(port),
        )],
        ..Default::default()
    };
    // TCP stats are named after the cluster, as Istio names them.
    let tcp = || {
        let mut filters = security.network_filters(port);
        filters.push(tcp_proxy_filter(
            &cluster,
            tcp_proxy::ClusterSpecifier::Cluster(cluster.clone()),
        ));
        FilterChain {
            name: cc.name(),
            filters,
            ..Default::default()
        }
    };
    let Some(protocol) = ChainProtocol::of(cc.protocol) else {
        return Vec::new();
    };
    per_transport(
        security,
        port,
        Some(cc.protocol),
        |transport| match protocol {
            ChainProtocol::Http => vec![FilterChain {
                filter_chain_match: chain_match(port, false, transport),
                ..http()
            }],
            ChainProtocol::Tcp => vec![FilterChain {
                filter_chain_match: chain_match(port, false, transport),
                ..tcp()
            }],
            ChainProtocol::Auto => vec![
                FilterChain {
                    filter_chain_match: chain_match(port, true, transport),
                    ..http()
                },
                FilterChain {
                    filter_chain_match: chain_match(port, false, transport),
                    ..tcp()
                },
            ],
        },
    )
}

/// The chains for traffic no port claims: 15006 itself is dropped (it would loop), the
/// rest passes through to its original destination, HTTP through an HCM so that it is
/// seen as requests; under the workload-level transports and filters.
fn passthrough_chains(security: &InboundSecurity<'_>) -> Vec<FilterChain> {
    let cluster = INBOUND_PASSTHROUGH_CLUSTER.to_string();
    let blackhole = FilterChain {
        name: VIRTUAL_INBOUND_BLACKHOLE_CHAIN.into(),
        filter_chain_match: Some(FilterChainMatch {
            destination_port: Some(u32_value(VIRTUAL_INBOUND_PORT)),
            ..Default::default()
        }),
        filters: vec![tcp_proxy_filter(
            BLACKHOLE_CLUSTER,
            tcp_proxy::ClusterSpecifier::Cluster(BLACKHOLE_CLUSTER.into()),
        )],
        ..Default::default()
    };
    let mut chains = vec![blackhole];
    chains.extend(per_transport(security, None, None, |transport| {
        let mut tcp_filters = security.network_filters(None);
        tcp_filters.push(tcp_proxy_filter(
            &cluster,
            tcp_proxy::ClusterSpecifier::Cluster(cluster.clone()),
        ));
        vec![
            FilterChain {
                name: VIRTUAL_INBOUND_CATCH_ALL_HTTP_CHAIN.into(),
                filter_chain_match: chain_match(None, true, transport),
                filters: vec![hcm_filter(
                    HttpChain {
                        stat_prefix: cluster.clone(),
                        cluster: cluster.clone(),
                        service_port: 0,
                        operation: String::new(),
                        http2: false,
                    },
                    security.http_filters(None),
                )],
                ..Default::default()
            },
            FilterChain {
                name: VIRTUAL_INBOUND.into(),
                filter_chain_match: chain_match(None, false, transport),
                filters: tcp_filters,
                ..Default::default()
            },
        ]
    }));
    chains
}

/// What an inbound HTTP chain's connection manager is made from.
struct HttpChain {
    stat_prefix: String,
    cluster: String,
    service_port: u32,
    /// The tracing operation (`<host>:<port>/*`), empty for passthrough.
    operation: String,
    http2: bool,
}

/// An HCM with its route inline (inbound routes are not served over RDS): one virtual
/// host `inbound|http|<service port>` for every domain, one route `default` to the
/// cluster, without timeouts, as Istio's default inbound route. `guards` go before the
/// router.
fn hcm_filter(chain: HttpChain, guards: Vec<HttpFilter>) -> Filter {
    let no_timeout = duration(std::time::Duration::ZERO);
    let route = Route {
        name: "default".into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        decorator: (!chain.operation.is_empty()).then(|| Decorator {
            operation: chain.operation.clone(),
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(
                chain.cluster.clone(),
            )),
            timeout: Some(no_timeout),
            max_stream_duration: Some(route_action::MaxStreamDuration {
                max_stream_duration: Some(no_timeout),
                grpc_timeout_header_max: Some(no_timeout),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    };
    let config = RouteConfiguration {
        name: chain.cluster.clone(),
        virtual_hosts: vec![VirtualHost {
            name: format!("inbound|http|{}", chain.service_port),
            domains: vec!["*".into()],
            routes: vec![route],
            ..Default::default()
        }],
        validate_clusters: Some(BoolValue { value: false }),
        ..Default::default()
    };
    let hcm = HttpConnectionManager {
        stat_prefix: chain.stat_prefix,
        codec_type: http_connection_manager::CodecType::Auto as i32,
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(config)),
        http_filters: guards
            .into_iter()
            .chain([HttpFilter {
                name: "envoy.filters.http.router".into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(
                    any(&Router::default()),
                )),
                ..Default::default()
            }])
            .collect(),
        http2_protocol_options: chain.http2.then(Default::default),
        use_remote_address: Some(BoolValue { value: false }),
        normalize_path: Some(BoolValue { value: true }),
        upgrade_configs: vec![http_connection_manager::UpgradeConfig {
            upgrade_type: "websocket".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.http_connection_manager".into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
    }
}

#[cfg(test)]
mod tests;
