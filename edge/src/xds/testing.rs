//! A small mesh for the generator tests, and helpers to decode what was generated.
//!
//! ```text
//! shop:   reviews  :9080 http  VIP 10.96.0.10  v1 (us-east/a), v2 (us-east/b), v3 (unhealthy)
//!         ratings  :9080 http, :9090 grpc       consistent hash on x-user
//!         db       :5432 tcp   VIP 10.96.0.12   VirtualService tcp route
//!         cache    :6379 tcp   headless, passthrough
//!         api.example.com :80 http, :443 https  DNS ServiceEntry without endpoints
//! other:  web      :80 http
//! locked: Sidecar REGISTRY_ONLY, egress ./* and shop/*
//! bound:  Sidecar egress listener on 127.0.0.1:8080 (HTTP), hosts shop/*
//! ```

use super::XdsResource;
use crate::proxy::{InterceptionMode, Proxy, ProxyKind};
use shoal_proto::config::istio::*;
use shoal_proto::model::{
    Endpoint, ExportTo, NamedConfig, NamespaceConfig, Protocol, Resolution, Service,
    ServiceEndpoints, ServicePort,
};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;
use std::collections::BTreeMap;

pub const REVIEWS: &str = "reviews.shop.svc.cluster.local";
pub const RATINGS: &str = "ratings.shop.svc.cluster.local";
pub const DB: &str = "db.shop.svc.cluster.local";
pub const API: &str = "api.example.com";

