use super::decode::HCM_TYPE;
use super::*;
use crate::wire::{DeltaResponse, SotwResponse};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{Address, Node, SocketAddress, address};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, VirtualHost, route,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use envoy_types::pb::google::protobuf::{Any, Duration};
use prost::{Message, Name};

fn any<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

fn eds_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            service_name: name.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn plain_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        ..Default::default()
    }
}

fn cla(name: &str, ip: &str) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: name.into(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(Address {
                        address: Some(address::Address::SocketAddress(SocketAddress {
                            address: ip.into(),
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
    }
}

fn http_listener(name: &str, route: &str) -> Listener {
    let hcm = HttpConnectionManager {
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            route_config_name: route.into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    Listener {
        name: name.into(),
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
    }
}

fn routes(name: &str, timeout_s: i64) -> RouteConfiguration {
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: "svc".into(),
            routes: vec![Route {
                action: Some(route::Action::Route(RouteAction {
                    timeout: Some(Duration {
                        seconds: timeout_s,
                        nanos: 0,
                    }),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn sotw(kind: Kind, version: &str, nonce: &str, resources: Vec<Any>) -> SotwResponse {
    let real = DiscoveryResponse {
        version_info: version.into(),
        resources,
        type_url: kind.type_url().into(),
        nonce: nonce.into(),
        ..Default::default()
    };
    SotwResponse::decode(real.encode_to_vec().as_slice()).unwrap()
}

fn delta(kind: Kind, nonce: &str, resources: Vec<(&str, Any)>, removed: &[&str]) -> DeltaResponse {
    let real = DeltaDiscoveryResponse {
        resources: resources
            .into_iter()
            .map(|(n, a)| Resource {
                name: n.into(),
                version: "1".into(),
                resource: Some(a),
                ..Default::default()
            })
            .collect(),
        type_url: kind.type_url().into(),
        removed_resources: removed.iter().map(|s| s.to_string()).collect(),
        nonce: nonce.into(),
        ..Default::default()
    };
    DeltaResponse::decode(real.encode_to_vec().as_slice()).unwrap()
}

fn node() -> Node {
    Node {
        id: "sidecar~10.0.0.1~p.ns-0~ns-0.svc.cluster.local".into(),
        ..Default::default()
    }
}

fn vs_target() -> Arc<Shared> {
    Shared::new(Target {
        marker: Marker::RouteTimeout { seconds: 4242 },
        expect: Expect::Cluster("outbound|80||a".into()),
    })
}

/// A SotW client that has its initial config: clusters a, b (EDS) and a passthrough;
/// one HTTP listener routed by "80".
fn synced_sotw(shared: Arc<Shared>) -> SotwClient {
    let mut c = SotwClient::new(shared, node());
    let mut out = Vec::new();
    c.start(&mut out);
    let cds = sotw(
        Kind::Cluster,
        "1",
        "n1",
        vec![
            any(&eds_cluster("outbound|80||a")),
            any(&eds_cluster("outbound|80||b")),
            any(&plain_cluster("PassthroughCluster")),
        ],
    );
    c.on_response(cds, &mut out);
    let lds = sotw(
        Kind::Listener,
        "1",
        "n2",
        vec![any(&http_listener("0.0.0.0_80", "80"))],
    );
    c.on_response(lds, &mut out);
    let eds = sotw(
        Kind::Endpoint,
        "1",
        "n3",
        vec![
            any(&cla("outbound|80||a", "10.0.0.1")),
            any(&cla("outbound|80||b", "10.0.0.2")),
        ],
    );
    c.on_response(eds, &mut out);
    let rds = sotw(Kind::Route, "1", "n4", vec![any(&routes("80", 5))]);
    assert!(c.on_response(rds, &mut out).synced);
    c
}

#[test]
fn sotw_subscribes_as_envoy_does() {
    let mut c = SotwClient::new(vs_target(), node());
    let mut out: Vec<DiscoveryRequest> = Vec::new();
    c.start(&mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].type_url, Kind::Cluster.type_url());
    assert!(out[0].node.is_some() && out[1].node.is_none());
    assert!(out[0].resource_names.is_empty() && out[0].response_nonce.is_empty());
    out.clear();

    let cds = sotw(
        Kind::Cluster,
        "v1",
        "n1",
        vec![
            any(&eds_cluster("outbound|80||b")),
            any(&eds_cluster("outbound|80||a")),
            any(&plain_cluster("PassthroughCluster")),
        ],
    );
    let o = c.on_response(cds, &mut out);
    assert!(o.nack.is_none() && !o.synced);
    assert!(
        c.expects_change(),
        "its clusters include the changed service's"
    );
    // ACK (version + nonce, wildcard), then EDS for both EDS clusters.
    assert_eq!(
        (out[0].version_info.as_str(), out[0].response_nonce.as_str()),
        ("v1", "n1")
    );
    assert!(out[0].error_detail.is_none() && out[0].resource_names.is_empty());
    assert_eq!(out[1].type_url, Kind::Endpoint.type_url());
    assert_eq!(out[1].resource_names, ["outbound|80||a", "outbound|80||b"]);
    assert!(out[1].response_nonce.is_empty());
    out.clear();

    let lds = sotw(
        Kind::Listener,
        "v1",
        "n2",
        vec![any(&http_listener("0.0.0.0_80", "80"))],
    );
    c.on_response(lds, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].type_url, Kind::Route.type_url());
    assert_eq!(out[1].resource_names, ["80"]);
    out.clear();

    // One of two assignments: not synced yet; the ACK names both.
    let eds = sotw(
        Kind::Endpoint,
        "v1",
        "n3",
        vec![any(&cla("outbound|80||a", "10.0.0.1"))],
    );
    assert!(!c.on_response(eds, &mut out).synced);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].resource_names.len(), 2);
    assert_eq!(out[0].response_nonce, "n3");
    out.clear();
    let rds = sotw(Kind::Route, "v1", "n4", vec![any(&routes("80", 5))]);
    assert!(!c.on_response(rds, &mut out).synced);
    let eds = sotw(
        Kind::Endpoint,
        "v1",
        "n5",
        vec![any(&cla("outbound|80||b", "10.0.0.2"))],
    );
    let o = c.on_response(eds, &mut out);
    assert!(o.synced && c.is_synced());
    // Synced is reported once.
    let eds = sotw(
        Kind::Endpoint,
        "v2",
        "n6",
        vec![any(&cla("outbound|80||b", "10.0.0.3"))],
    );
    assert!(!c.on_response(eds, &mut out).synced);
}

/// A proxy handed off between its CDS answer and its first EDS answer: on the new stream
/// it must ask for the endpoints again, as Envoy does for its warming clusters. It did not
/// (EDS was re-requested only once an EDS answer had been accepted, and the CDS answer,
/// unchanged, subscribed nothing new), so such a proxy never synced.
#[test]
fn sotw_reconnect_before_any_endpoints_asks_for_them_again() {
    let mut c = SotwClient::new(vs_target(), node());
    let mut out: Vec<DiscoveryRequest> = Vec::new();
    c.start(&mut out);
    out.clear();
    let clusters = || {
        sotw(
            Kind::Cluster,
            "1",
            "n1",
            vec![
                any(&eds_cluster("outbound|80||a")),
                any(&eds_cluster("outbound|80||b")),
            ],
        )
    };
    c.on_response(clusters(), &mut out);
    let listeners = || {
        sotw(
            Kind::Listener,
            "1",
            "n2",
            vec![any(&http_listener("0.0.0.0_80", "80"))],
        )
    };
    c.on_response(listeners(), &mut out);
    out.clear();

    // The stream ends here (handed off); the proxy reconnects.
    c.start(&mut out);
    let types: Vec<&str> = out.iter().map(|r| r.type_url.as_str()).collect();
    assert_eq!(
        types,
        [
            Kind::Cluster.type_url(),
            Kind::Listener.type_url(),
            Kind::Endpoint.type_url(),
            Kind::Route.type_url()
        ]
    );
    assert_eq!(out[2].resource_names, ["outbound|80||a", "outbound|80||b"]);
    assert!(out[2].version_info.is_empty() && out[2].response_nonce.is_empty());
    assert_eq!(out[3].resource_names, ["80"]);
    out.clear();

    // The new edge answers all four; the proxy syncs.
    let mut clusters = clusters();
    clusters.nonce = "m1".into();
    c.on_response(clusters, &mut out);
    let mut listeners = listeners();
    listeners.nonce = "m2".into();
    c.on_response(listeners, &mut out);
    let eds = sotw(
        Kind::Endpoint,
        "1",
        "m3",
        vec![
            any(&cla("outbound|80||a", "10.0.0.1")),
            any(&cla("outbound|80||b", "10.0.0.2")),
        ],
    );
    c.on_response(eds, &mut out);
    let rds = sotw(Kind::Route, "1", "m4", vec![any(&routes("80", 5))]);
    assert!(c.on_response(rds, &mut out).synced);
}

#[test]
fn sotw_nack_keeps_last_version_and_state() {
    let mut c = synced_sotw(vs_target());
    let mut out = Vec::new();
    let bad = sotw(
        Kind::Cluster,
        "2",
        "n9",
        vec![Any {
            type_url: Kind::Cluster.type_url().into(),
            value: vec![0xff, 0xff, 0xff],
        }],
    );
    let o = c.on_response(bad, &mut out);
    assert!(o.nack.is_some());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].version_info, "1", "the last accepted version");
    assert_eq!(out[0].response_nonce, "n9");
    assert!(
        out[0]
            .error_detail
            .as_ref()
            .unwrap()
            .message
            .contains("Cluster")
    );
    assert!(c.expects_change(), "state unchanged");

    // A resource of the wrong type is NACKed too.
    out.clear();
    let wrong = sotw(Kind::Route, "2", "n10", vec![any(&plain_cluster("x"))]);
    assert!(matches!(
        c.on_response(wrong, &mut out).nack,
        Some(DecodeError::TypeMismatch { .. })
    ));
}

#[test]
fn sotw_converges_once_on_the_marked_route() {
    let mut c = synced_sotw(vs_target());
    let mut out = Vec::new();
    let rds = sotw(Kind::Route, "2", "n5", vec![any(&routes("80", 4242))]);
    assert!(c.on_response(rds, &mut out).converged);
    let rds = sotw(Kind::Route, "3", "n6", vec![any(&routes("80", 4242))]);
    assert!(!c.on_response(rds, &mut out).converged);
}

#[test]
fn sotw_cluster_change_resubscribes_endpoints() {
    let mut c = synced_sotw(vs_target());
    let mut out = Vec::new();
    // Cluster a goes away: EDS is re-requested with b only, answering the last EDS nonce.
    let cds = sotw(
        Kind::Cluster,
        "2",
        "n7",
        vec![any(&eds_cluster("outbound|80||b"))],
    );
    c.on_response(cds, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].resource_names, ["outbound|80||b"]);
    assert_eq!(out[1].response_nonce, "n3");
    assert!(!c.expects_change());
    // The same clusters again: an ACK only.
    out.clear();
    let cds = sotw(
        Kind::Cluster,
        "3",
        "n8",
        vec![any(&eds_cluster("outbound|80||b"))],
    );
    c.on_response(cds, &mut out);
    assert_eq!(out.len(), 1);
}

#[test]
fn proxies_of_one_scope_share_their_index() {
    let shared = vs_target();
    let _a = synced_sotw(shared.clone());
    let _b = synced_sotw(shared.clone());
    // One cluster index and one listener index, whatever the number of proxies.
    assert_eq!(shared.interner.len(), 2);
}

#[test]
fn delta_subscribes_by_difference() {
    let shared = Shared::new(Target {
        marker: Marker::Address("10.9.9.9".into()),
        expect: Expect::EdsName("outbound|80||a".into()),
    });
    let mut c = DeltaClient::new(shared, node());
    let mut out = Vec::new();
    c.start(&mut out);
    assert!(out[0].node.is_some() && out[0].resource_names_subscribe.is_empty());
    out.clear();

    let cds = delta(
        Kind::Cluster,
        "n1",
        vec![
            ("outbound|80||a", any(&eds_cluster("outbound|80||a"))),
            ("outbound|80||b", any(&eds_cluster("outbound|80||b"))),
        ],
        &[],
    );
    c.on_response(cds, &mut out);
    assert!(c.expects_change());
    assert_eq!(out[0].response_nonce, "n1");
    assert_eq!(
        out[1].resource_names_subscribe,
        ["outbound|80||a", "outbound|80||b"]
    );
    out.clear();

    let lds = delta(
        Kind::Listener,
        "n2",
        vec![("l", any(&http_listener("l", "80")))],
        &[],
    );
    c.on_response(lds, &mut out);
    assert_eq!(out[1].resource_names_subscribe, ["80"]);
    out.clear();

    // b does not exist after all (reported removed): that answers it.
    let eds = delta(
        Kind::Endpoint,
        "n3",
        vec![("outbound|80||a", any(&cla("outbound|80||a", "10.0.0.1")))],
        &["outbound|80||b"],
    );
    assert!(!c.on_response(eds, &mut out).synced);
    let rds = delta(Kind::Route, "n4", vec![("80", any(&routes("80", 5)))], &[]);
    assert!(c.on_response(rds, &mut out).synced);
    out.clear();

    // Cluster b removed, c added: one subscription change.
    let cds = delta(
        Kind::Cluster,
        "n5",
        vec![("outbound|80||c", any(&eds_cluster("outbound|80||c")))],
        &["outbound|80||b"],
    );
    c.on_response(cds, &mut out);
    assert_eq!(out[1].resource_names_subscribe, ["outbound|80||c"]);
    assert_eq!(out[1].resource_names_unsubscribe, ["outbound|80||b"]);
    out.clear();

    let eds = delta(
        Kind::Endpoint,
        "n6",
        vec![("outbound|80||a", any(&cla("outbound|80||a", "10.9.9.9")))],
        &[],
    );
    assert!(c.on_response(eds, &mut out).converged);
    assert_eq!(out[0].response_nonce, "n6");
}

#[test]
fn delta_nack_and_missing_body() {
    let mut c = DeltaClient::new(vs_target(), node());
    let mut out = Vec::new();
    let mut resp = delta(
        Kind::Cluster,
        "n1",
        vec![("a", any(&plain_cluster("a")))],
        &[],
    );
    resp.resources[0].resource = None;
    let o = c.on_response(resp, &mut out);
    assert!(matches!(o.nack, Some(DecodeError::MissingBody(_))));
    assert!(out[0].error_detail.is_some());
    assert_eq!(out[0].response_nonce, "n1");
}

/// A real `DiscoveryResponse`, encoded as the edge sends it.
fn sotw_bytes(kind: Kind, version: &str, nonce: &str, resources: Vec<Any>) -> bytes::Bytes {
    DiscoveryResponse {
        version_info: version.into(),
        resources,
        type_url: kind.type_url().into(),
        nonce: nonce.into(),
        ..Default::default()
    }
    .encode_to_vec()
    .into()
}

/// The initial config of [`synced_sotw`], encoded.
fn initial_sotw(timeout_s: i64) -> Vec<bytes::Bytes> {
    vec![
        sotw_bytes(
            Kind::Cluster,
            "1",
            "n1",
            vec![
                any(&eds_cluster("outbound|80||a")),
                any(&eds_cluster("outbound|80||b")),
            ],
        ),
        sotw_bytes(
            Kind::Listener,
            "1",
            "n2",
            vec![any(&http_listener("0.0.0.0_80", "80"))],
        ),
        sotw_bytes(
            Kind::Endpoint,
            "1",
            "n3",
            vec![
                any(&cla("outbound|80||a", "10.0.0.1")),
                any(&cla("outbound|80||b", "10.0.0.2")),
            ],
        ),
        sotw_bytes(Kind::Route, "1", "n4", vec![any(&routes("80", timeout_s))]),
    ]
}

#[test]
fn a_copy_is_not_decoded_again_and_is_answered_the_same() {
    let shared = vs_target();
    let (mut a, mut b) = (
        SotwClient::new(shared.clone(), node()),
        SotwClient::new(shared.clone(), node()),
    );
    let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
    a.start(&mut out_a);
    b.start(&mut out_b);
    let mut last = (Outcome::default(), Outcome::default());
    for msg in initial_sotw(5) {
        last.0 = a.on_message(msg.clone(), &mut out_a).unwrap();
        last.1 = b.on_message(msg, &mut out_b).unwrap();
    }
    assert!(last.0.synced && last.1.synced);
    assert_eq!(last.0.snapshot, Some(1));
    assert_eq!(last.1.snapshot, Some(1));
    // Every ACK and subscription alike.
    assert_eq!(out_a, out_b);
    assert!(out_a.iter().all(|r| r.error_detail.is_none()));
    let r = shared.verified.report();
    assert_eq!((r.misses, r.hits), (4, 4), "{r:?}");
    assert_eq!(shared.interner.len(), 2);

    // The change: the first copy is decoded and carries the marker; the copy converges.
    let change = sotw_bytes(Kind::Route, "2", "n5", vec![any(&routes("80", 4242))]);
    assert!(a.on_message(change.clone(), &mut out_a).unwrap().converged);
    let copy = b.on_message(change, &mut out_b).unwrap();
    assert!(copy.converged && copy.nack.is_none());
    assert_eq!(out_b.last().unwrap().version_info, "2");
    assert_eq!(shared.verified.report().hits, 5);
}

#[test]
fn a_bad_copy_is_decoded_and_nacked_every_time() {
    let shared = vs_target();
    let bad = sotw_bytes(
        Kind::Cluster,
        "1",
        "n1",
        vec![Any {
            type_url: Kind::Cluster.type_url().into(),
            value: vec![0xff, 0xff, 0xff],
        }],
    );
    for _ in 0..2 {
        let mut c = SotwClient::new(shared.clone(), node());
        let mut out = Vec::new();
        let o = c.on_message(bad.clone(), &mut out).unwrap();
        assert!(matches!(o.nack, Some(DecodeError::Resource { .. })));
        assert!(out[0].error_detail.is_some() && out[0].version_info.is_empty());
        assert_eq!(out[0].response_nonce, "n1");
    }
    let r = shared.verified.report();
    assert_eq!((r.misses, r.hits, r.entries), (2, 0, 0));
    // Not a response at all: the stream's error, not a NACK.
    let mut c = SotwClient::new(shared, node());
    assert!(
        c.on_message(bytes::Bytes::from_static(&[0x0b]), &mut Vec::new())
            .is_err()
    );
}

#[test]
fn delta_copies_are_recognised_and_resume_alike() {
    let shared = vs_target();
    let encode = |kind: Kind, nonce: &str, resources: Vec<(&str, Any)>, removed: &[&str]| {
        let resp = DeltaDiscoveryResponse {
            system_version_info: "3".into(),
            resources: resources
                .into_iter()
                .map(|(n, a)| Resource {
                    name: n.into(),
                    version: format!("v-{n}"),
                    resource: Some(a),
                    ..Default::default()
                })
                .collect(),
            type_url: kind.type_url().into(),
            removed_resources: removed.iter().map(|s| s.to_string()).collect(),
            nonce: nonce.into(),
            ..Default::default()
        };
        bytes::Bytes::from(resp.encode_to_vec())
    };
    let responses = [
        encode(
            Kind::Cluster,
            "n1",
            vec![
                ("outbound|80||a", any(&eds_cluster("outbound|80||a"))),
                ("outbound|80||b", any(&eds_cluster("outbound|80||b"))),
            ],
            &[],
        ),
        encode(
            Kind::Listener,
            "n2",
            vec![("l", any(&http_listener("l", "80")))],
            &[],
        ),
        encode(
            Kind::Endpoint,
            "n3",
            vec![("outbound|80||a", any(&cla("outbound|80||a", "10.0.0.1")))],
            &["outbound|80||b"],
        ),
        encode(Kind::Route, "n4", vec![("80", any(&routes("80", 5)))], &[]),
    ];
    let mut clients = Vec::new();
    for _ in 0..2 {
        let mut c = DeltaClient::new(shared.clone(), node());
        let mut out = Vec::new();
        c.start(&mut out);
        let mut synced = false;
        for msg in &responses {
            let o = c.on_message(msg.clone(), &mut out).unwrap();
            assert!(o.nack.is_none() && o.snapshot == Some(3));
            synced |= o.synced;
        }
        assert!(synced);
        clients.push((c, out));
    }
    assert_eq!(clients[0].1, clients[1].1);
    // Three copies recognised; the one with a removal is decoded each time.
    let r = shared.verified.report();
    assert_eq!((r.misses, r.hits), (5, 3), "{r:?}");
    // On a new stream both resume with the same versions, those received.
    let resumed: Vec<Vec<DeltaDiscoveryRequest>> = clients
        .iter_mut()
        .map(|(c, _)| {
            let mut out = Vec::new();
            c.start(&mut out);
            out
        })
        .collect();
    assert_eq!(resumed[0], resumed[1]);
    let cds = &resumed[0][0].initial_resource_versions;
    assert_eq!(cds.len(), 2);
    assert_eq!(cds["outbound|80||a"], "v-outbound|80||a");
    let eds = resumed[0]
        .iter()
        .find(|r| r.type_url == Kind::Endpoint.type_url())
        .unwrap();
    assert_eq!(eds.initial_resource_versions.len(), 1, "b was removed");
}
