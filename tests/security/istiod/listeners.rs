//! LDS as istiod shapes it for a sidecar whose listeners bind its pod address (a
//! Sidecar's `ingress`/`egress` with captureMode NONE: the tests run without iptables).
//!
//! - Outbound `<ip>_<port>`: an HTTP connection manager routing each Service on the port
//!   (virtual host `<host>:<port>`) to `outbound|<port>||<host>`, with istiod's default
//!   retry policy. Istio's `istio.alpn` filter (an istio-proxy extension, absent from
//!   upstream Envoy) is emulated by upstream's `set_filter_state`: it puts the same ALPN
//!   override (`istio-http/1.1, istio, http/1.1`) in the filter state the TLS upstream
//!   reads, so the wire carries what an istio-proxy sends.
//! - Inbound `<ip>_<port>`: `tls_inspector`, then istiod's PERMISSIVE chains for an HTTP
//!   port (`inboundPermissiveHTTPFilterChainMatchWithMxcOptions`): `tls` with one of
//!   Istio's mTLS ALPNs → mTLS terminated, HTTP; `raw_buffer` → plaintext HTTP. Anything
//!   else (one-way TLS, TLS without Istio's ALPNs) matches no chain and is closed, as
//!   under istiod.

use super::any;
use super::clusters::{inbound_name, outbound_name, socket};
use super::model::{Model, Workload};
use super::tls;
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, SubstitutionFormatString, TrafficDirection, data_source, substitution_format_string,
};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::config::route::v3::{
    RetryPolicy, Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, retry_policy,
    route, route_action, route_match,
};
use envoy_types::pb::envoy::extensions::filters::common::set_filter_state::v3::{
    FilterStateValue, filter_state_value,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::http::set_filter_state::v3::Config as SetFilterState;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};
use std::collections::BTreeSet;

/// istiod's `mtlsHTTP11ALPN`: what `istio.alpn` sets for an HTTP/1.1 upstream.
pub const MTLS_HTTP11_ALPN: &str = "istio-http/1.1,istio,http/1.1";
/// istiod's `allIstioMtlsALPNs`: an inbound HTTP port's mTLS chain matches these.
pub const ALL_ISTIO_MTLS_ALPNS: [&str; 5] = [
    "istio",
    "istio-peer-exchange",
    "istio-http/1.0",
    "istio-http/1.1",
    "istio-h2",
];

