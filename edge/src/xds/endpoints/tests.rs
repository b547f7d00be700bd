use super::super::testing::*;
use super::super::types::ENDPOINT;
use super::*;
use crate::proxy::InterceptionMode;
use shoal_proto::push_context::PushContext;

fn addresses(la: &LocalityLbEndpoints) -> Vec<(String, u32, i32, u32)> {
    la.lb_endpoints
        .iter()
        .map(|e| {
            let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &e.host_identifier else {
                panic!("no endpoint")
            };
            let Some(address::Address::SocketAddress(sa)) =
                ep.address.as_ref().and_then(|a| a.address.as_ref())
            else {
                panic!("no socket address")
            };
            let Some(
                envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(
                    port,
                ),
            ) = sa.port_specifier
            else {
                panic!("no port")
            };
            (
                sa.address.clone(),
                port,
                e.health_status,
                e.load_balancing_weight.unwrap().value,
            )
        })
        .collect()
}

const ALL: &str = "outbound|9080||reviews.shop.svc.cluster.local";
const V1: &str = "outbound|9080|v1|reviews.shop.svc.cluster.local";
const V2: &str = "outbound|9080|v2|reviews.shop.svc.cluster.local";

#[test]
fn groups_by_locality_with_weight_leaving_out_not_ready_endpoints() {
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let [la]: [ClusterLoadAssignment; 1] =
        generate(ENDPOINT, &p, &mesh(), &[ALL]).try_into().unwrap();
    assert_eq!(la.cluster_name, ALL);
    let localities: Vec<_> = la
        .endpoints
        .iter()
        .map(|l| {
            let loc = l.locality.as_ref().unwrap();
            (
                loc.region.as_str(),
                loc.zone.as_str(),
                l.load_balancing_weight.unwrap().value,
            )
        })
        .collect();
    // 10.0.0.3 in us-east/a is not ready: Istio leaves it out rather than send it
    // as UNHEALTHY.
    assert_eq!(localities, [("us-east", "a", 1), ("us-east", "b", 1)]);
    let healthy = HealthStatus::Healthy as i32;
    assert_eq!(
        addresses(&la.endpoints[0]),
        [("10.0.0.1".to_string(), 9080, healthy, 1)]
    );
}

#[test]
fn subsets_filter_by_labels() {
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let las: Vec<ClusterLoadAssignment> = generate(ENDPOINT, &p, &mesh(), &[V2, V1]);
    assert_eq!(las.len(), 2);
    assert_eq!(las[0].cluster_name, V2, "in the order asked");
    let ips = |la: &ClusterLoadAssignment| -> Vec<String> {
        la.endpoints
            .iter()
            .flat_map(|l| addresses(l).into_iter().map(|a| a.0))
            .collect()
    };
    assert_eq!(ips(&las[0]), ["10.0.0.2"]);
    assert_eq!(ips(&las[1]), ["10.0.0.1"], "10.0.0.3 is not ready");
}

#[test]
fn names_unknown_empty_and_wildcard() {
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let push = mesh();
    // Unknown and non-EDS clusters are omitted; a cluster without endpoints is empty.
    let las: Vec<ClusterLoadAssignment> = generate(
        ENDPOINT,
        &p,
        &push,
        &[
            "outbound|1|nope|x",
            "outbound|443||api.example.com",
            "outbound|80||web.other.svc.cluster.local",
        ],
    );
    assert_eq!(las.len(), 1);
    assert!(las[0].endpoints.is_empty());
    // Wildcard: every EDS cluster of the scope.
    let all: Vec<ClusterLoadAssignment> = generate(ENDPOINT, &p, &push, &[]);
    let names: Vec<_> = all.iter().map(|l| l.cluster_name.as_str()).collect();
    assert!(names.contains(&V1) && names.contains(&ALL));
    assert!(
        !names
            .iter()
            .any(|n| n.contains("api.example.com") || n.contains("cache.shop"))
    );
}

#[test]
fn non_ip_addresses_are_left_out() {
    let mut eps = reviews_endpoints();
    eps.endpoints[0].address = "pod.example".into();
    let filter = EndpointFilter {
        port: 9080,
        labels: None,
    };
    let input = AssignmentInput {
        filter: &filter,
        locality_lb: &LocalityLb::Off,
        view: &ProxyView::default(),
        gateways: &Default::default(),
    };
    let la = load_assignment(ALL, Some(&eps), input);
    let n: usize = la.endpoints.iter().map(|l| l.lb_endpoints.len()).sum();
    assert_eq!(n, 1, "of three: one not an IP, one not ready");
}

