//! Decoding one xDS resource: the full Envoy message (prost), reduced to what a simulated
//! proxy keeps — its name, the names it references, and whether it carries the change the
//! loadtest made. Nothing decoded is kept.

use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::address;
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, lb_endpoint};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use prost::Message;
use shoal_proto::xds::types;

/// The type URL of the HTTP connection manager inside listeners.
pub const HCM_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

/// The four xDS types a sidecar subscribes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Cluster,
    Endpoint,
    Listener,
    Route,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Cluster, Kind::Endpoint, Kind::Listener, Kind::Route];

    pub fn from_type_url(url: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.type_url() == url)
    }

    pub fn type_url(self) -> &'static str {
        match self {
            Kind::Cluster => types::CLUSTER,
            Kind::Endpoint => types::ENDPOINT,
            Kind::Listener => types::LISTENER,
            Kind::Route => types::ROUTE,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// The change the loadtest made, as it shows in a resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Marker {
    #[default]
    None,
    /// A route whose timeout is this many whole seconds (a VirtualService edit).
    RouteTimeout { seconds: i64 },
    /// An endpoint with this address (an endpoint edit).
    Address(String),
}

/// What is kept of one decoded resource.
#[derive(Debug, PartialEq, Eq)]
pub struct Summary {
    pub name: String,
    /// EDS service name of an EDS cluster; route configuration names of a listener.
    pub children: Vec<String>,
    /// The resource carries the marker.
    pub marked: bool,
}

/// Why a resource was rejected (NACKed).
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown resource type {0:?}")]
    UnknownType(String),
    #[error("resource of type {found:?} in a {expected} response")]
    TypeMismatch {
        expected: &'static str,
        found: String,
    },
    #[error("{kind:?} resource does not decode: {source}")]
    Resource {
        kind: Kind,
        #[source]
        source: prost::DecodeError,
    },
    #[error("listener {listener}: HttpConnectionManager does not decode: {source}")]
    Hcm {
        listener: String,
        #[source]
        source: prost::DecodeError,
    },
    #[error("delta resource {0:?} has no body")]
    MissingBody(String),
}

pub type Result<T, E = DecodeError> = std::result::Result<T, E>;

/// Decodes one resource of `kind` (its `Any` value).
pub fn decode(kind: Kind, value: Bytes, marker: &Marker) -> Result<Summary> {
    let err = |source| DecodeError::Resource { kind, source };
    match kind {
        Kind::Cluster => {
            let c = Cluster::decode(value).map_err(err)?;
            Ok(cluster_summary(c))
        }
        Kind::Endpoint => {
            let cla = ClusterLoadAssignment::decode(value).map_err(err)?;
            let marked = match marker {
                Marker::Address(ip) => has_address(&cla, ip),
                _ => false,
            };
            Ok(Summary {
                name: cla.cluster_name,
                children: Vec::new(),
                marked,
            })
        }
        Kind::Listener => listener_summary(Listener::decode(value).map_err(err)?, marker),
        Kind::Route => {
            let rc = RouteConfiguration::decode(value).map_err(err)?;
            let marked = routes_marked(&rc, marker);
            Ok(Summary {
                name: rc.name,
                children: Vec::new(),
                marked,
            })
        }
    }
}

fn cluster_summary(mut c: Cluster) -> Summary {
    let eds = matches!(
        c.cluster_discovery_type,
        Some(cluster::ClusterDiscoveryType::Type(t)) if t == cluster::DiscoveryType::Eds as i32
    );
    let children = if eds {
        // Envoy asks for the EDS service name, or the cluster's name without one.
        let service = c
            .eds_cluster_config
            .take()
            .map(|e| e.service_name)
            .filter(|s| !s.is_empty());
        vec![service.unwrap_or_else(|| c.name.clone())]
    } else {
        Vec::new()
    };
    Summary {
        name: c.name,
        children,
        marked: false,
    }
}

fn has_address(cla: &ClusterLoadAssignment, ip: &str) -> bool {
    cla.endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(lb_endpoint::HostIdentifier::Endpoint(ep)) => ep.address.as_ref(),
            _ => None,
        })
        .any(|a| match &a.address {
            Some(address::Address::SocketAddress(sa)) => sa.address == ip,
            _ => false,
        })
}

fn routes_marked(rc: &RouteConfiguration, marker: &Marker) -> bool {
    let Marker::RouteTimeout { seconds } = marker else {
        return false;
    };
    rc.virtual_hosts
        .iter()
        .flat_map(|v| &v.routes)
        .any(|r| match &r.action {
            Some(route::Action::Route(a)) => {
                a.timeout.as_ref().is_some_and(|t| t.seconds == *seconds)
            }
            _ => false,
        })
}