fn http_filter_of(name: &str, config: envoy_types::pb::google::protobuf::Any) -> HttpFilter {
    HttpFilter {
        name: name.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// The `istio.alpn` stand-in (see the module doc).
fn alpn_override() -> HttpFilter {
    http_filter_of(
        "istio.alpn",
        any(&SetFilterState {
            on_request_headers: vec![FilterStateValue {
                key: Some(filter_state_value::Key::ObjectKey(
                    "envoy.network.application_protocols".into(),
                )),
                value: Some(filter_state_value::Value::FormatString(
                    SubstitutionFormatString {
                        format: Some(substitution_format_string::Format::TextFormatSource(
                            DataSource {
                                specifier: Some(data_source::Specifier::InlineString(
                                    MTLS_HTTP11_ALPN.into(),
                                )),
                                ..Default::default()
                            },
                        )),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }],
            ..Default::default()
        }),
    )
}

fn router() -> HttpFilter {
    http_filter_of("envoy.filters.http.router", any(&Router::default()))
}

fn route_to(cluster: String, retries: bool) -> Route {
    let retry_policy = retries.then(|| RetryPolicy {
        retry_on: "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
            .into(),
        num_retries: Some(UInt32Value { value: 2 }),
        retry_host_predicate: vec![retry_policy::RetryHostPredicate {
            name: "envoy.retry_host_predicates.previous_hosts".into(),
            config_type: Some(retry_policy::retry_host_predicate::ConfigType::TypedConfig(
                any(&PreviousHostsPredicate::default()),
            )),
        }],
        host_selection_retry_max_attempts: 5,
        ..Default::default()
    });
    Route {
        name: "default".into(),
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster)),
            timeout: Some(Duration::default()),
            retry_policy,
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn hcm(
    stat_prefix: String,
    routes: RouteConfiguration,
    filters: Vec<HttpFilter>,
    inbound: bool,
) -> Filter {
    use http_connection_manager::{ForwardClientCertDetails, SetCurrentClientCertDetails};
    let mut manager = HttpConnectionManager {
        stat_prefix,
        codec_type: http_connection_manager::CodecType::Auto as i32,
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(routes)),
        http_filters: filters,
        ..Default::default()
    };
    if inbound {
        // As istiod's inbound: the peer's identity handed to the app, the client's own
        // header replaced.
        manager.forward_client_cert_details = ForwardClientCertDetails::SanitizeSet as i32;
        manager.set_current_client_cert_details = Some(SetCurrentClientCertDetails {
            subject: Some(Default::default()),
            dns: true,
            uri: true,
            ..Default::default()
        });
    }
    Filter {
        name: "envoy.filters.network.http_connection_manager".into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&manager))),
    }
}

fn outbound(model: &Model, ip: &str, port: u16) -> Listener {
    let virtual_hosts = model
        .services
        .iter()
        .filter(|s| s.port == port)
        .map(|s| VirtualHost {
            name: format!("{}:{port}", s.host),
            domains: vec![s.host.clone(), format!("{}:{port}", s.host)],
            routes: vec![route_to(outbound_name(port, &s.host), true)],
            ..Default::default()
        })
        .collect();
    let routes = RouteConfiguration {
        name: port.to_string(),
        virtual_hosts,
        ..Default::default()
    };
    Listener {
        name: format!("{ip}_{port}"),
        address: Some(socket(ip, port)),
        traffic_direction: TrafficDirection::Outbound as i32,
        filter_chains: vec![FilterChain {
            filters: vec![hcm(
                format!("outbound_{ip}_{port}"),
                routes,
                vec![alpn_override(), router()],
                false,
            )],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn inbound(w: &Workload) -> Listener {
    let chain = |mtls: bool| {
        let routes = RouteConfiguration {
            name: format!("inbound|{}||", w.service_port),
            virtual_hosts: vec![VirtualHost {
                name: format!("inbound|http|{}", w.service_port),
                domains: vec!["*".into()],
                routes: vec![route_to(inbound_name(w.port), false)],
                ..Default::default()
            }],
            ..Default::default()
        };
        FilterChain {
            name: inbound_name(w.port),
            filter_chain_match: Some(FilterChainMatch {
                destination_port: Some(UInt32Value {
                    value: w.port.into(),
                }),
                transport_protocol: if mtls { "tls" } else { "raw_buffer" }.into(),
                application_protocols: if mtls {
                    ALL_ISTIO_MTLS_ALPNS.iter().map(|a| a.to_string()).collect()
                } else {
                    Vec::new()
                },
                ..Default::default()
            }),
            transport_socket: mtls.then(|| tls::inbound_mutual(&tls::ALPN_DOWNSTREAM_WITH_MXC)),
            filters: vec![hcm(
                format!("inbound_0.0.0.0_{}", w.port),
                routes,
                vec![router()],
                true,
            )],
            ..Default::default()
        }
    };
    Listener {
        name: format!("{}_{}", w.ip, w.port),
        address: Some(socket(&w.ip, w.port)),
        traffic_direction: TrafficDirection::Inbound as i32,
        listener_filters: vec![ListenerFilter {
            name: "envoy.filters.listener.tls_inspector".into(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                &TlsInspector::default(),
            ))),
            ..Default::default()
        }],
        filter_chains: vec![chain(true), chain(false)],
        ..Default::default()
    }
}

/// The listeners of the proxy at `ip`: one outbound per Service port, one inbound per
/// workload of its own.
pub fn listeners(model: &Model, ip: &str) -> Vec<Listener> {
    let ports: BTreeSet<u16> = model.services.iter().map(|s| s.port).collect();
    let mut out: Vec<Listener> = ports.into_iter().map(|p| outbound(model, ip, p)).collect();
    out.extend(model.workloads.iter().filter(|w| w.ip == ip).map(inbound));
    out
}
