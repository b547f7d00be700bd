//! Proves the real Envoy accepts what we generate: the output for the test mesh goes into
//! a bootstrap's `static_resources`, written as a binary `Bootstrap` proto (`.pb`), and
//! `envoy --mode validate` must accept it.
//!
//! Two bootstraps per proxy kind: the output as served (RDS and EDS over ADS, with an ADS
//! config so Envoy accepts those sources), and the output wired together (route
//! configurations inlined into their listeners with cluster validation on, every EDS
//! cluster made STATIC with its generated assignment), so Envoy also checks every route's
//! and every assignment's content, and that each route names a cluster that exists.
//!
//! Skipped, with a notice, where no Envoy binary is installed (`SHOAL_ENVOY` or
//! `.venv/bin/envoy`).

use super::clusters::inbound::tests::{INGRESS_WORKLOAD, WORKLOAD, workload_mesh};
use super::testing::{decode, mesh, proxy};
use super::util::{address, any};
use super::{Generator, XdsResource, types};
use crate::proxy::{InterceptionMode, Proxy};
use envoy_types::pb::envoy::config::bootstrap::v3::{Bootstrap, bootstrap};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    ApiConfigSource, ApiVersion, GrpcService, Http2ProtocolOptions, Node, api_config_source,
    grpc_service,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options,
};
use envoy_types::pb::google::protobuf::BoolValue;
use prost::{Message, Name};
use shoal_proto::push_context::PushContext;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

const XDS_CLUSTER: &str = "xds-grpc";

fn envoy_binary() -> Option<PathBuf> {
    let configured = std::env::var_os("SHOAL_ENVOY").map(PathBuf::from);
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/envoy");
    configured.into_iter().chain([venv]).find(|p| p.is_file())
}

fn generate(g: &Generator, push: &PushContext, type_url: &str, p: &Proxy) -> Vec<Arc<XdsResource>> {
    g.generate(type_url, p, push, &[]).expect("generates")
}

/// The static cluster Envoy's ADS stream would use.
fn xds_cluster() -> Cluster {
    grpc_cluster(XDS_CLUSTER, 15010)
}

/// The agent's SDS cluster of an Istio bootstrap (`sds-grpc`), which the mesh's mTLS
/// reads the workload certificate and root from.
fn sds_cluster() -> Cluster {
    grpc_cluster(super::security::mesh_tls::SDS_CLUSTER, 15020)
}

