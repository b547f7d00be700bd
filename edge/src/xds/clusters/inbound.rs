//! CDS, inbound side: one `inbound|<port>||` cluster per workload port that
//! `virtualInbound` (or a bound ingress listener) sends to, as Istio's
//! `buildInboundClusters` makes them.
//!
//! Where the cluster sends, as Istio ≥1.10 with its default `inboundTrafficPolicy:
//! PASSTHROUGH` does:
//!
//! | made from                          | type          | sends to                         |
//! |------------------------------------|---------------|----------------------------------|
//! | a service target                   | ORIGINAL_DST  | the original destination, i.e. the pod IP:port the client dialled, from 127.0.0.6 |
//! | ingress, no `defaultEndpoint`      | ORIGINAL_DST  | the same                         |
//! | ingress, `127.0.0.1:P` / `[::1]:P` | STATIC        | the loopback, port P             |
//! | ingress, `0.0.0.0:P` / `[::]:P`    | STATIC        | the workload's IP, port P, from 127.0.0.6 |
//! | ingress, `unix:///path`            | STATIC        | the socket                       |
//!
//! Istio's older LOCALHOST policy made service-target clusters STATIC to 127.0.0.1;
//! sending to the pod IP instead reaches applications that listen on it only. The
//! 127.0.0.6 source is what iptables exempts, so the proxy's own connection to its
//! workload is not redirected back into it.

use super::super::util::{
    INBOUND_PASSTHROUGH_BIND, duration, inbound_cluster_name, socket_address,
};
use super::traffic_policy::default_thresholds;
use super::{discovery, passthrough};
use crate::proxy::InterceptionMode;
use envoy_types::pb::envoy::config::cluster::v3::{CircuitBreakers, Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, BindConfig, Http2ProtocolOptions, Pipe, address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options,
};
use prost::Name;
use shoal_proto::config::validate::{DefaultEndpoint, default_endpoint};
use shoal_proto::model::Protocol;
use shoal_proto::push_context::{InboundPort, SidecarScope};
use std::collections::BTreeMap;

use super::ClusterDefaults;

/// Istio keeps original-destination hosts of inbound clusters for good (its
/// `maxSecondsValue`, the longest duration Envoy holds in nanoseconds: about 292 years):
/// the workload's addresses do not come and go.
const NO_CLEANUP_SECS: i64 = (i64::MAX - 999_999_999) / 1_000_000_000;

/// Where one inbound cluster sends.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Upstream {
    OriginalDestination,
    /// An address and port; `from_passthrough_ip` binds 127.0.0.6 (anything but loopback).
    Ip {
        ip: String,
        port: u32,
        from_passthrough_ip: bool,
    },
    Unix(String),
}

/// The inbound clusters of a proxy at `proxy_ip` with `ports`, sorted by name: from its
/// Sidecar's ingress listeners when it has any, else from its service targets (none
/// without interception, as there is no listener to use them).
pub fn build(
    scope: &SidecarScope,
    ports: &[InboundPort],
    mode: InterceptionMode,
    proxy_ip: &str,
    defaults: &ClusterDefaults,
) -> Vec<Cluster> {
    let mut by_port: BTreeMap<u32, (Protocol, Upstream)> = BTreeMap::new();
    if scope.ingress.is_empty() {
        if mode == InterceptionMode::None {
            return Vec::new();
        }
        for p in ports {
            by_port
                .entry(p.target_port)
                .or_insert((p.protocol, Upstream::OriginalDestination));
        }
    } else {
        for ingress in &scope.ingress {
            let Some(port) = &ingress.port else { continue };
            // Validation rejected malformed endpoints; one that slipped through is skipped.
            let upstream = match default_endpoint(&ingress.default_endpoint) {
                Ok(DefaultEndpoint::OriginalDestination) => Upstream::OriginalDestination,
                Ok(DefaultEndpoint::Loopback { ip, port }) => Upstream::Ip {
                    ip: ip.to_string(),
                    port,
                    from_passthrough_ip: false,
                },
                Ok(DefaultEndpoint::WorkloadIp { port }) => Upstream::Ip {
                    // Istio falls back to the loopback when the proxy has no address.
                    ip: if proxy_ip.is_empty() {
                        "127.0.0.1".into()
                    } else {
                        proxy_ip.to_string()
                    },
                    port,
                    from_passthrough_ip: !proxy_ip.is_empty(),
                },
                Ok(DefaultEndpoint::Unix(path)) => Upstream::Unix(path.to_string()),
                Err(reason) => {
                    tracing::warn!(
                        sidecar = scope.id,
                        port = port.number,
                        reason,
                        "skipping ingress listener with a bad defaultEndpoint"
                    );
                    continue;
                }
            };
            let protocol = Protocol::infer("", None, &port.protocol);
            by_port.entry(port.number).or_insert((protocol, upstream));
        }
    }
    by_port
        .into_iter()
        .filter(|(_, (protocol, _))| protocol.is_proxied())
        .map(|(port, (protocol, upstream))| cluster(port, protocol, &upstream, defaults))
        .collect::<BTreeMap<String, Cluster>>()
        .into_values()
        .collect()
}

