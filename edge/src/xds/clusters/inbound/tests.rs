use super::super::super::testing::{decode, endpoint, generate, port, proxy, service};
use super::super::super::types::CLUSTER;
use crate::proxy::InterceptionMode;
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
use shoal_proto::config::istio::{IngressListener, Sidecar, SidecarPort};
use shoal_proto::model::{NamedConfig, NamespaceConfig, Protocol, ServiceEndpoints};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;

/// The workload at [`WORKLOAD`] in `app` and the proxies of `ing`.
///
/// ```text
/// app: web   :80   http     → WORKLOAD:8080 (and 10.5.0.8, 10.5.0.10: web's other pods)
///      alias :81   http     → WORKLOAD:8080 (same workload port: web's hostname sorts after)
///      db    :5432 tcp      → WORKLOAD:5432
///      raw   :9000 unnamed  → WORKLOAD:9000 (sniffed)
///      rpc   :7070 grpc     → WORKLOAD:7070
///      dns   :53   udp      → WORKLOAD:53   (not proxied)
/// ing: svc   :80   http     → INGRESS_WORKLOAD:8080, replaced by the Sidecar's ingress:
///      8080 HTTP  → 127.0.0.1:8080
///      9090 TCP   → 0.0.0.0:9091 (the workload's IP), captureMode NONE
///      7000 unnamed, no defaultEndpoint (original destination)
/// ```
pub(crate) fn workload_mesh() -> PushContext {
    let app = NamespaceConfig {
        namespace: "app".into(),
        services: vec![
            service(
                "app",
                "web",
                vec![port("http-web", 80, Protocol::Http)],
                Some("10.96.5.1"),
            ),
            service(
                "app",
                "alias",
                vec![port("http-alt", 81, Protocol::Http)],
                Some("10.96.5.2"),
            ),
            service(
                "app",
                "db",
                vec![port("tcp-db", 5432, Protocol::Tcp)],
                Some("10.96.5.3"),
            ),
            service(
                "app",
                "raw",
                vec![port("stuff", 9000, Protocol::Unknown)],
                Some("10.96.5.4"),
            ),
            service(
                "app",
                "rpc",
                vec![port("grpc", 7070, Protocol::Grpc)],
                Some("10.96.5.5"),
            ),
            service(
                "app",
                "dns",
                vec![port("dns", 53, Protocol::Udp)],
                Some("10.96.5.6"),
            ),
        ],
        ..Default::default()
    };
    let ing = NamespaceConfig {
        namespace: "ing".into(),
        services: vec![service(
            "ing",
            "svc",
            vec![port("http", 80, Protocol::Http)],
            None,
        )],
        sidecars: vec![NamedConfig {
            name: "ingress".into(),
            namespace: "ing".into(),
            created: 0,
            spec: Sidecar {
                ingress: vec![
                    ingress(8080, "HTTP", "127.0.0.1:8080", ""),
                    ingress(9090, "TCP", "0.0.0.0:9091", "NONE"),
                    ingress(7000, "", "", ""),
                ],
                ..Default::default()
            },
        }],
        ..Default::default()
    };
    let eps = |ns: &str, name: &str, targets: &[(&str, u32, u32)]| {
        Chunk::Endpoints(ServiceEndpoints {
            service: service(ns, name, vec![], None).key(),
            endpoints: targets
                .iter()
                .map(|(ip, target, service_port)| {
                    let mut ep = endpoint(ip, *target, "v1", "", true);
                    ep.service_port = *service_port;
                    ep
                })
                .collect(),
        })
    };
    PushContext::from_chunks(
        1,
        [
            Chunk::Namespace(app),
            Chunk::Namespace(ing),
            eps(
                "app",
                "web",
                &[
                    (WORKLOAD, 8080, 80),
                    ("10.5.0.8", 8080, 80),
                    ("10.5.0.10", 8080, 80),
                ],
            ),
            eps("app", "alias", &[(WORKLOAD, 8080, 81)]),
            eps("app", "db", &[(WORKLOAD, 5432, 5432)]),
            eps("app", "raw", &[(WORKLOAD, 9000, 9000)]),
            eps("app", "rpc", &[(WORKLOAD, 7070, 7070)]),
            eps("app", "dns", &[(WORKLOAD, 53, 53)]),
            eps("ing", "svc", &[(INGRESS_WORKLOAD, 8080, 80)]),
        ],
    )
}

pub(crate) const WORKLOAD: &str = "10.5.0.7";
pub(crate) const INGRESS_WORKLOAD: &str = "10.6.0.9";

fn ingress(number: u32, protocol: &str, default_endpoint: &str, capture: &str) -> IngressListener {
    IngressListener {
        port: Some(SidecarPort {
            number,
            protocol: protocol.into(),
            name: format!("p{number}"),
        }),
        bind: String::new(),
        capture_mode: capture.into(),
        default_endpoint: default_endpoint.into(),
    }
}

fn inbound_clusters(ns: &str, ip: &str, mode: InterceptionMode) -> Vec<Cluster> {
    generate::<Cluster>(CLUSTER, &proxy(ns, ip, mode), &workload_mesh(), &[])
        .into_iter()
        .filter(|c| c.name.starts_with("inbound|"))
        .collect()
}