pub fn decode<M: prost::Message + Default>(r: &XdsResource) -> M {
    M::decode(r.resource.value.as_slice()).expect("generated resource decodes")
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn port(name: &str, number: u32, protocol: Protocol) -> ServicePort {
    ServicePort {
        name: name.into(),
        port: number,
        protocol,
    }
}

pub fn service(ns: &str, name: &str, ports: Vec<ServicePort>, vip: Option<&str>) -> Service {
    Service {
        hostname: format!("{name}.{ns}.svc.cluster.local"),
        namespace: ns.into(),
        name: name.into(),
        ports,
        addresses: vip.map(|v| vec![v.to_string()]).unwrap_or_default(),
        resolution: Resolution::ClientSideLb,
        mesh_external: false,
        export_to: ExportTo::default(),
        labels: Default::default(),
        clusters: vec!["c1".into()],
        external_name: String::new(),
    }
}

pub fn endpoint(ip: &str, port: u32, version: &str, locality: &str, healthy: bool) -> Endpoint {
    Endpoint {
        address: ip.into(),
        port,
        service_port: port,
        labels: labels(&[("app", "reviews"), ("version", version)]),
        cluster: "c1".into(),
        network: String::new(),
        locality: locality.into(),
        weight: 1,
        healthy,
        service_account: "reviews".into(),
    }
}

fn named<T>(ns: &str, name: &str, spec: T) -> NamedConfig<T> {
    NamedConfig {
        name: name.into(),
        namespace: ns.into(),
        created: 0,
        spec,
    }
}

fn exact(s: &str) -> Option<StringMatch> {
    Some(StringMatch {
        exact: Some(s.into()),
        ..Default::default()
    })
}

fn dest(host: &str, subset: &str, weight: i32) -> HttpRouteDestination {
    HttpRouteDestination {
        destination: Destination {
            host: host.into(),
            subset: subset.into(),
            port: None,
        },
        weight,
        headers: None,
    }
}

pub fn reviews_vs() -> VirtualService {
    VirtualService {
        hosts: vec![REVIEWS.into()],
        http: vec![
            HttpRoute {
                name: "jason".into(),
                matches: vec![HttpMatchRequest {
                    headers: BTreeMap::from([("end-user".to_string(), exact("jason").unwrap())]),
                    ..Default::default()
                }],
                route: vec![dest(REVIEWS, "v2", 0)],
                ..Default::default()
            },
            HttpRoute {
                name: "api".into(),
                matches: vec![HttpMatchRequest {
                    uri: Some(StringMatch {
                        regex: Some("/api/v[0-9]+/.*".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                route: vec![dest(REVIEWS, "v1", 0)],
                timeout: Some("5s".into()),
                retries: Some(HttpRetry {
                    attempts: 3,
                    per_try_timeout: Some("2s".into()),
                    retry_on: "5xx,503".into(),
                    retry_remote_localities: None,
                }),
                ..Default::default()
            },
            features_route(),
            HttpRoute {
                name: "down".into(),
                matches: vec![HttpMatchRequest {
                    uri: exact("/down"),
                    ..Default::default()
                }],
                direct_response: Some(HttpDirectResponse {
                    status: 503,
                    body: Some(HttpBody {
                        string: Some("down".into()),
                        bytes: None,
                    }),
                }),
                ..Default::default()
            },
            HttpRoute {
                name: "moved".into(),
                matches: vec![HttpMatchRequest {
                    uri: Some(StringMatch {
                        prefix: Some("/old".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                redirect: Some(HttpRedirect {
                    uri: "/new".into(),
                    authority: "new.example.com".into(),
                    port: Some(8443),
                    scheme: "https".into(),
                    redirect_code: 308,
                }),
                ..Default::default()
            },
            HttpRoute {
                name: "split".into(),
                route: vec![dest(REVIEWS, "v1", 80), dest(REVIEWS, "v2", 20)],
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

/// A route with every per-route feature: fault, mirror, CORS, header operations on the
/// route and a destination, a regex rewrite and retries across localities.
fn features_route() -> HttpRoute {
    let ops = |k: &str| HeaderOperations {
        set: BTreeMap::from([(format!("x-{k}-set"), "1".to_string())]),
        add: BTreeMap::from([(format!("x-{k}-add"), "2".to_string())]),
        remove: vec![format!("x-{k}-remove")],
    };
    let headers = Headers {
        request: Some(ops("req")),
        response: Some(ops("resp")),
    };
    let mut v1 = dest(REVIEWS, "v1", 50);
    v1.headers = Some(headers.clone());
    HttpRoute {
        name: "features".into(),
        matches: vec![HttpMatchRequest {
            uri: Some(StringMatch {
                prefix: Some("/features".into()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        route: vec![v1, dest(REVIEWS, "v2", 50)],
        rewrite: Some(HttpRewrite {
            uri_regex_rewrite: Some(RegexRewrite {
                pattern: "^/features/(.*)$".into(),
                rewrite: "/\\1".into(),
            }),
            ..Default::default()
        }),
        retries: Some(HttpRetry {
            attempts: 2,
            retry_remote_localities: Some(true),
            ..Default::default()
        }),
        fault: Some(HttpFaultInjection {
            delay: Some(FaultDelay {
                fixed_delay: Some("1s".into()),
                percentage: Some(Percent { value: 10.0 }),
                percent: None,
            }),
            abort: Some(FaultAbort {
                http_status: Some(503),
                percentage: Some(Percent { value: 0.5 }),
                ..Default::default()
            }),
        }),
        mirror: Some(Destination {
            host: REVIEWS.into(),
            subset: "v2".into(),
            port: None,
        }),
        mirror_percentage: Some(Percent { value: 25.0 }),
        cors_policy: Some(CorsPolicy {
            allow_origins: vec![exact("https://a.example").unwrap()],
            allow_methods: vec!["GET".into(), "POST".into()],
            allow_headers: vec!["x-token".into()],
            max_age: Some("24h".into()),
            allow_credentials: Some(true),
            ..Default::default()
        }),
        headers: Some(headers),
        ..Default::default()
    }
}

pub fn reviews_dr() -> DestinationRule {
    let subset = |name: &str, tp: Option<TrafficPolicy>| Subset {
        name: name.into(),
        labels: labels(&[("version", name)]),
        traffic_policy: tp,
    };
    DestinationRule {
        host: REVIEWS.into(),
        traffic_policy: Some(TrafficPolicy {
            load_balancer: Some(LoadBalancerSettings {
                simple: Some("LEAST_CONN".into()),
                ..Default::default()
            }),
            connection_pool: Some(ConnectionPoolSettings {
                tcp: Some(TcpSettings {
                    max_connections: Some(100),
                    connect_timeout: Some("3s".into()),
                }),
                http: Some(HttpSettings {
                    http1_max_pending_requests: Some(10),
                    http2_max_requests: Some(200),
                    max_retries: Some(5),
                    idle_timeout: Some("30s".into()),
                    ..Default::default()
                }),
            }),
            outlier_detection: Some(OutlierDetection {
                consecutive_5xx_errors: Some(7),
                interval: Some("10s".into()),
                base_ejection_time: Some("30s".into()),
                max_ejection_percent: Some(50),
                ..Default::default()
            }),
            ..Default::default()
        }),
        subsets: vec![
            subset("v1", None),
            subset(
                "v2",
                Some(TrafficPolicy {
                    load_balancer: Some(LoadBalancerSettings {
                        simple: Some("ROUND_ROBIN".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            ),
        ],
        ..Default::default()
    }
}

fn ratings_dr() -> DestinationRule {
    DestinationRule {
        host: RATINGS.into(),
        traffic_policy: Some(TrafficPolicy {
            load_balancer: Some(LoadBalancerSettings {
                consistent_hash: Some(Box::new(ConsistentHashLb {
                    http_header_name: Some("x-user".into()),
                    ..Default::default()
                })),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn db_vs() -> VirtualService {
    VirtualService {
        hosts: vec![DB.into()],
        tcp: vec![TcpRoute {
            matches: vec![],
            route: vec![RouteDestination {
                destination: Destination {
                    host: DB.into(),
                    subset: String::new(),
                    port: Some(PortSelector { number: 5432 }),
                },
                weight: 0,
            }],
        }],
        ..Default::default()
    }
}

pub fn shop() -> NamespaceConfig {
    let mut cache = service(
        "shop",
        "cache",
        vec![port("redis", 6379, Protocol::Tcp)],
        None,
    );
    cache.resolution = Resolution::Passthrough;
    let api = Service {
        hostname: API.into(),
        namespace: "shop".into(),
        name: "api".into(),
        ports: vec![
            port("http", 80, Protocol::Http),
            port("https", 443, Protocol::Https),
        ],
        addresses: vec![],
        resolution: Resolution::Dns,
        mesh_external: true,
        export_to: ExportTo::default(),
        labels: Default::default(),
        clusters: vec!["c1".into()],
        external_name: String::new(),
    };
    NamespaceConfig {
        namespace: "shop".into(),
        services: vec![
            service(
                "shop",
                "reviews",
                vec![port("http", 9080, Protocol::Http)],
                Some("10.96.0.10"),
            ),
            service(
                "shop",
                "ratings",
                vec![
                    port("http", 9080, Protocol::Http),
                    port("grpc", 9090, Protocol::Grpc),
                ],
                Some("10.96.0.11"),
            ),
            service(
                "shop",
                "db",
                vec![port("tcp-pg", 5432, Protocol::Tcp)],
                Some("10.96.0.12"),
            ),
            cache,
            api,
        ],
        virtual_services: vec![
            named("shop", "reviews", reviews_vs()),
            named("shop", "db", db_vs()),
        ],
        destination_rules: vec![
            named("shop", "reviews", reviews_dr()),
            named("shop", "ratings", ratings_dr()),
        ],
        ..Default::default()
    }
}

pub fn reviews_endpoints() -> ServiceEndpoints {
    ServiceEndpoints {
        service: service("shop", "reviews", vec![], None).key(),
        endpoints: vec![
            endpoint("10.0.0.1", 9080, "v1", "us-east/a", true),
            endpoint("10.0.0.2", 9080, "v2", "us-east/b", true),
            endpoint("10.0.0.3", 9080, "v1", "us-east/a", false),
        ],
    }
}

pub fn mesh() -> PushContext {
    let other = NamespaceConfig {
        namespace: "other".into(),
        services: vec![service(
            "other",
            "web",
            vec![port("http-web", 80, Protocol::Http)],
            Some("10.96.1.1"),
        )],
        ..Default::default()
    };
    let locked = NamespaceConfig {
        namespace: "locked".into(),
        sidecars: vec![named(
            "locked",
            "default",
            Sidecar {
                egress: vec![EgressListener {
                    hosts: vec!["./*".into(), "shop/*".into()],
                    ..Default::default()
                }],
                outbound_traffic_policy: Some(OutboundTrafficPolicy {
                    mode: "REGISTRY_ONLY".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )],
        ..Default::default()
    };
    let bound = NamespaceConfig {
        namespace: "bound".into(),
        sidecars: vec![named(
            "bound",
            "egress",
            Sidecar {
                egress: vec![EgressListener {
                    port: Some(SidecarPort {
                        number: 8080,
                        protocol: "HTTP".into(),
                        name: "http-egress".into(),
                    }),
                    bind: "127.0.0.1".into(),
                    hosts: vec!["shop/*".into()],
                    ..Default::default()
                }],
                ..Default::default()
            },
        )],
        ..Default::default()
    };
    PushContext::from_chunks(
        1,
        [
            Chunk::Namespace(shop()),
            Chunk::Namespace(other),
            Chunk::Namespace(locked),
            Chunk::Namespace(bound),
            Chunk::Endpoints(reviews_endpoints()),
        ],
    )
}

pub fn proxy(ns: &str, ip: &str, interception: InterceptionMode) -> Proxy {
    Proxy {
        id: format!("sidecar~{ip}~app-1.{ns}~{ns}.svc.cluster.local"),
        kind: ProxyKind::Sidecar,
        ip: ip.into(),
        workload: format!("app-1.{ns}"),
        namespace: ns.into(),
        labels: labels(&[("app", "productpage")]),
        interception,
        cluster_id: "c1".into(),
        network: String::new(),
        locality: String::new(),
        identity: shoal_proto::security::Identity::Anonymous,
    }
}

/// Generates with a fresh generator and decodes every resource.
pub fn generate<M: prost::Message + Default>(
    type_url: &str,
    proxy: &Proxy,
    push: &PushContext,
    names: &[&str],
) -> Vec<M> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    super::Generator::new()
        .generate(type_url, proxy, push, &names)
        .expect("generates")
        .iter()
        .map(|r| decode(r))
        .collect()
}

/// Decodes a typed config (`Any`) as `M`, checking its type URL.
pub fn unpack<M: prost::Message + prost::Name + Default>(
    any: &envoy_types::pb::google::protobuf::Any,
) -> M {
    assert_eq!(any.type_url, M::type_url());
    M::decode(any.value.as_slice()).expect("typed config decodes")
}
