//! CDS and EDS as istiod shapes them (`cluster_builder.go`, `buildAutoMtlsSettings`):
//! `outbound|<port>||<host>` EDS clusters over ADS whose transport is chosen per endpoint
//! (`transport_socket_matches` on the endpoint metadata `envoy.transport_socket_match`
//! `tlsMode: istio` → ISTIO_MUTUAL, anything else → plaintext), their endpoints
//! carrying that metadata, and `inbound|<port>||` clusters to the local app.

use super::model::{Model, Service, Workload};
use super::tls;
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, Metadata, SocketAddress,
    config_source, socket_address,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::google::protobuf::{Duration, Struct, Value, value::Kind};

pub fn outbound_name(port: u16, host: &str) -> String {
    format!("outbound|{port}||{host}")
}

pub fn inbound_name(port: u16) -> String {
    format!("inbound|{port}||")
}

pub fn socket(ip: &str, port: u16) -> Address {
    Address {
        address: Some(
            envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(
                SocketAddress {
                    address: ip.into(),
                    port_specifier: Some(socket_address::PortSpecifier::PortValue(port.into())),
                    ..Default::default()
                },
            ),
        ),
    }
}

pub fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

fn string_struct(fields: &[(&str, &str)]) -> Struct {
    Struct {
        fields: fields
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    Value {
                        kind: Some(Kind::StringValue(v.to_string())),
                    },
                )
            })
            .collect(),
    }
}

fn spiffe(namespace: &str, sa: &str) -> String {
    format!("spiffe://cluster.local/ns/{namespace}/sa/{sa}")
}

fn outbound(s: &Service) -> Cluster {
    let name = outbound_name(s.port, &s.host);
    let mut sans: Vec<String> = s
        .endpoints
        .iter()
        .map(|e| spiffe(&s.namespace, &e.service_account))
        .collect();
    sans.sort();
    sans.dedup();
    Cluster {
        name: name.clone(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: Some(ads()),
            service_name: name,
        }),
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
        transport_socket_matches: vec![
            cluster::TransportSocketMatch {
                name: "tlsMode-istio".into(),
                r#match: Some(string_struct(&[("tlsMode", "istio")])),
                transport_socket: Some(tls::istio_mutual(s.port, &s.host, &sans)),
            },
            cluster::TransportSocketMatch {
                name: "tlsMode-disabled".into(),
                r#match: Some(Struct::default()),
                transport_socket: Some(tls::raw_buffer()),
            },
        ],
        ..Default::default()
    }
}

fn inbound(w: &Workload) -> Cluster {
    let name = inbound_name(w.port);
    Cluster {
        name: name.clone(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        connect_timeout: Some(Duration {
            seconds: 10,
            nanos: 0,
        }),
        load_assignment: Some(assignment(
            name,
            vec![lb(socket("127.0.0.1", w.app_port), None)],
        )),
        ..Default::default()
    }
}

fn lb(address: Address, metadata: Option<Metadata>) -> LbEndpoint {
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(address),
            ..Default::default()
        })),
        metadata,
        ..Default::default()
    }
}

fn assignment(cluster_name: String, endpoints: Vec<LbEndpoint>) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name,
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: endpoints,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The clusters of the proxy at `ip`: every Service's outbound cluster, its own
/// workloads' inbound clusters.
pub fn clusters(model: &Model, ip: &str) -> Vec<Cluster> {
    let mut out: Vec<Cluster> = model.services.iter().map(outbound).collect();
    out.extend(model.workloads.iter().filter(|w| w.ip == ip).map(inbound));
    out
}

/// The load assignments of `names` (outbound clusters; unknown names get none, as
/// istiod answers).
pub fn endpoints(model: &Model, names: &[String]) -> Vec<ClusterLoadAssignment> {
    model
        .services
        .iter()
        .filter(|s| names.contains(&outbound_name(s.port, &s.host)))
        .map(|s| {
            let eps = s
                .endpoints
                .iter()
                .map(|e| {
                    let tls_mode = if e.meshed { "istio" } else { "disabled" };
                    let metadata = Metadata {
                        filter_metadata: [(
                            "envoy.transport_socket_match".to_string(),
                            string_struct(&[("tlsMode", tls_mode)]),
                        )]
                        .into(),
                        ..Default::default()
                    };
                    lb(socket(&e.ip, e.port), Some(metadata))
                })
                .collect();
            assignment(outbound_name(s.port, &s.host), eps)
        })
        .collect()
}
