use super::super::testing::*;
use super::*;
use crate::proxy::InterceptionMode;
use crate::xds::types;
use shoal_proto::snapshot::Chunk;

const V1: &str = "outbound|9080|v1|reviews.shop.svc.cluster.local";

fn ptr_eq_all(a: &[Arc<XdsResource>], b: &[Arc<XdsResource>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
}

#[test]
fn one_scope_shares_encoded_resources() {
    let push = mesh();
    let g = Generator::new();
    let a = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let b = proxy("shop", "10.1.0.6", InterceptionMode::Redirect);
    // Sidecars take no SDS from Shoal: their certificates come with the security work.
    for t in types::PUSH_ORDER
        .into_iter()
        .filter(|t| *t != types::SECRET)
    {
        let ra = g.generate(t, &a, &push, &[]).unwrap();
        let rb = g.generate(t, &b, &push, &[]).unwrap();
        assert!(!ra.is_empty(), "{t}");
        assert!(ptr_eq_all(&ra, &rb), "{t} not shared");
    }
    let s = g.cache_stats();
    assert_eq!((s.routes.hits, s.routes.misses), (1, 1));
    assert_eq!((s.listeners.hits, s.listeners.misses), (1, 1));
    assert!(s.clusters.hits >= 1 && s.endpoints.hits >= 1);

    // Listeners bound to the proxy's own address are per proxy.
    let na = proxy("shop", "10.1.0.5", InterceptionMode::None);
    let nb = proxy("shop", "10.1.0.6", InterceptionMode::None);
    let la = g.generate(types::LISTENER, &na, &push, &[]).unwrap();
    let lb = g.generate(types::LISTENER, &nb, &push, &[]).unwrap();
    assert_ne!(la[0].name, lb[0].name);
    // CDS differs only by the inbound passthrough cluster; RDS is shared across modes.
    let ra = g.generate(types::ROUTE, &a, &push, &[]).unwrap();
    let rn = g.generate(types::ROUTE, &na, &push, &[]).unwrap();
    assert!(ptr_eq_all(&ra, &rn));
}

#[test]
fn endpoint_change_rebuilds_only_that_assignment() {
    let push = mesh();
    let g = Generator::new();
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let names = [V1.to_string()];
    let cds = g.generate(types::CLUSTER, &p, &push, &[]).unwrap();
    let eds = g.generate(types::ENDPOINT, &p, &push, &names).unwrap();

    let mut eps = reviews_endpoints();
    eps.endpoints[0].healthy = false;
    let next = push.with_changes(2, [Chunk::Endpoints(eps)], []);
    let cds2 = g.generate(types::CLUSTER, &p, &next, &[]).unwrap();
    let eds2 = g.generate(types::ENDPOINT, &p, &next, &names).unwrap();
    assert!(ptr_eq_all(&cds, &cds2), "CDS survives an endpoint change");
    assert_ne!(eds[0].hash, eds2[0].hash, "EDS follows it");

    // Unchanged endpoints: the same assignment, even from a new snapshot.
    let again = next.with_changes(3, [], []);
    let eds3 = g.generate(types::ENDPOINT, &p, &again, &names).unwrap();
    assert!(Arc::ptr_eq(&eds2[0], &eds3[0]));
}

#[test]
fn dns_endpoint_change_rebuilds_clusters() {
    let push = mesh();
    let g = Generator::new();
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let cds = g.generate(types::CLUSTER, &p, &push, &[]).unwrap();
    let api = shoal_proto::model::ServiceEndpoints {
        service: shoal_proto::model::ServiceKey {
            hostname: API.into(),
            namespace: "shop".into(),
        },
        endpoints: vec![shoal_proto::model::Endpoint {
            service_port: 443,
            port: 443,
            address: "eu.api.example.com".into(),
            ..endpoint("", 0, "v1", "", true)
        }],
    };
    let next = push.with_changes(2, [Chunk::Endpoints(api)], []);
    let cds2 = g.generate(types::CLUSTER, &p, &next, &[]).unwrap();
    assert!(!ptr_eq_all(&cds, &cds2));
}

#[test]
fn names_filter_and_unknown_types() {
    let push = mesh();
    let g = Generator::new();
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let names = [
        "virtualOutbound".to_string(),
        "nope".to_string(),
        "0.0.0.0_80".to_string(),
    ];
    let ls = g.generate(types::LISTENER, &p, &push, &names).unwrap();
    let got: Vec<_> = ls.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(got, ["virtualOutbound", "0.0.0.0_80"]);
    assert!(matches!(
        g.generate("type.googleapis.com/nope", &p, &push, &[]),
        Err(GenerateError::UnsupportedType(_))
    ));
}

#[test]
fn named_endpoints_come_in_the_order_asked_whatever_it_is() {
    let push = mesh();
    let g = Generator::new();
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let all: Vec<String> = g
        .generate(types::ENDPOINT, &p, &push, &[])
        .unwrap()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert!(all.len() >= 3 && all.is_sorted(), "{all:?}");
    let names_of = |names: &[String]| -> Vec<String> {
        g.generate(types::ENDPOINT, &p, &push, names)
            .unwrap()
            .iter()
            .map(|r| r.name.clone())
            .collect()
    };
    let (a, b, c) = (all[0].clone(), all[1].clone(), all[all.len() - 1].clone());
    // Sorted, with unknown names before, between and after, and a duplicate.
    let mut sorted = vec![
        "a".to_string(),
        a.clone(),
        b.clone(),
        b.clone(),
        format!("{a}x"),
        "outbound|1||nowhere.svc.cluster.local".to_string(),
        c.clone(),
        "~".to_string(),
    ];
    sorted.sort();
    let known: Vec<String> = sorted.iter().filter(|n| all.contains(n)).cloned().collect();
    assert_eq!(known.len(), 4);
    assert_eq!(names_of(&sorted), known);
    // Unsorted: the order asked.
    let unsorted = vec![c.clone(), format!("{a}y"), a.clone(), b.clone()];
    assert_eq!(names_of(&unsorted), [c, a, b]);
    assert_eq!(names_of(&all), all);
}
