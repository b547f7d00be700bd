use crate::proxy::{InterceptionMode, Proxy, ProxyKind};
use crate::xds::testing::*;
use crate::xds::types::{LISTENER, ROUTE, SECRET};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, virtual_host};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    DownstreamTlsContext, Secret, secret,
};
use shoal_proto::config::istio::*;
use shoal_proto::config::k8s::SecretSpec;
use shoal_proto::model::{Endpoint, NamedConfig, NamespaceConfig, Protocol, ServiceEndpoints};
use shoal_proto::push_context::PushContext;
use shoal_proto::security::{AuthMethod, Identity, Principal};
use shoal_proto::snapshot::Chunk;

const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

fn named<T>(ns: &str, name: &str, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec,
    }
}

fn server(
    number: u32,
    protocol: &str,
    hosts: &[&str],
    tls: Option<ServerTlsSettings>,
) -> GatewayServer {
    GatewayServer {
        port: Some(GatewayPort {
            number,
            protocol: protocol.into(),
            name: format!("{}-{number}", protocol.to_ascii_lowercase()),
            target_port: None,
        }),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        tls,
        ..Default::default()
    }
}

fn tls(mode: &str, credential: &str) -> Option<ServerTlsSettings> {
    Some(ServerTlsSettings {
        mode: mode.into(),
        credential_name: credential.into(),
        ..Default::default()
    })
}