/// A static HTTP/2 cluster `name` at 127.0.0.1:`port`.
fn grpc_cluster(name: &str, port: u32) -> Cluster {
    let h2 = HttpProtocolOptions {
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            Http2ProtocolOptions::default(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    let mut c = Cluster {
        name: name.into(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Static as i32,
        )),
        load_assignment: Some(ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(
                        envoy_types::pb::envoy::config::endpoint::v3::Endpoint {
                            address: Some(address("127.0.0.1", port)),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    c.typed_extension_protocol_options
        .insert(HttpProtocolOptions::full_name(), any(&h2));
    c
}

fn bootstrap(p: &Proxy, clusters: Vec<Cluster>, listeners: Vec<Listener>) -> Bootstrap {
    Bootstrap {
        node: Some(Node {
            id: p.id.clone(),
            cluster: "shoal-test".into(),
            ..Default::default()
        }),
        static_resources: Some(bootstrap::StaticResources {
            clusters,
            listeners,
            ..Default::default()
        }),
        dynamic_resources: Some(bootstrap::DynamicResources {
            ads_config: Some(ApiConfigSource {
                api_type: api_config_source::ApiType::Grpc as i32,
                transport_api_version: ApiVersion::V3 as i32,
                grpc_services: vec![GrpcService {
                    target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
                        grpc_service::EnvoyGrpc {
                            cluster_name: XDS_CLUSTER.into(),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The generated output as Envoy would receive it over ADS.
fn as_served(g: &Generator, push: &PushContext, p: &Proxy) -> Bootstrap {
    let mut clusters: Vec<Cluster> = generate(g, push, types::CLUSTER, p)
        .iter()
        .map(|r| decode(r))
        .collect();
    clusters.push(xds_cluster());
    clusters.push(sds_cluster());
    let listeners = generate(g, push, types::LISTENER, p)
        .iter()
        .map(|r| decode(r))
        .collect();
    bootstrap(p, clusters, listeners)
}

/// The generated output wired together: routes inlined (cluster names checked), EDS
/// clusters static with their generated assignments.
fn wired(g: &Generator, push: &PushContext, p: &Proxy) -> Bootstrap {
    let assignments: BTreeMap<String, ClusterLoadAssignment> =
        generate(g, push, types::ENDPOINT, p)
            .iter()
            .map(|r| (r.name.clone(), decode(r)))
            .collect();
    let routes: BTreeMap<String, RouteConfiguration> = generate(g, push, types::ROUTE, p)
        .iter()
        .map(|r| (r.name.clone(), decode(r)))
        .collect();
    let mut clusters: Vec<Cluster> = generate(g, push, types::CLUSTER, p)
        .iter()
        .map(|r| decode(r))
        .collect();
    for c in &mut clusters {
        if let Some(la) = assignments.get(&c.name) {
            c.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Static as i32,
            ));
            c.eds_cluster_config = None;
            c.load_assignment = Some(la.clone());
        }
    }
    assert!(
        clusters.iter().all(|c| c.eds_cluster_config.is_none()),
        "every EDS cluster has an assignment"
    );
    clusters.push(xds_cluster());
    clusters.push(sds_cluster());
    let mut listeners: Vec<Listener> = generate(g, push, types::LISTENER, p)
        .iter()
        .map(|r| decode(r))
        .collect();
    let mut inlined = 0;
    for l in &mut listeners {
        for chain in &mut l.filter_chains {
            for f in &mut chain.filters {
                let Some(filter::ConfigType::TypedConfig(cfg)) = &mut f.config_type else {
                    continue;
                };
                if cfg.type_url != HttpConnectionManager::type_url() {
                    continue;
                }
                let mut hcm = HttpConnectionManager::decode(cfg.value.as_slice()).unwrap();
                let mut rc = match &hcm.route_specifier {
                    Some(http_connection_manager::RouteSpecifier::Rds(rds)) => routes
                        .get(&rds.route_config_name)
                        .unwrap_or_else(|| {
                            panic!("no route configuration {}", rds.route_config_name)
                        })
                        .clone(),
                    // Inbound routes are inline already.
                    Some(http_connection_manager::RouteSpecifier::RouteConfig(rc)) => rc.clone(),
                    _ => panic!("listener {} has no routes", l.name),
                };
                rc.validate_clusters = Some(BoolValue { value: true });
                hcm.route_specifier =
                    Some(http_connection_manager::RouteSpecifier::RouteConfig(rc));
                *cfg = any(&hcm);
                inlined += 1;
            }
        }
    }
    assert!(inlined > 0);
    bootstrap(p, clusters, listeners)
}

/// Runs `envoy --mode validate` on `b`: whether it passed, and its log.
fn run_validate(envoy: &std::path::Path, b: &Bootstrap) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bootstrap.pb");
    std::fs::write(&path, b.encode_to_vec()).unwrap();
    let base_id: u32 = rand::random_range(10_000..1_000_000);
    let out = Command::new(envoy)
        .args(["--mode", "validate", "-l", "warning", "-c"])
        .arg(&path)
        .args(["--base-id", &base_id.to_string()])
        .output()
        .expect("envoy runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), log)
}

fn validate(envoy: &std::path::Path, what: &str, b: &Bootstrap) {
    let (ok, log) = run_validate(envoy, b);
    assert!(ok, "Envoy rejected {what}:\n{log}");
}

#[test]
fn envoy_accepts_generated_config() {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: no Envoy binary (set SHOAL_ENVOY or install .venv/bin/envoy)");
        return;
    };
    let g = Generator::new();
    let push = mesh();
    for (ns, mode) in [
        ("shop", InterceptionMode::Redirect),
        ("shop", InterceptionMode::None),
        ("shop", InterceptionMode::Tproxy),
        ("locked", InterceptionMode::Redirect),
        ("bound", InterceptionMode::Redirect),
        ("bound", InterceptionMode::None),
    ] {
        for meshed in [false, true] {
            let mut p = proxy(ns, "10.1.0.5", mode);
            if meshed {
                // An injected workload: auto mTLS and PERMISSIVE inbound chains.
                p.labels
                    .insert("security.istio.io/tlsMode".into(), "istio".into());
            }
            validate(
                &envoy,
                &format!("{ns} {mode:?} meshed={meshed} as served"),
                &as_served(&g, &push, &p),
            );
            validate(
                &envoy,
                &format!("{ns} {mode:?} meshed={meshed} wired"),
                &wired(&g, &push, &p),
            );
        }
    }
    // Inbound: a workload with HTTP, TCP, gRPC and unnamed ports, and Sidecar ingress.
    let workloads = workload_mesh();
    for (ns, ip, mode) in [
        ("app", WORKLOAD, InterceptionMode::Redirect),
        ("app", WORKLOAD, InterceptionMode::Tproxy),
        ("ing", INGRESS_WORKLOAD, InterceptionMode::Redirect),
        ("ing", INGRESS_WORKLOAD, InterceptionMode::None),
    ] {
        for meshed in [false, true] {
            let mut p = proxy(ns, ip, mode);
            if meshed {
                p.labels
                    .insert("security.istio.io/tlsMode".into(), "istio".into());
            }
            let what = format!("{ns} {mode:?} meshed={meshed}");
            validate(
                &envoy,
                &format!("{what} as served"),
                &as_served(&g, &workloads, &p),
            );
            validate(&envoy, &format!("{what} wired"), &wired(&g, &workloads, &p));
        }
    }

    // Policy: STRICT mTLS and AuthorizationPolicies of every shape on a meshed workload,
    // CUSTOM through an HTTP and a gRPC ext_authz provider, and one that is not defined.
    for provider in ["http-authz", "grpc-authz", "undefined"] {
        // Each variant is the same version of the mesh: a fresh generator for each.
        let g = Generator::new();
        let policed = policed(&workloads, provider);
        let mut p = proxy("app", WORKLOAD, InterceptionMode::Redirect);
        p.labels
            .insert("security.istio.io/tlsMode".into(), "istio".into());
        validate(
            &envoy,
            &format!("app policed ({provider}) as served"),
            &as_served(&g, &policed, &p),
        );
        let what = format!("app policed ({provider}) wired");
        let wired = wired(&g, &policed, &p);
        // Sub-messages are encoded: look for the filter's name in the bytes.
        let bytes = prost::Message::encode_to_vec(&wired);
        let has_ext_authz = bytes
            .windows(b"envoy.filters.http.ext_authz".len())
            .any(|w| w == b"envoy.filters.http.ext_authz");
        assert_eq!(has_ext_authz, provider != "undefined", "{what}");
        validate(&envoy, &what, &wired);
    }

    // The check has teeth: a route to a cluster that does not exist is refused.
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let mut broken = wired(&g, &push, &p);
    let statics = broken.static_resources.as_mut().unwrap();
    statics
        .clusters
        .retain(|c| c.name != "outbound|80||web.other.svc.cluster.local");
    let (ok, log) = run_validate(&envoy, &broken);
    assert!(!ok, "Envoy accepted a route to a missing cluster:\n{log}");
    assert!(log.contains("web.other"), "{log}");
}

/// `base` with, in `app`, STRICT mTLS, AuthorizationPolicies using every field, the
/// CUSTOM one naming `provider` (the mesh config defines `http-authz` and `grpc-authz`),
/// and a RequestAuthentication using every field (inline keys, and a `jwksUri` never
/// fetched).
fn policed(base: &PushContext, provider: &str) -> PushContext {
    use shoal_proto::config::extension_provider::{ExtAuthzGrpc, ExtAuthzHttp, ExtensionProvider};
    use shoal_proto::config::mesh::MeshConfig;
    use shoal_proto::config::security::{
        AuthorizationPolicy, AuthorizationRule, ClaimToHeader, Condition, JwtHeader, JwtRule,
        Operation, PeerAuthentication, PeerMutualTls, RequestAuthentication, RuleFrom, RuleTo,
        Source,
    };
    use shoal_proto::model::NamedConfig;
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    fn named<T>(name: &str, spec: T) -> NamedConfig<T> {
        NamedConfig {
            name: name.into(),
            namespace: "app".into(),
            created: 0,
            spec,
        }
    }
    let rule = AuthorizationRule {
        from: vec![RuleFrom {
            source: Some(Source {
                principals: strings(&["cluster.local/ns/a/sa/*", "*"]),
                not_namespaces: strings(&["blocked"]),
                service_accounts: strings(&["a/web"]),
                ip_blocks: strings(&["10.0.0.0/8", "192.168.1.1"]),
                not_remote_ip_blocks: strings(&["1.2.3.4"]),
                request_principals: strings(&["issuer/sub", "*", "https://i.example/*"]),
                not_request_principals: strings(&["*/mallory"]),
                ..Default::default()
            }),
        }],
        to: vec![RuleTo {
            operation: Some(Operation {
                hosts: strings(&["web.app.svc.cluster.local", "*.example.com"]),
                ports: strings(&["8080"]),
                methods: strings(&["GET", "POST"]),
                paths: strings(&["/api/*", "*.js", "/exact"]),
                not_paths: strings(&["/api/private"]),
                ..Default::default()
            }),
        }],
        when: vec![
            Condition {
                key: "request.headers[x-user]".into(),
                values: strings(&["alice"]),
                not_values: strings(&["mallory"]),
            },
            Condition {
                key: "destination.port".into(),
                values: strings(&["8080"]),
                ..Default::default()
            },
            Condition {
                key: "connection.sni".into(),
                values: strings(&["web.example.com"]),
                ..Default::default()
            },
            Condition {
                key: "request.auth.claims[groups]".into(),
                values: strings(&["admin", "dev*"]),
                not_values: strings(&["banned"]),
            },
            Condition {
                key: "request.auth.claims[nested][role]".into(),
                values: strings(&["owner"]),
                ..Default::default()
            },
            Condition {
                key: "request.auth.audiences".into(),
                values: strings(&["web"]),
                ..Default::default()
            },
            Condition {
                key: "request.auth.presenter".into(),
                values: strings(&["app"]),
                ..Default::default()
            },
            Condition {
                key: "request.auth.principal".into(),
                values: strings(&["issuer/sub"]),
                ..Default::default()
            },
        ],
    };
    let policy = |action: &str| AuthorizationPolicy {
        action: Some(action.into()),
        rules: vec![rule.clone(), AuthorizationRule::default()],
        provider: (action == "CUSTOM").then(|| shoal_proto::config::security::ExtensionProvider {
            name: provider.into(),
        }),
        ..Default::default()
    };
    let mesh = MeshConfig {
        extension_providers: vec![
            ExtensionProvider {
                name: "http-authz".into(),
                envoy_ext_authz_http: Some(ExtAuthzHttp {
                    service: "web.app.svc.cluster.local".into(),
                    port: 80,
                    timeout: Some("0.5s".into()),
                    path_prefix: "/check".into(),
                    status_on_error: "503".into(),
                    include_request_headers_in_check: strings(&["x-ext-authz", "x-b3-*"]),
                    include_additional_headers_in_check: [("x-from".into(), "shoal".into())].into(),
                    headers_to_upstream_on_allow: strings(&["x-ext-authz-result"]),
                    headers_to_downstream_on_deny: strings(&["x-ext-authz-reason"]),
                    headers_to_downstream_on_allow: strings(&["set-cookie"]),
                    ..Default::default()
                }),
                envoy_ext_authz_grpc: None,
            },
            ExtensionProvider {
                name: "grpc-authz".into(),
                envoy_ext_authz_grpc: Some(ExtAuthzGrpc {
                    service: "app/rpc.app.svc.cluster.local".into(),
                    port: 7070,
                    fail_open: true,
                    ..Default::default()
                }),
                envoy_ext_authz_http: None,
            },
        ],
        ..Default::default()
    };
    let system = shoal_proto::model::NamespaceConfig {
        namespace: "istio-system".into(),
        mesh_configs: vec![NamedConfig {
            name: "istio".into(),
            namespace: "istio-system".into(),
            created: 0,
            spec: mesh,
        }],
        ..Default::default()
    };
    let mut app = (**base.namespace("app").unwrap()).clone();
    app.peer_authentications.push(named(
        "strict",
        PeerAuthentication {
            mtls: Some(PeerMutualTls {
                mode: Some("STRICT".into()),
            }),
            ..Default::default()
        },
    ));
    let jwks = r#"{"keys":[{"kty":"EC","crv":"P-256","alg":"ES256","kid":"k","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;
    app.request_authentications = vec![named(
        "jwt",
        RequestAuthentication {
            jwt_rules: vec![
                JwtRule {
                    issuer: "https://i.example".into(),
                    audiences: strings(&["web"]),
                    jwks: jwks.into(),
                    from_headers: vec![JwtHeader {
                        name: "x-jwt".into(),
                        prefix: "Bearer ".into(),
                    }],
                    from_params: strings(&["token"]),
                    from_cookies: strings(&["session"]),
                    output_payload_to_header: "x-payload".into(),
                    forward_original_token: true,
                    output_claim_to_headers: vec![ClaimToHeader {
                        header: "x-sub".into(),
                        claim: "sub".into(),
                    }],
                    space_delimited_claims: strings(&["roles"]),
                    ..Default::default()
                },
                JwtRule {
                    issuer: "https://unfetched.example".into(),
                    jwks_uri: "https://unfetched.example/jwks".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        },
    )];
    app.authorization_policies = vec![
        named("allow", policy("ALLOW")),
        named("deny", policy("DENY")),
        named("audit", policy("AUDIT")),
        named("custom", policy("CUSTOM")),
    ];
    base.with_changes(
        base.version() + 1,
        [
            shoal_proto::snapshot::Chunk::Namespace(app),
            shoal_proto::snapshot::Chunk::Namespace(system),
        ],
        [],
    )
}
