//! The outbound chains of a small mesh of its own (namespace `egress`):
//!
//! ```text
//! web      :80 http  VIP 10.96.2.1     legacy :80 tcp  VIP 10.96.2.2 (shares web's port)
//! auto     :8000 unnamed VIP 10.96.2.3 bare   :8001 unnamed, headless
//! a.example.test, b.example.test  :443 TLS, DNS, no address; VirtualService tls on b
//! corp.internal :5000 tcp addresses [10.0.0.0/16]; pinned.internal :5000 tcp [10.1.2.3/32]
//! vault.internal :8443 https VIP 10.96.2.9, VirtualService tls: its name to subset v2
//! proxied: Sidecar ALLOW_ANY with egressProxy egress.example.test:3128
//! ```

use super::super::super::testing::{generate, port, proxy, service, unpack};
use super::super::super::types::{LISTENER, ROUTE};
use super::*;
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use shoal_proto::config::istio::{
    Destination, OutboundTrafficPolicy, PortSelector, RouteDestination, Sidecar,
    TlsMatchAttributes, TlsRoute, VirtualService,
};
use shoal_proto::model::{NamedConfig, NamespaceConfig, Resolution};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;

fn entry(host: &str, p: u32, protocol: Protocol, addresses: &[&str]) -> Service {
    let mut svc = service("egress", host, vec![port("p", p, protocol)], None);
    svc.hostname = host.into();
    svc.addresses = addresses.iter().map(|a| a.to_string()).collect();
    svc.resolution = Resolution::Dns;
    svc.mesh_external = true;
    svc
}

fn named<T>(ns: &str, name: &str, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec,
    }
}

fn tls_route_vs() -> VirtualService {
    VirtualService {
        hosts: vec!["b.example.test".into()],
        tls: vec![TlsRoute {
            matches: vec![TlsMatchAttributes {
                sni_hosts: vec!["b.example.test".into()],
                port: Some(443),
                ..Default::default()
            }],
            route: vec![RouteDestination {
                destination: Destination {
                    host: "a.example.test".into(),
                    subset: String::new(),
                    port: Some(PortSelector { number: 443 }),
                },
                weight: 0,
            }],
        }],
        ..Default::default()
    }
}

/// `vault.internal` (a VIP): the name `vault.internal` to subset `v2`.
fn vault_vs() -> VirtualService {
    VirtualService {
        hosts: vec!["vault.internal".into()],
        tls: vec![TlsRoute {
            matches: vec![TlsMatchAttributes {
                sni_hosts: vec!["vault.internal".into()],
                ..Default::default()
            }],
            route: vec![RouteDestination {
                destination: Destination {
                    host: "vault.internal".into(),
                    subset: "v2".into(),
                    port: None,
                },
                weight: 0,
            }],
        }],
        ..Default::default()
    }
}

fn egress_mesh() -> PushContext {
    let mut headless = service(
        "egress",
        "bare",
        vec![port("bare", 8001, Protocol::Unknown)],
        None,
    );
    headless.resolution = Resolution::Passthrough;
    let egress = NamespaceConfig {
        namespace: "egress".into(),
        services: vec![
            service(
                "egress",
                "web",
                vec![port("http", 80, Protocol::Http)],
                Some("10.96.2.1"),
            ),
            service(
                "egress",
                "legacy",
                vec![port("tcp", 80, Protocol::Tcp)],
                Some("10.96.2.2"),
            ),
            service(
                "egress",
                "auto",
                vec![port("web", 8000, Protocol::Unknown)],
                Some("10.96.2.3"),
            ),
            headless,
            entry("a.example.test", 443, Protocol::Tls, &[]),
            entry("b.example.test", 443, Protocol::Tls, &[]),
            entry("corp.internal", 5000, Protocol::Tcp, &["10.0.0.0/16"]),
            entry("pinned.internal", 5000, Protocol::Tcp, &["10.1.2.3/32"]),
            entry("egress.example.test", 3128, Protocol::Tcp, &[]),
            entry("vault.internal", 8443, Protocol::Https, &["10.96.2.9"]),
        ],
        virtual_services: vec![
            named("egress", "b", tls_route_vs()),
            named("egress", "vault", vault_vs()),
        ],
        ..Default::default()
    };
    let proxied = NamespaceConfig {
        namespace: "proxied".into(),
        sidecars: vec![named(
            "proxied",
            "default",
            Sidecar {
                outbound_traffic_policy: Some(OutboundTrafficPolicy {
                    mode: "ALLOW_ANY".into(),
                    egress_proxy: Some(Destination {
                        host: "egress.example.test".into(),
                        subset: String::new(),
                        port: Some(PortSelector { number: 3128 }),
                    }),
                }),
                ..Default::default()
            },
        )],
        ..Default::default()
    };
    PushContext::from_chunks(1, [Chunk::Namespace(egress), Chunk::Namespace(proxied)])
}

