use super::*;
use crate::config::istio::{GatewayPort as Port, ServerTlsSettings};
use crate::model::NamespaceConfig;

fn server(number: u32, protocol: &str, hosts: &[&str], tls: Option<&str>) -> GatewayServer {
    GatewayServer {
        port: Some(Port {
            number,
            protocol: protocol.into(),
            name: format!("{}-{number}", protocol.to_ascii_lowercase()),
            target_port: None,
        }),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        tls: tls.map(|mode| ServerTlsSettings {
            mode: mode.into(),
            credential_name: "cert".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn named<T>(namespace: &str, name: &str, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: namespace.into(),
        created: 0,
        spec,
    }
}

fn gateway(
    namespace: &str,
    name: &str,
    selector: &str,
    servers: Vec<GatewayServer>,
) -> NamedConfig<Gateway> {
    let (k, v) = selector.split_once('=').unwrap();
    named(
        namespace,
        name,
        Gateway {
            selector: [(k.to_string(), v.to_string())].into(),
            servers,
        },
    )
}

fn vs(
    namespace: &str,
    name: &str,
    hosts: &[&str],
    gateways: &[&str],
) -> NamedConfig<VirtualService> {
    named(
        namespace,
        name,
        VirtualService {
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            gateways: gateways.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        },
    )
}

fn index(configs: Vec<NamespaceConfig>) -> ConfigIndex {
    let namespaces = configs
        .into_iter()
        .map(|c| (c.namespace.clone(), Arc::new(c)))
        .collect();
    ConfigIndex::build(1, &namespaces)
}

fn labels(s: &str) -> BTreeMap<String, String> {
    let (k, v) = s.split_once('=').unwrap();
    [(k.to_string(), v.to_string())].into()
}

#[test]
fn servers_of_selected_gateways_merge_by_port_and_conflicts_are_left_out() {
    let idx = index(vec![
        NamespaceConfig {
            namespace: "istio-system".into(),
            gateways: vec![
                gateway(
                    "istio-system",
                    "public",
                    "istio=ingressgateway",
                    vec![
                        server(80, "HTTP", &["*.example.com"], None),
                        server(443, "HTTPS", &["a.example.com"], Some("SIMPLE")),
                    ],
                ),
                gateway(
                    "istio-system",
                    "other",
                    "istio=egressgateway",
                    vec![server(80, "HTTP", &["*"], None)],
                ),
            ],
            ..Default::default()
        },
        NamespaceConfig {
            namespace: "shop".into(),
            gateways: vec![gateway(
                "shop",
                "shop-gw",
                "istio=ingressgateway",
                vec![
                    server(80, "HTTP", &["shop/shop.example.com"], None),
                    server(443, "TCP", &["*"], None),
                ],
            )],
            ..Default::default()
        },
    ]);
    let merged = MergedGateway::for_router(&idx, &labels("istio=ingressgateway"), &[]);
    let summary: Vec<(u32, PortKind, usize)> = merged
        .ports
        .iter()
        .map(|p| (p.number, p.kind, p.servers.len()))
        .collect();
    assert_eq!(
        summary,
        vec![(80, PortKind::Http, 2), (443, PortKind::Https, 1)]
    );
    assert_eq!(merged.warnings.len(), 1, "{:?}", merged.warnings);
    assert!(merged.warnings[0].contains("shop/shop-gw"));
    assert_eq!(
        merged.ports[1].servers[0].https_route_name(),
        "https.443.https-443.public.istio-system"
    );
}

#[test]
fn virtual_services_bind_by_gateway_name_host_and_namespace() {
    let idx = index(vec![
        NamespaceConfig {
            namespace: "istio-system".into(),
            gateways: vec![gateway(
                "istio-system",
                "public",
                "istio=ingressgateway",
                vec![server(
                    80,
                    "HTTP",
                    &["shop/*.example.com", "./admin.example.com"],
                    None,
                )],
            )],
            ..Default::default()
        },
        NamespaceConfig {
            namespace: "shop".into(),
            virtual_services: vec![
                vs("shop", "a", &["a.example.com"], &["istio-system/public"]),
                vs(
                    "shop",
                    "admin",
                    &["admin.example.com"],
                    &["istio-system/public"],
                ),
                vs("shop", "mesh-only", &["b.example.com"], &["mesh"]),
                vs("shop", "wild", &["*"], &["istio-system/public", "mesh"]),
            ],
            ..Default::default()
        },
        NamespaceConfig {
            namespace: "other".into(),
            virtual_services: vec![vs(
                "other",
                "c",
                &["c.example.com"],
                &["istio-system/public"],
            )],
            ..Default::default()
        },
    ]);
    let merged = MergedGateway::for_router(&idx, &labels("istio=ingressgateway"), &[]);
    let bound = virtual_services_for(&idx, &merged.ports[0].servers[0], "istio-system");
    let got: Vec<(&str, Vec<String>)> = bound
        .iter()
        .map(|(vs, hosts)| (vs.name.as_str(), hosts.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", vec!["a.example.com".to_string()]),
            ("admin", vec!["admin.example.com".to_string()]),
            // `*` narrows to the server's host; `./admin…` admits only istio-system's
            // VirtualServices, and `other` is admitted by neither host.
            ("wild", vec!["*.example.com".to_string()]),
        ]
    );
    assert!(binds_to(
        &vs("istio-system", "x", &["h"], &["public"]),
        "istio-system",
        "public"
    ));
    assert!(!binds_to(
        &vs("shop", "x", &["h"], &["public"]),
        "istio-system",
        "public"
    ));
}

#[test]
fn port_kinds_follow_protocol_and_tls_mode() {
    let kind = |protocol, tls| PortKind::of(&server(1, protocol, &["*"], tls));
    assert_eq!(kind("HTTP", None), PortKind::Http);
    assert_eq!(kind("GRPC", None), PortKind::Http);
    assert_eq!(kind("HTTPS", Some("SIMPLE")), PortKind::Https);
    assert_eq!(kind("HTTPS", Some("PASSTHROUGH")), PortKind::TlsPassthrough);
    assert_eq!(kind("TLS", Some("MUTUAL")), PortKind::TlsTerminated);
    assert_eq!(kind("TLS", Some("")), PortKind::TlsPassthrough);
    assert_eq!(kind("TCP", None), PortKind::Tcp);
    assert_eq!(
        kind("TLS", Some("AUTO_PASSTHROUGH")),
        PortKind::AutoPassthrough
    );
    assert_eq!(
        kind("HTTPS", Some("AUTO_PASSTHROUGH")),
        PortKind::AutoPassthrough
    );
    // A plain PASSTHROUGH server and an AUTO_PASSTHROUGH one cannot share a port.
    assert_ne!(
        kind("TLS", Some("PASSTHROUGH")),
        kind("TLS", Some("AUTO_PASSTHROUGH"))
    );
}