/// Two networks: reviews has endpoints on net-1 (us-east) and net-2 (eu-west), and net-2
/// an east-west gateway; the rule has outlier detection, so localities fail over.
fn two_network_mesh() -> PushContext {
    use shoal_proto::config::istio::{DestinationRule, OutlierDetection, TrafficPolicy};
    use shoal_proto::model::{NamedConfig, NamespaceConfig, NetworkGateway};
    use shoal_proto::snapshot::Chunk;
    let mut shop = shop();
    shop.destination_rules = vec![NamedConfig {
        name: "reviews".into(),
        namespace: "shop".into(),
        created: 0,
        spec: DestinationRule {
            host: REVIEWS.into(),
            traffic_policy: Some(TrafficPolicy {
                outlier_detection: Some(OutlierDetection {
                    consecutive_5xx_errors: Some(5),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
    }];
    let gateways = NamespaceConfig {
        namespace: "istio-system".into(),
        network_gateways: vec![NetworkGateway {
            network: "net-2".into(),
            address: "192.0.2.10".into(),
            port: 15443,
            cluster: "c2".into(),
        }],
        ..Default::default()
    };
    // Sidecars: only they are reached across networks (through the gateway's SNI).
    let on = |ip: &str, network: &str, locality: &str| {
        let mut ep = Endpoint {
            network: network.into(),
            ..endpoint(ip, 9080, "v1", locality, true)
        };
        ep.labels
            .insert("security.istio.io/tlsMode".into(), "istio".into());
        ep
    };
    let mut eps = reviews_endpoints();
    eps.endpoints = vec![
        on("10.0.0.1", "net-1", "us-east/a"),
        on("10.0.0.2", "net-1", "us-east/b"),
        on("10.2.0.1", "net-2", "eu-west/a"),
        on("10.2.0.2", "net-2", "eu-west/a"),
    ];
    PushContext::from_chunks(
        1,
        [
            Chunk::Namespace(shop),
            Chunk::Namespace(gateways),
            Chunk::Endpoints(eps),
        ],
    )
}

/// (priority, locality, [(address, port, weight)]) of a locality group.
type Group = (u32, String, Vec<(String, u32, u32)>);

fn groups(la: &ClusterLoadAssignment) -> Vec<Group> {
    la.endpoints
        .iter()
        .map(|g| {
            let l = g.locality.as_ref().unwrap();
            let eps = addresses(g)
                .into_iter()
                .map(|(a, p, _, w)| (a, p, w))
                .collect();
            (g.priority, format!("{}/{}", l.region, l.zone), eps)
        })
        .collect()
}

#[test]
fn another_network_through_its_gateway_and_localities_by_priority() {
    let push = two_network_mesh();
    let generator = crate::xds::Generator::new();
    let eds = |network: &str, locality: &str| -> ClusterLoadAssignment {
        let mut p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
        p.network = network.into();
        p.locality = locality.into();
        let out = generator
            .generate(ENDPOINT, &p, &push, &[ALL.to_string()])
            .unwrap();
        decode(&out[0])
    };
    let s = |v: &str| v.to_string();
    // On net-1 in us-east/a: its zone first, then its region, then net-2's gateway,
    // standing for net-2's two endpoints.
    assert_eq!(
        groups(&eds("net-1", "us-east/a")),
        [
            (2, s("eu-west/a"), vec![(s("192.0.2.10"), 15443, 2)]),
            (0, s("us-east/a"), vec![(s("10.0.0.1"), 9080, 1)]),
            (1, s("us-east/b"), vec![(s("10.0.0.2"), 9080, 1)]),
        ]
    );
    // The gateway endpoint selects the client's mTLS transport (tlsMode istio), as Istio
    // marks it: the gateway routes that mTLS by its SNI.
    let remote = eds("net-1", "us-east/a");
    let gateway = &remote.endpoints[0].lb_endpoints[0];
    let mode = &gateway.metadata.as_ref().unwrap().filter_metadata["envoy.transport_socket_match"]
        .fields["tlsMode"];
    assert_eq!(
        mode.kind,
        Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(
            "istio".into()
        ))
    );
    // On net-2 in eu-west/a: its own pods directly; net-1 has no gateway, so none of it.
    assert_eq!(
        groups(&eds("net-2", "eu-west/a")),
        [(
            0,
            s("eu-west/a"),
            vec![(s("10.2.0.1"), 9080, 1), (s("10.2.0.2"), 9080, 1)]
        )]
    );
    // No network, no locality (a single-network mesh): every endpoint, all priority 0.
    let flat = groups(&eds("", ""));
    assert_eq!(flat.len(), 3);
    assert!(flat.iter().all(|(priority, _, _)| *priority == 0));
}