fn listeners(ns: &str) -> Vec<Listener> {
    let p = proxy(ns, "10.1.0.5", InterceptionMode::Redirect);
    generate(LISTENER, &p, &egress_mesh(), &[])
}

fn find<'a>(ls: &'a [Listener], name: &str) -> &'a Listener {
    ls.iter().find(|l| l.name == name).unwrap_or_else(|| {
        panic!(
            "no listener {name} in {:?}",
            ls.iter().map(|l| &l.name).collect::<Vec<_>>()
        )
    })
}

fn filter_names(l: &Listener) -> Vec<&str> {
    l.listener_filters.iter().map(|f| f.name.as_str()).collect()
}

/// What a chain does: `rds:<name>` or `tcp:<cluster>`.
fn action(chain: &FilterChain) -> String {
    let f = &chain.filters[0];
    let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
        panic!("untyped filter")
    };
    if f.name.ends_with("tcp_proxy") {
        let proxy: TcpProxy = unpack(any);
        match proxy.cluster_specifier {
            Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => format!("tcp:{c}"),
            other => panic!("unexpected {other:?}"),
        }
    } else {
        use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
            HttpConnectionManager, http_connection_manager::RouteSpecifier,
        };
        let hcm: HttpConnectionManager = unpack(any);
        match hcm.route_specifier {
            Some(RouteSpecifier::Rds(rds)) => format!("rds:{}", rds.route_config_name),
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn ranges(chain: &FilterChain) -> Vec<String> {
    chain
        .filter_chain_match
        .iter()
        .flat_map(|m| m.prefix_ranges.iter())
        .map(|r| {
            format!(
                "{}/{}",
                r.address_prefix,
                r.prefix_len.unwrap_or_default().value
            )
        })
        .collect()
}

#[test]
fn a_tcp_service_on_an_http_port_is_matched_by_its_vip_before_http() {
    let ls = listeners("egress");
    assert!(!ls.iter().any(|l| l.name == "10.96.2.2_80"));
    let l = find(&ls, "0.0.0.0_80");
    assert_eq!(l.filter_chains.len(), 2);
    assert_eq!(ranges(&l.filter_chains[0]), ["10.96.2.2/32"]);
    assert_eq!(
        action(&l.filter_chains[0]),
        "tcp:outbound|80||legacy.egress.svc.cluster.local"
    );
    assert_eq!(action(&l.filter_chains[1]), "rds:80");
}

/// Istio's outbound HTTP listener on the wildcard address (`buildSidecarOutboundListener`,
/// "a fall through filter chain … to allow arbitrary egress TCP traffic pass through
/// when its port is conflicted with existing HTTP services"): the HTTP chain matches
/// plaintext the HTTP inspector found to be HTTP, and TCP or TLS to a host the mesh
/// does not know takes the default chain to `PassthroughCluster` (ALLOW_ANY) or
/// `BlackHoleCluster` (REGISTRY_ONLY), instead of failing in the HTTP codec.
#[test]
fn tcp_to_an_http_port_falls_through_to_passthrough_or_blackhole() {
    let ls = listeners("egress");
    let l = find(&ls, "0.0.0.0_80");
    let m = l.filter_chains[1].filter_chain_match.as_ref().unwrap();
    assert_eq!(m.transport_protocol, "raw_buffer");
    assert_eq!(m.application_protocols, ["http/1.1", "h2c"]);
    assert_eq!(filter_names(l), ["envoy.filters.listener.http_inspector"]);
    assert_eq!(
        action(l.default_filter_chain.as_ref().unwrap()),
        "tcp:PassthroughCluster"
    );

    let mut chunks: Vec<Chunk> = egress_mesh()
        .namespaces()
        .values()
        .map(|ns| Chunk::Namespace((**ns).clone()))
        .collect();
    chunks.push(Chunk::Namespace(NamespaceConfig {
        namespace: "locked".into(),
        sidecars: vec![named(
            "locked",
            "default",
            Sidecar {
                outbound_traffic_policy: Some(OutboundTrafficPolicy {
                    mode: "REGISTRY_ONLY".into(),
                    egress_proxy: None,
                }),
                ..Default::default()
            },
        )],
        ..Default::default()
    }));
    let push = PushContext::from_chunks(2, chunks);
    let p = proxy("locked", "10.1.0.6", InterceptionMode::Redirect);
    let ls: Vec<Listener> = generate(LISTENER, &p, &push, &[]);
    let l = find(&ls, "0.0.0.0_80");
    assert_eq!(
        action(l.default_filter_chain.as_ref().unwrap()),
        "tcp:BlackHoleCluster"
    );

    // Bound to the proxy's own address (no capture) the port is HTTP alone, as in Istio.
    let p = proxy("egress", "10.1.0.5", InterceptionMode::None);
    let ls: Vec<Listener> = generate(LISTENER, &p, &egress_mesh(), &[]);
    let l = find(&ls, "10.1.0.5_80");
    assert!(l.filter_chains[1].filter_chain_match.is_none());
    assert!(l.default_filter_chain.is_none());
}

#[test]
fn unnamed_ports_are_sniffed() {
    let ls = listeners("egress");
    for (name, cluster) in [
        (
            "10.96.2.3_8000",
            "outbound|8000||auto.egress.svc.cluster.local",
        ),
        (
            "0.0.0.0_8001",
            "outbound|8001||bare.egress.svc.cluster.local",
        ),
    ] {
        let l = find(&ls, name);
        assert_eq!(
            filter_names(l),
            ["envoy.filters.listener.http_inspector"],
            "{name}"
        );
        let [http, tcp] = l.filter_chains.as_slice() else {
            panic!("{name}: two chains expected")
        };
        let m = http.filter_chain_match.as_ref().unwrap();
        assert_eq!(m.application_protocols, ["http/1.1", "h2c"]);
        assert_eq!(m.transport_protocol, "raw_buffer");
        let port = name.rsplit('_').next().unwrap();
        assert_eq!(action(http), format!("rds:{port}"));
        // Its requests announce HTTP on the mesh's mTLS (their clusters offer TCP's ALPN).
        let Some(filter::ConfigType::TypedConfig(any)) = &http.filters[0].config_type else {
            panic!("untyped filter")
        };
        let hcm: envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager = unpack(any);
        assert_eq!(
            hcm.http_filters[0].name,
            "envoy.filters.http.set_filter_state"
        );
        let Some(http_filter::ConfigType::TypedConfig(state)) = &hcm.http_filters[0].config_type
        else {
            panic!("untyped filter")
        };
        let state = String::from_utf8_lossy(&state.value).to_string();
        assert!(
            state.contains("envoy.network.application_protocols")
                && state.contains("istio-http/1.1")
        );
        // Plaintext too: Envoy never backtracks from the transport protocol it picked.
        let m = tcp.filter_chain_match.as_ref().unwrap();
        assert_eq!(m.transport_protocol, "raw_buffer");
        assert!(m.application_protocols.is_empty());
        assert_eq!(action(tcp), format!("tcp:{cluster}"));
    }
    // Their detected HTTP has route configurations to go to.
    let p = proxy("egress", "10.1.0.5", InterceptionMode::Redirect);
    let routes: Vec<RouteConfiguration> = generate(ROUTE, &p, &egress_mesh(), &["8000", "8001"]);
    assert_eq!(routes.len(), 2);
    assert!(
        routes[0]
            .virtual_hosts
            .iter()
            .any(|v| v.name == "auto.egress.svc.cluster.local:8000")
    );
}

#[test]
fn tls_services_without_a_vip_are_told_apart_by_sni() {
    let ls = listeners("egress");
    let l = find(&ls, "0.0.0.0_443");
    assert_eq!(filter_names(l), ["envoy.filters.listener.tls_inspector"]);
    let by_sni: Vec<(Vec<String>, String)> = l
        .filter_chains
        .iter()
        .map(|c| {
            (
                c.filter_chain_match.as_ref().unwrap().server_names.clone(),
                action(c),
            )
        })
        .collect();
    assert_eq!(
        by_sni,
        [
            (
                vec!["a.example.test".into()],
                "tcp:outbound|443||a.example.test".into()
            ),
            // The VirtualService's tls route claims b's name for a's cluster.
            (
                vec!["b.example.test".into()],
                "tcp:outbound|443||a.example.test".into()
            ),
        ]
    );
    // Unknown names go where unknown traffic goes.
    assert_eq!(
        action(l.default_filter_chain.as_ref().unwrap()),
        "tcp:PassthroughCluster"
    );
}

#[test]
fn a_tls_service_with_a_vip_routes_by_sni_on_its_own_listener() {
    let ls = listeners("egress");
    let l = find(&ls, "10.96.2.9_8443");
    assert_eq!(filter_names(l), ["envoy.filters.listener.tls_inspector"]);
    let [sni, rest] = l.filter_chains.as_slice() else {
        panic!("two chains expected")
    };
    let m = sni.filter_chain_match.as_ref().unwrap();
    assert_eq!(m.server_names, ["vault.internal"]);
    assert_eq!(action(sni), "tcp:outbound|8443|v2|vault.internal");
    assert!(rest.filter_chain_match.is_none());
    assert_eq!(action(rest), "tcp:outbound|8443||vault.internal");
}

#[test]
fn cidr_addresses_match_on_the_wildcard_and_a_single_ip_stays_a_vip() {
    let ls = listeners("egress");
    assert!(
        !ls.iter().any(|l| l.name.contains('/')),
        "no listener at a CIDR"
    );
    let l = find(&ls, "0.0.0.0_5000");
    assert_eq!(l.filter_chains.len(), 1);
    assert_eq!(ranges(&l.filter_chains[0]), ["10.0.0.0/16"]);
    assert_eq!(
        action(&l.filter_chains[0]),
        "tcp:outbound|5000||corp.internal"
    );
    let pinned = find(&ls, "10.1.2.3_5000");
    assert_eq!(
        action(&pinned.filter_chains[0]),
        "tcp:outbound|5000||pinned.internal"
    );
}

#[test]
fn egress_proxy_takes_unknown_traffic() {
    let ls = listeners("proxied");
    let outbound = find(&ls, "virtualOutbound");
    assert_eq!(
        action(outbound.default_filter_chain.as_ref().unwrap()),
        "tcp:outbound|3128||egress.example.test"
    );
    let p = proxy("proxied", "10.1.0.5", InterceptionMode::Redirect);
    let routes: Vec<RouteConfiguration> = generate(ROUTE, &p, &egress_mesh(), &["80"]);
    let allow_any = routes[0].virtual_hosts.last().unwrap();
    assert_eq!(allow_any.name, "allow_any");
    let Some(route::Action::Route(r)) = &allow_any.routes[0].action else {
        panic!("not a route")
    };
    assert_eq!(
        r.cluster_specifier,
        Some(route_action::ClusterSpecifier::Cluster(
            "outbound|3128||egress.example.test".into()
        ))
    );
    // Without an egress proxy: the passthrough.
    let ls = listeners("egress");
    assert_eq!(
        action(
            find(&ls, "virtualOutbound")
                .default_filter_chain
                .as_ref()
                .unwrap()
        ),
        "tcp:PassthroughCluster"
    );
}

#[test]
fn without_capture_each_port_has_one_listener_on_the_proxy_ip() {
    let p = proxy("egress", "10.1.0.5", InterceptionMode::None);
    let ls: Vec<Listener> = generate(LISTENER, &p, &egress_mesh(), &[]);
    let names: Vec<&str> = ls.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "10.1.0.5_3128",
            "10.1.0.5_443",
            "10.1.0.5_5000",
            "10.1.0.5_80",
            "10.1.0.5_8000",
            "10.1.0.5_8001",
            "10.1.0.5_8443",
        ]
    );
    // The HTTP port's listener keeps its VIP chain and its HTTP chain.
    assert_eq!(find(&ls, "10.1.0.5_80").filter_chains.len(), 2);
}

