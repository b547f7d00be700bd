use super::super::testing::*;
use super::super::types::ENDPOINT;
use super::*;
use crate::proxy::InterceptionMode;

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
fn groups_by_locality_with_health_and_weight() {
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
    assert_eq!(localities, [("us-east", "a", 2), ("us-east", "b", 1)]);
    let healthy = HealthStatus::Healthy as i32;
    let unhealthy = HealthStatus::Unhealthy as i32;
    assert_eq!(
        addresses(&la.endpoints[0]),
        [
            ("10.0.0.1".to_string(), 9080, healthy, 1),
            ("10.0.0.3".to_string(), 9080, unhealthy, 1)
        ]
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
    assert_eq!(ips(&las[1]), ["10.0.0.1", "10.0.0.3"]);
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
    let la = load_assignment(
        ALL,
        Some(&eps),
        &EndpointFilter {
            port: 9080,
            labels: None,
        },
    );
    let n: usize = la.endpoints.iter().map(|l| l.lb_endpoints.len()).sum();
    assert_eq!(n, 2);
}