fn kind(c: &Cluster) -> cluster::DiscoveryType {
    match c.cluster_discovery_type {
        Some(cluster::ClusterDiscoveryType::Type(t)) => {
            cluster::DiscoveryType::try_from(t).expect("known type")
        }
        _ => panic!("{}: no discovery type", c.name),
    }
}

fn bind(c: &Cluster) -> Option<String> {
    let sa = c.upstream_bind_config.as_ref()?.source_address.as_ref()?;
    Some(sa.address.clone())
}

/// The one static endpoint of `c`, as `ip:port` or a pipe path.
fn static_endpoint(c: &Cluster) -> String {
    let la = c.load_assignment.as_ref().expect("load assignment");
    let ep = &la.endpoints[0].lb_endpoints[0];
    let Some(envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier::Endpoint(
        e,
    )) = &ep.host_identifier
    else {
        panic!("no endpoint")
    };
    match e.address.as_ref().and_then(|a| a.address.as_ref()) {
        Some(address::Address::SocketAddress(sa)) => {
            let Some(socket_address::PortSpecifier::PortValue(p)) = sa.port_specifier else {
                panic!("no port")
            };
            format!("{}:{p}", sa.address)
        }
        Some(address::Address::Pipe(p)) => p.path.clone(),
        other => panic!("unexpected address {other:?}"),
    }
}

#[test]
fn one_original_destination_cluster_per_workload_port() {
    let cs = inbound_clusters("app", WORKLOAD, InterceptionMode::Redirect);
    let names: Vec<&str> = cs.iter().map(|c| c.name.as_str()).collect();
    // One per workload port (8080 once for web and alias), UDP left out; by name.
    assert_eq!(
        names,
        [
            "inbound|5432||",
            "inbound|7070||",
            "inbound|8080||",
            "inbound|9000||"
        ]
    );
    for c in &cs {
        assert_eq!(kind(c), cluster::DiscoveryType::OriginalDst, "{}", c.name);
        assert_eq!(c.lb_policy, cluster::LbPolicy::ClusterProvided as i32);
        assert_eq!(bind(c).as_deref(), Some("127.0.0.6"), "{}", c.name);
    }
    // gRPC is spoken to the workload as HTTP/2; a sniffed port as the client spoke.
    let options = |name: &str| {
        cs.iter()
            .find(|c| c.name == name)
            .unwrap()
            .typed_extension_protocol_options
            .len()
    };
    assert_eq!(options("inbound|7070||"), 1);
    assert_eq!(options("inbound|9000||"), 1);
    assert_eq!(options("inbound|5432||"), 0);
}

#[test]
fn no_inbound_clusters_without_targets_or_capture() {
    // A proxy that no endpoint names serves nothing inbound.
    assert!(inbound_clusters("app", "10.5.0.99", InterceptionMode::Redirect).is_empty());
    // Without interception there is no listener to use them, as in Istio.
    assert!(inbound_clusters("app", WORKLOAD, InterceptionMode::None).is_empty());
}

#[test]
fn sidecar_ingress_replaces_service_targets() {
    let cs = inbound_clusters("ing", INGRESS_WORKLOAD, InterceptionMode::Redirect);
    let names: Vec<&str> = cs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["inbound|7000||", "inbound|8080||", "inbound|9090||"]
    );
    let by = |name: &str| cs.iter().find(|c| c.name == name).unwrap();

    let loopback = by("inbound|8080||");
    assert_eq!(kind(loopback), cluster::DiscoveryType::Static);
    assert_eq!(static_endpoint(loopback), "127.0.0.1:8080");
    assert_eq!(bind(loopback), None, "loopback needs no passthrough source");

    let workload_ip = by("inbound|9090||");
    assert_eq!(kind(workload_ip), cluster::DiscoveryType::Static);
    assert_eq!(
        static_endpoint(workload_ip),
        format!("{INGRESS_WORKLOAD}:9091")
    );
    assert_eq!(bind(workload_ip).as_deref(), Some("127.0.0.6"));

    assert_eq!(
        kind(by("inbound|7000||")),
        cluster::DiscoveryType::OriginalDst
    );

    // Ingress listeners apply without interception too.
    let none = inbound_clusters("ing", INGRESS_WORKLOAD, InterceptionMode::None);
    assert_eq!(none.len(), 3);
}

#[test]
fn unix_default_endpoint_is_a_pipe() {
    let scope = shoal_proto::push_context::PushContext::from_chunks(
        1,
        [Chunk::Namespace(NamespaceConfig {
            namespace: "uds".into(),
            sidecars: vec![NamedConfig {
                name: "s".into(),
                namespace: "uds".into(),
                created: 0,
                spec: Sidecar {
                    ingress: vec![ingress(8080, "HTTP", "unix:///var/run/app.sock", "")],
                    ..Default::default()
                },
            }],
            ..Default::default()
        })],
    )
    .sidecar_scope("uds", &Default::default());
    let cs = super::build(
        &scope,
        &[],
        InterceptionMode::Redirect,
        "10.0.0.1",
        &Default::default(),
    );
    let c = decode_roundtrip(&cs[0]);
    assert_eq!(static_endpoint(&c), "/var/run/app.sock");
    assert_eq!(bind(&c), None);
}

/// Encodes and decodes, as a proxy would see it.
fn decode_roundtrip(c: &Cluster) -> Cluster {
    let r = super::super::super::util::resource(c.name.clone(), c);
    decode(&r)
}