fn sni_route(host: &str, to: &str) -> VirtualService {
    VirtualService {
        hosts: vec![host.into()],
        tls: vec![TlsRoute {
            matches: vec![TlsMatchAttributes {
                sni_hosts: vec![host.into()],
                ..Default::default()
            }],
            route: vec![RouteDestination {
                destination: Destination {
                    host: to.into(),
                    subset: String::new(),
                    port: None,
                },
                weight: 0,
            }],
        }],
        ..Default::default()
    }
}

/// ServiceEntry addresses as Istio reads them: a full-length prefix is an address
/// (ServiceEntry conversion), an IPv6 `/32` a range; TLS entries sharing a range are
/// told apart by their host names (`buildSidecarOutboundTLSFilterChainOpts` matches a
/// TLS service with a CIDR on its hostname); TLS entries sharing a VIP keep their
/// VirtualServices' SNI routes on the one listener (`mergeTCPFilterChains`).
#[test]
fn service_entry_addresses_ipv6_ranges_and_shared_addresses() {
    let ns = NamespaceConfig {
        namespace: "egress".into(),
        services: vec![
            entry("v6range.test", 6000, Protocol::Tcp, &["2001:db8::/32"]),
            entry("v6host.test", 6001, Protocol::Tcp, &["2001:db8::5/128"]),
            entry("x.tls.test", 9443, Protocol::Tls, &["10.20.0.0/16"]),
            entry("y.tls.test", 9443, Protocol::Tls, &["10.20.0.0/16"]),
            entry("p.vip.test", 8444, Protocol::Tls, &["10.96.3.1"]),
            entry("q.vip.test", 8444, Protocol::Tls, &["10.96.3.1"]),
        ],
        virtual_services: vec![
            named("egress", "p", sni_route("p.vip.test", "p.vip.test")),
            named("egress", "q", sni_route("q.vip.test", "q.vip.test")),
        ],
        ..Default::default()
    };
    let push = PushContext::from_chunks(1, [Chunk::Namespace(ns)]);
    let p = proxy("egress", "10.1.0.5", InterceptionMode::Redirect);
    let ls: Vec<Listener> = generate(LISTENER, &p, &push, &[]);

    let v6 = find(&ls, "0.0.0.0_6000");
    assert_eq!(ranges(&v6.filter_chains[0]), ["2001:db8::/32"]);
    find(&ls, "2001:db8::5_6001");

    let shared_range = find(&ls, "0.0.0.0_9443");
    let by_sni: Vec<(Vec<String>, Vec<String>, String)> = shared_range
        .filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.as_ref().unwrap();
            (ranges(c), m.server_names.clone(), action(c))
        })
        .collect();
    assert_eq!(
        by_sni,
        [
            (
                vec!["10.20.0.0/16".to_string()],
                vec!["x.tls.test".to_string()],
                "tcp:outbound|9443||x.tls.test".to_string()
            ),
            (
                vec!["10.20.0.0/16".to_string()],
                vec!["y.tls.test".to_string()],
                "tcp:outbound|9443||y.tls.test".to_string()
            ),
        ]
    );
    assert_eq!(
        filter_names(shared_range),
        ["envoy.filters.listener.tls_inspector"]
    );

    let shared_vip = find(&ls, "10.96.3.1_8444");
    let routed: Vec<(Vec<String>, String)> = shared_vip
        .filter_chains
        .iter()
        .map(|c| {
            let names = c
                .filter_chain_match
                .as_ref()
                .map(|m| m.server_names.clone())
                .unwrap_or_default();
            (names, action(c))
        })
        .collect();
    assert_eq!(
        routed,
        [
            (
                vec!["p.vip.test".to_string()],
                "tcp:outbound|8444||p.vip.test".to_string()
            ),
            (vec![], "tcp:outbound|8444||p.vip.test".to_string()),
            (
                vec!["q.vip.test".to_string()],
                "tcp:outbound|8444||q.vip.test".to_string()
            ),
        ]
    );
}