/// Whether the inbound clusters of `scope` depend on the proxy's own address.
pub fn uses_proxy_ip(scope: &SidecarScope) -> bool {
    scope.ingress.iter().any(|i| {
        matches!(
            default_endpoint(&i.default_endpoint),
            Ok(DefaultEndpoint::WorkloadIp { .. })
        )
    })
}

fn cluster(
    port: u32,
    protocol: Protocol,
    upstream: &Upstream,
    defaults: &ClusterDefaults,
) -> (String, Cluster) {
    let name = inbound_cluster_name(port);
    let passthrough_bind = || BindConfig {
        source_address: Some(socket_address(INBOUND_PASSTHROUGH_BIND, 0)),
        ..Default::default()
    };
    let mut c = match upstream {
        Upstream::OriginalDestination => Cluster {
            cluster_discovery_type: discovery(cluster::DiscoveryType::OriginalDst),
            lb_policy: cluster::LbPolicy::ClusterProvided as i32,
            cleanup_interval: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: NO_CLEANUP_SECS,
                nanos: 0,
            }),
            upstream_bind_config: Some(passthrough_bind()),
            ..Default::default()
        },
        Upstream::Ip {
            ip,
            port,
            from_passthrough_ip,
        } => Cluster {
            cluster_discovery_type: discovery(cluster::DiscoveryType::Static),
            load_assignment: Some(assignment(&name, super::super::util::address(ip, *port))),
            upstream_bind_config: from_passthrough_ip.then(passthrough_bind),
            ..Default::default()
        },
        Upstream::Unix(path) => Cluster {
            cluster_discovery_type: discovery(cluster::DiscoveryType::Static),
            load_assignment: Some(assignment(
                &name,
                Address {
                    address: Some(address::Address::Pipe(Pipe {
                        path: path.trim_start_matches("unix://").to_string(),
                        ..Default::default()
                    })),
                },
            )),
            ..Default::default()
        },
    };
    c.name.clone_from(&name);
    c.connect_timeout = Some(duration(defaults.connect_timeout));
    c.circuit_breakers = Some(CircuitBreakers {
        thresholds: vec![default_thresholds()],
        ..Default::default()
    });
    match protocol {
        // The workload speaks HTTP/2: so does the proxy to it.
        Protocol::Http2 | Protocol::Grpc => {
            let options = HttpProtocolOptions {
                upstream_protocol_options: Some(
                    http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                        http_protocol_options::ExplicitHttpConfig {
                            protocol_config: Some(
                                http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                                    Http2ProtocolOptions::default(),
                                ),
                            ),
                        },
                    ),
                ),
                ..Default::default()
            };
            c.typed_extension_protocol_options.insert(
                HttpProtocolOptions::full_name(),
                super::super::util::any(&options),
            );
        }
        // Sniffed: speak whatever the client spoke.
        Protocol::Unknown => {
            let sniffed = passthrough(defaults, &name);
            c.typed_extension_protocol_options = sniffed.typed_extension_protocol_options;
        }
        _ => {}
    }
    (name, c)
}

fn assignment(name: &str, address: Address) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(address),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[cfg(test)]
pub(crate) mod tests;