fn listener_summary(l: Listener, marker: &Marker) -> Result<Summary> {
    let mut children = Vec::new();
    let mut marked = false;
    let chains = l
        .filter_chains
        .iter()
        .chain(l.default_filter_chain.as_ref());
    for any in chains
        .flat_map(|c: &FilterChain| &c.filters)
        .filter_map(|f| match &f.config_type {
            Some(filter::ConfigType::TypedConfig(any)) if any.type_url == HCM_TYPE => Some(any),
            _ => None,
        })
    {
        let hcm = HttpConnectionManager::decode(any.value.as_slice()).map_err(|source| {
            DecodeError::Hcm {
                listener: l.name.clone(),
                source,
            }
        })?;
        match hcm.route_specifier {
            Some(RouteSpecifier::Rds(rds)) => children.push(rds.route_config_name),
            Some(RouteSpecifier::RouteConfig(rc)) => marked |= routes_marked(&rc, marker),
            _ => {}
        }
    }
    Ok(Summary {
        name: l.name,
        children,
        marked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress};
    use envoy_types::pb::envoy::config::endpoint::v3::{Endpoint, LbEndpoint, LocalityLbEndpoints};
    use envoy_types::pb::envoy::config::listener::v3::Filter;
    use envoy_types::pb::envoy::config::route::v3::{Route, RouteAction, VirtualHost};
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::Rds;
    use envoy_types::pb::google::protobuf::{Any, Duration};

    fn bytes(m: &impl Message) -> Bytes {
        Bytes::from(m.encode_to_vec())
    }

    #[test]
    fn eds_cluster_names_its_service() {
        let c = Cluster {
            name: "outbound|80||a".into(),
            cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Eds as i32,
            )),
            eds_cluster_config: Some(cluster::EdsClusterConfig {
                service_name: "outbound|80||a".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = decode(Kind::Cluster, bytes(&c), &Marker::None).unwrap();
        assert_eq!(s.children, ["outbound|80||a"]);
        let plain = Cluster {
            name: "PassthroughCluster".into(),
            ..Default::default()
        };
        assert!(
            decode(Kind::Cluster, bytes(&plain), &Marker::None)
                .unwrap()
                .children
                .is_empty()
        );
    }

    #[test]
    fn endpoint_marker() {
        let cla = ClusterLoadAssignment {
            cluster_name: "c".into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                        address: Some(Address {
                            address: Some(address::Address::SocketAddress(SocketAddress {
                                address: "10.250.1.2".into(),
                                ..Default::default()
                            })),
                        }),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let hit = Marker::Address("10.250.1.2".into());
        let miss = Marker::Address("10.250.1.3".into());
        assert!(decode(Kind::Endpoint, bytes(&cla), &hit).unwrap().marked);
        assert!(!decode(Kind::Endpoint, bytes(&cla), &miss).unwrap().marked);
    }

    #[test]
    fn listener_routes_and_route_marker() {
        let hcm = HttpConnectionManager {
            route_specifier: Some(RouteSpecifier::Rds(Rds {
                route_config_name: "8080".into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        let l = Listener {
            name: "0.0.0.0_8080".into(),
            filter_chains: vec![FilterChain {
                filters: vec![Filter {
                    name: "envoy.filters.network.http_connection_manager".into(),
                    config_type: Some(filter::ConfigType::TypedConfig(Any {
                        type_url: HCM_TYPE.into(),
                        value: hcm.encode_to_vec(),
                    })),
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let s = decode(Kind::Listener, bytes(&l), &Marker::None).unwrap();
        assert_eq!(s.children, ["8080"]);

        let rc = RouteConfiguration {
            name: "8080".into(),
            virtual_hosts: vec![VirtualHost {
                routes: vec![Route {
                    action: Some(route::Action::Route(RouteAction {
                        timeout: Some(Duration {
                            seconds: 4242,
                            nanos: 0,
                        }),
                        ..Default::default()
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let m = Marker::RouteTimeout { seconds: 4242 };
        assert!(decode(Kind::Route, bytes(&rc), &m).unwrap().marked);
        assert!(
            !decode(Kind::Route, bytes(&rc), &Marker::None)
                .unwrap()
                .marked
        );
    }

    #[test]
    fn garbage_and_broken_hcm_are_errors() {
        let junk = Bytes::from_static(&[0xff, 0xff, 0xff]);
        assert!(decode(Kind::Cluster, junk.clone(), &Marker::None).is_err());
        let l = Listener {
            name: "l".into(),
            filter_chains: vec![FilterChain {
                filters: vec![Filter {
                    name: "hcm".into(),
                    config_type: Some(filter::ConfigType::TypedConfig(Any {
                        type_url: HCM_TYPE.into(),
                        value: junk.to_vec(),
                    })),
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(matches!(
            decode(Kind::Listener, bytes(&l), &Marker::None),
            Err(DecodeError::Hcm { .. })
        ));
    }
}