fn routed(host: &str, to: &str) -> VirtualService {
    VirtualService {
        hosts: vec![host.into()],
        gateways: vec!["istio-system/public".into()],
        http: vec![HttpRoute {
            route: vec![HttpRouteDestination {
                destination: Destination {
                    host: to.into(),
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The test mesh, plus an ingress Gateway in istio-system with HTTP on 80 (redirected
/// to HTTPS for secure.example.com), HTTPS on 443 with a Secret, and a server whose
/// Secret is missing.
fn gateway_mesh() -> PushContext {
    let system = NamespaceConfig {
        namespace: "istio-system".into(),
        gateways: vec![named(
            "istio-system",
            "public",
            Gateway {
                selector: labels(&[("istio", "ingressgateway")]),
                servers: vec![
                    server(80, "HTTP", &["shop/*.example.com"], None),
                    server(
                        8080,
                        "HTTP",
                        &["*"],
                        Some(ServerTlsSettings {
                            https_redirect: true,
                            ..Default::default()
                        }),
                    ),
                    server(
                        443,
                        "HTTPS",
                        &["secure.example.com"],
                        tls("MUTUAL", "secure-cert"),
                    ),
                    GatewayServer {
                        port: Some(GatewayPort {
                            name: "https-missing".into(),
                            ..server(443, "HTTPS", &[], None).port.unwrap()
                        }),
                        ..server(
                            443,
                            "HTTPS",
                            &["missing.example.com"],
                            tls("SIMPLE", "missing"),
                        )
                    },
                ],
            },
        )],
        credentials: vec![
            named(
                "istio-system",
                "secure-cert",
                SecretSpec {
                    cert_chain: PEM.into(),
                    private_key: "-----BEGIN PRIVATE KEY-----\n".into(),
                    ca_cert: String::new(),
                },
            ),
            named(
                "istio-system",
                "secure-cert-cacert",
                SecretSpec {
                    ca_cert: PEM.into(),
                    ..Default::default()
                },
            ),
        ],
        ..Default::default()
    };
    let mut shop = shop();
    shop.virtual_services
        .push(named("shop", "www", routed("www.example.com", REVIEWS)));
    shop.virtual_services.push(named(
        "shop",
        "secure",
        routed("secure.example.com", RATINGS),
    ));
    let mut chunks: Vec<Chunk> = mesh()
        .namespaces()
        .values()
        .filter(|ns| ns.namespace != "shop")
        .map(|ns| Chunk::Namespace((**ns).clone()))
        .collect();
    chunks.push(Chunk::Namespace(shop));
    chunks.push(Chunk::Namespace(system));
    PushContext::from_chunks(2, chunks)
}

fn router() -> Proxy {
    Proxy {
        id: "router~10.2.0.1~ingress-1.istio-system~istio-system.svc.cluster.local".into(),
        kind: ProxyKind::Router,
        labels: labels(&[("istio", "ingressgateway")]),
        ..proxy("istio-system", "10.2.0.1", InterceptionMode::None)
    }
}

#[test]
fn a_router_gets_a_listener_per_port_and_tls_servers_whose_secret_exists() {
    let push = gateway_mesh();
    let listeners: Vec<Listener> = generate(LISTENER, &router(), &push, &[]);
    let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_443", "0.0.0.0_80", "0.0.0.0_8080"]);
    let https = &listeners[0];
    // The server whose Secret is missing is left out, not the port.
    assert_eq!(https.filter_chains.len(), 1);
    let chain = &https.filter_chains[0];
    assert_eq!(
        chain.filter_chain_match.as_ref().unwrap().server_names,
        ["secure.example.com"]
    );
    let socket = chain.transport_socket.as_ref().unwrap();
    let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
        any,
    )) = &socket.config_type
    else {
        panic!("no TLS context")
    };
    let ctx: DownstreamTlsContext = unpack(any);
    let common = ctx.common_tls_context.unwrap();
    assert_eq!(
        common.tls_certificate_sds_secret_configs[0].name,
        "kubernetes://secure-cert"
    );
    assert_eq!(ctx.require_client_certificate.map(|b| b.value), Some(true));
    assert_eq!(
        https.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );
}

#[test]
fn routes_come_from_bound_virtual_services_with_redirects_and_a_404_otherwise() {
    let push = gateway_mesh();
    let configs: Vec<RouteConfiguration> = generate(ROUTE, &router(), &push, &[]);
    let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "http.80",
            "http.8080",
            "https.443.https-443.public.istio-system",
            "https.443.https-missing.public.istio-system",
        ]
    );
    let http80 = &configs[0];
    let domains: Vec<&str> = http80
        .virtual_hosts
        .iter()
        .flat_map(|v| v.domains.iter().map(String::as_str))
        .collect();
    assert_eq!(domains, ["secure.example.com", "www.example.com"]);
    let www = &http80.virtual_hosts[1];
    let Some(route::Action::Route(action)) = &www.routes[0].action else {
        panic!("not a route")
    };
    assert!(format!("{:?}", action.cluster_specifier).contains(REVIEWS));
    // Port 8080 redirects every host to HTTPS.
    assert!(
        configs[1]
            .virtual_hosts
            .iter()
            .all(|v| v.require_tls == virtual_host::TlsRequirementType::All as i32)
    );
    // The HTTPS server serves only its own host.
    assert_eq!(configs[2].virtual_hosts.len(), 1);
    assert_eq!(configs[2].virtual_hosts[0].domains, ["secure.example.com"]);
}

#[test]
fn a_gateway_port_with_no_virtual_service_answers_404() {
    let mut push_ns = gateway_mesh();
    // Drop the VirtualServices: only the blackhole host is left.
    let namespaces: Vec<Chunk> = push_ns
        .namespaces()
        .values()
        .map(|ns| {
            let mut ns = (**ns).clone();
            ns.virtual_services.retain(|vs| vs.spec.gateways.is_empty());
            Chunk::Namespace(ns)
        })
        .collect();
    push_ns = PushContext::from_chunks(3, namespaces);
    let configs: Vec<RouteConfiguration> = generate(ROUTE, &router(), &push_ns, &["http.80"]);
    let vhost = &configs[0].virtual_hosts[0];
    assert_eq!(
        (vhost.name.as_str(), vhost.domains.as_slice()),
        ("blackhole:80", &["*".to_string()][..])
    );
    let Some(route::Action::DirectResponse(d)) = &vhost.routes[0].action else {
        panic!("not a direct response")
    };
    assert_eq!(d.status, 404);
}

#[test]
fn secrets_are_served_from_the_routers_namespace_only() {
    let push = gateway_mesh();
    let names = [
        "kubernetes://secure-cert",
        "kubernetes://secure-cert-cacert",
        "kubernetes://missing",
    ];
    let secrets: Vec<Secret> = generate(SECRET, &router_as("istio-system"), &push, &names);
    assert_eq!(secrets.len(), 2);
    assert!(matches!(
        secrets[0].r#type,
        Some(secret::Type::TlsCertificate(_))
    ));
    assert!(matches!(
        secrets[1].r#type,
        Some(secret::Type::ValidationContext(_))
    ));
    let elsewhere = Proxy {
        namespace: "shop".into(),
        ..router_as("shop")
    };
    let none: Vec<Secret> = generate(SECRET, &elsewhere, &push, &names);
    assert!(none.is_empty());
    // Sidecars are not served secrets.
    let sidecar = proxy("istio-system", "10.1.0.9", InterceptionMode::Redirect);
    let g = crate::xds::Generator::new();
    assert!(g.generate(SECRET, &sidecar, &push, &[]).is_err());
}

/// A router authenticated as `ingressgateway` of `namespace`.
fn router_as(namespace: &str) -> Proxy {
    Proxy {
        identity: Identity::authenticated(Principal {
            trust_domain: "cluster.local".into(),
            namespace: namespace.into(),
            service_account: "ingressgateway".into(),
            method: AuthMethod::Jwt,
        }),
        ..router()
    }
}

#[test]
fn secrets_are_sent_only_where_the_routers_identity_may_read_them() {
    let push = gateway_mesh();
    let names = [
        "kubernetes://secure-cert",
        "kubernetes://secure-cert-cacert",
    ];
    // Its own namespace's Secrets, by name or wildcard.
    let own: Vec<Secret> = generate(SECRET, &router_as("istio-system"), &push, &names);
    assert_eq!(own.len(), 2);
    let all: Vec<Secret> = generate(SECRET, &router_as("istio-system"), &push, &[]);
    assert_eq!(all.len(), 2);
    // An unauthenticated router (plaintext ADS) gets none, whatever it claims.
    for names in [&names[..], &[]] {
        let none: Vec<Secret> = generate(SECRET, &router(), &push, names);
        assert!(none.is_empty());
    }
    // A node claiming istio-system with an identity of another namespace gets none.
    for names in [&names[..], &[]] {
        let none: Vec<Secret> = generate(SECRET, &router_as("shop"), &push, names);
        assert!(none.is_empty());
    }
}

#[test]
fn virtual_services_for_one_host_on_a_gateway_are_merged_in_order() {
    let mut shop = (**gateway_mesh().namespace("shop").unwrap()).clone();
    let mut api = routed("www.example.com", RATINGS);
    api.http[0].matches = vec![HttpMatchRequest {
        uri: Some(StringMatch {
            prefix: Some("/api".into()),
            ..Default::default()
        }),
        ..Default::default()
    }];
    // "a-api" sorts before "www": its /api route comes first, then www's catch-all.
    shop.virtual_services.push(named("shop", "a-api", api));
    shop.virtual_services.sort_by(|a, b| a.name.cmp(&b.name));
    let mut chunks: Vec<Chunk> = gateway_mesh()
        .namespaces()
        .values()
        .filter(|ns| ns.namespace != "shop")
        .map(|ns| Chunk::Namespace((**ns).clone()))
        .collect();
    chunks.push(Chunk::Namespace(shop));
    let push = PushContext::from_chunks(4, chunks);
    let configs: Vec<RouteConfiguration> = generate(ROUTE, &router(), &push, &["http.80"]);
    let www = configs[0]
        .virtual_hosts
        .iter()
        .find(|v| v.domains == ["www.example.com"])
        .expect("www vhost");
    let clusters: Vec<String> = www
        .routes
        .iter()
        .map(|r| match &r.action {
            Some(route::Action::Route(a)) => format!("{:?}", a.cluster_specifier),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(clusters.len(), 2, "{clusters:?}");
    assert!(
        clusters[0].contains(RATINGS) && clusters[1].contains(REVIEWS),
        "{clusters:?}"
    );
}

/// [`gateway_mesh`] with the Service `istio-ingressgateway` in front of the router
/// (10.2.0.1): port 80 to the pod's 8081, 443 to its 8443.
fn gateway_mesh_behind_a_service() -> PushContext {
    let mut system = (**gateway_mesh().namespace("istio-system").unwrap()).clone();
    let front = service(
        "istio-system",
        "istio-ingressgateway",
        vec![
            port("http2", 80, Protocol::Http),
            port("https", 443, Protocol::Https),
        ],
        Some("10.96.0.10"),
    );
    let endpoints = ServiceEndpoints {
        service: front.key(),
        endpoints: [(80, 8081), (443, 8443)]
            .into_iter()
            .map(|(service_port, target)| Endpoint {
                service_port,
                labels: labels(&[("istio", "ingressgateway")]),
                ..endpoint("10.2.0.1", target, "v1", "", true)
            })
            .collect(),
    };
    system.services.push(front);
    let mut chunks: Vec<Chunk> = gateway_mesh()
        .namespaces()
        .values()
        .filter(|ns| ns.namespace != "istio-system")
        .map(|ns| Chunk::Namespace((**ns).clone()))
        .collect();
    chunks.push(Chunk::Namespace(system));
    chunks.push(Chunk::Endpoints(endpoints));
    PushContext::from_chunks(5, chunks)
}

/// Istio's gateway port translation (`resolvePorts`, `gatewayRDSRouteName`; istiod's
/// `gateway_simulation_test` "target port"): a server on Service port 80 is served on
/// the Service's targetPort, listener `0.0.0.0_8081` with route configuration
/// `http.8081`, its virtual hosts still named by the server's port (`host:80`); a
/// server on a port no Service maps (8080) is bound as written; HTTPS route
/// configurations keep the server's port in their name.
#[test]
fn gateway_ports_are_translated_to_the_target_ports_of_the_routers_service() {
    let push = gateway_mesh_behind_a_service();
    let listeners: Vec<Listener> = generate(LISTENER, &router(), &push, &[]);
    let names: Vec<&str> = listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_8080", "0.0.0.0_8081", "0.0.0.0_8443"]);
    let bound = |l: &Listener| {
        match l.address.as_ref().and_then(|a| a.address.as_ref()) {
        Some(envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(s)) => {
            match s.port_specifier {
                Some(
                    envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(
                        p,
                    ),
                ) => p,
                _ => 0,
            }
        }
        _ => 0,
    }
    };
    assert_eq!(bound(&listeners[1]), 8081);

    let configs: Vec<RouteConfiguration> = generate(ROUTE, &router(), &push, &[]);
    let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "http.8080",
            "http.8081",
            "https.443.https-443.public.istio-system",
            "https.443.https-missing.public.istio-system",
        ]
    );
    let vhosts: Vec<&str> = configs[1]
        .virtual_hosts
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(vhosts, ["secure.example.com:80", "www.example.com:80"]);

    // Without the Service (or with its opt-out label), port 80 is bound as written.
    let listeners: Vec<Listener> = generate(LISTENER, &router(), &gateway_mesh(), &[]);
    assert_eq!(listeners[1].name, "0.0.0.0_80");
}

/// Istio's gateway route builder ("check all hostname … with HttpsRedirect set to true,
/// create VirtualHost to redirect"): a server with `httpsRedirect` redirects its hosts
/// even when no VirtualService is bound to it, instead of answering 404.
#[test]
fn https_redirect_works_on_a_server_no_virtual_service_binds() {
    let namespaces: Vec<Chunk> = gateway_mesh()
        .namespaces()
        .values()
        .map(|ns| {
            let mut ns = (**ns).clone();
            ns.virtual_services.retain(|vs| vs.spec.gateways.is_empty());
            Chunk::Namespace(ns)
        })
        .collect();
    let push = PushContext::from_chunks(3, namespaces);
    let configs: Vec<RouteConfiguration> = generate(ROUTE, &router(), &push, &["http.8080"]);
    let [vhost] = configs[0].virtual_hosts.as_slice() else {
        panic!("one virtual host expected: {:?}", configs[0].virtual_hosts)
    };
    assert_eq!(
        (vhost.name.as_str(), vhost.domains.as_slice()),
        ("*:8080", &["*".to_string()][..])
    );
    assert_eq!(
        vhost.require_tls,
        virtual_host::TlsRequirementType::All as i32
    );
}
