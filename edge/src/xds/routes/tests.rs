use super::super::testing::*;
use super::super::types::ROUTE;
use super::*;
use crate::proxy::InterceptionMode;
use envoy_types::pb::envoy::config::route::v3::{header_matcher, weighted_cluster};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use shoal_proto::config::istio::{Destination, HttpRoute, HttpRouteDestination, VirtualService};
use shoal_proto::model::NamedConfig;
use shoal_proto::snapshot::Chunk;

fn route_config(ns: &str, name: &str) -> RouteConfiguration {
    let p = proxy(ns, "10.1.0.5", InterceptionMode::Redirect);
    let [rc]: [RouteConfiguration; 1] = generate(ROUTE, &p, &mesh(), &[name]).try_into().unwrap();
    rc
}

fn vhost<'a>(rc: &'a RouteConfiguration, name: &str) -> &'a VirtualHost {
    rc.virtual_hosts
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no virtual host {name}"))
}

fn action(r: &Route) -> &RouteAction {
    match &r.action {
        Some(route::Action::Route(a)) => a,
        other => panic!("route {} has action {other:?}", r.name),
    }
}

fn cluster(r: &Route) -> &str {
    match &action(r).cluster_specifier {
        Some(route_action::ClusterSpecifier::Cluster(c)) => c,
        other => panic!("route {} goes to {other:?}", r.name),
    }
}

fn secs(s: i64) -> Option<PbDuration> {
    Some(PbDuration {
        seconds: s,
        nanos: 0,
    })
}

#[test]
fn one_config_per_http_port() {
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let rcs: Vec<RouteConfiguration> = generate(ROUTE, &p, &mesh(), &[]);
    let names: Vec<_> = rcs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["80", "9080", "9090"]);
}

#[test]
fn virtual_service_routes_in_order() {
    let rc = route_config("shop", "9080");
    let vh = vhost(&rc, "reviews.shop.svc.cluster.local:9080");
    let names: Vec<_> = vh.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["jason", "api", "features", "down", "moved", "split"]
    );

    // The header match comes first and wins for jason.
    let jason = &vh.routes[0];
    let h = &jason.r#match.as_ref().unwrap().headers[0];
    assert_eq!(h.name, "end-user");
    let Some(header_matcher::HeaderMatchSpecifier::StringMatch(sm)) = &h.header_match_specifier
    else {
        panic!("not a string match")
    };
    assert_eq!(sm.match_pattern, Some(MatchPattern::Exact("jason".into())));
    assert_eq!(
        cluster(jason),
        "outbound|9080|v2|reviews.shop.svc.cluster.local"
    );
    assert_eq!(
        action(jason).timeout,
        secs(0),
        "Istio's default: no timeout"
    );
    let retry = action(jason).retry_policy.as_ref().unwrap();
    assert_eq!(retry.num_retries.unwrap().value, 2);
    assert_eq!(retry.retry_on, DEFAULT_RETRY_ON);

    // Regex URI, timeout and retries.
    let api = &vh.routes[1];
    let Some(route_match::PathSpecifier::SafeRegex(re)) =
        &api.r#match.as_ref().unwrap().path_specifier
    else {
        panic!("not a regex")
    };
    assert_eq!(re.regex, "/api/v[0-9]+/.*");
    assert_eq!(
        cluster(api),
        "outbound|9080|v1|reviews.shop.svc.cluster.local"
    );
    let a = action(api);
    assert_eq!(a.timeout, secs(5));
    let retry = a.retry_policy.as_ref().unwrap();
    assert_eq!(retry.num_retries.unwrap().value, 3);
    assert_eq!(retry.per_try_timeout, secs(2));
    assert_eq!(retry.retry_on, "5xx,retriable-status-codes");
    assert_eq!(retry.retriable_status_codes, [503]);

    // The 80/20 split to the subsets, matching everything.
    let split = &vh.routes[5];
    assert_eq!(
        split.r#match.as_ref().unwrap().path_specifier,
        Some(route_match::PathSpecifier::Prefix("/".into()))
    );
    let Some(route_action::ClusterSpecifier::WeightedClusters(w)) =
        &action(split).cluster_specifier
    else {
        panic!("not weighted")
    };
    let weights: Vec<(&str, u32)> = w
        .clusters
        .iter()
        .map(|c: &weighted_cluster::ClusterWeight| (c.name.as_str(), c.weight.unwrap().value))
        .collect();
    assert_eq!(
        weights,
        [
            ("outbound|9080|v1|reviews.shop.svc.cluster.local", 80),
            ("outbound|9080|v2|reviews.shop.svc.cluster.local", 20)
        ]
    );
}

#[test]
fn domains_cover_short_names_and_vips() {
    let rc = route_config("shop", "9080");
    let vh = vhost(&rc, "reviews.shop.svc.cluster.local:9080");
    for d in [
        "reviews.shop.svc.cluster.local",
        "reviews.shop.svc.cluster.local:9080",
        "reviews",
        "reviews:9080",
        "reviews.shop",
        "reviews.shop:9080",
        "reviews.shop.svc",
        "reviews.shop.svc.cluster:9080",
        "10.96.0.10",
        "10.96.0.10:9080",
    ] {
        assert!(
            vh.domains.iter().any(|x| x == d),
            "missing {d} in {:?}",
            vh.domains
        );
    }
    // From another namespace the bare name means a different service.
    let rc = route_config("other", "9080");
    let vh = vhost(&rc, "reviews.shop.svc.cluster.local:9080");
    assert!(!vh.domains.iter().any(|x| x == "reviews"));
    assert!(vh.domains.iter().any(|x| x == "reviews.shop"));
}

#[test]
fn default_route_without_virtual_service() {
    let rc = route_config("shop", "80");
    let vh = vhost(&rc, "web.other.svc.cluster.local:80");
    let [r] = vh.routes.as_slice() else {
        panic!("one route")
    };
    assert_eq!(r.name, "default");
    assert_eq!(
        r.r#match.as_ref().unwrap().path_specifier,
        Some(route_match::PathSpecifier::Prefix("/".into()))
    );
    assert_eq!(cluster(r), "outbound|80||web.other.svc.cluster.local");
    assert_eq!(action(r).timeout, secs(0));
    let retry = action(r).retry_policy.as_ref().unwrap();
    assert_eq!(retry.num_retries.unwrap().value, 2);
    assert_eq!(retry.retry_host_predicate.len(), 1);

    // Consistent hashing: a hash policy, and retries stay on the same host.
    let rc = route_config("shop", "9080");
    let r = &vhost(&rc, "ratings.shop.svc.cluster.local:9080").routes[0];
    assert_eq!(action(r).hash_policy.len(), 1);
    assert!(
        action(r)
            .retry_policy
            .as_ref()
            .unwrap()
            .retry_host_predicate
            .is_empty()
    );

    // The catch-all comes last.
    let last = rc.virtual_hosts.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.domains.as_slice()),
        ("allow_any", &["*".to_string()][..])
    );
    assert_eq!(cluster(&last.routes[0]), "PassthroughCluster");
}

#[test]
fn registry_only_ends_in_block_all() {
    let rc = route_config("locked", "9080");
    let last = rc.virtual_hosts.last().unwrap();
    assert_eq!(last.name, "block_all");
    let Some(route::Action::DirectResponse(dr)) = &last.routes[0].action else {
        panic!("not a direct response")
    };
    assert_eq!(dr.status, 502);
}

fn with_vs(vs: VirtualService) -> shoal_proto::push_context::PushContext {
    let mut shop = shop();
    shop.virtual_services = vec![NamedConfig {
        name: "test".into(),
        namespace: "shop".into(),
        created: 0,
        spec: vs,
    }];
    shoal_proto::push_context::PushContext::from_chunks(2, [Chunk::Namespace(shop)])
}

#[test]
fn undefined_subset_still_names_the_cluster_and_warns() {
    let push = with_vs(VirtualService {
        hosts: vec![REVIEWS.into()],
        http: vec![HttpRoute {
            route: vec![HttpRouteDestination {
                destination: Destination {
                    host: REVIEWS.into(),
                    subset: "v9".into(),
                    port: None,
                },
                weight: 0,
                headers: None,
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    let scope = push.sidecar_scope("shop", &Default::default());
    let built = build(&scope, &Default::default());
    let rc = built.configs.iter().find(|c| c.name == "9080").unwrap();
    let vh = vhost(rc, "reviews.shop.svc.cluster.local:9080");
    assert_eq!(
        cluster(&vh.routes[0]),
        "outbound|9080|v9|reviews.shop.svc.cluster.local"
    );
    assert_eq!(built.warnings.len(), 1, "{:?}", built.warnings);
    assert!(built.warnings[0].contains("v9"));
}

#[test]
fn routes_for_other_ports_fall_back_to_default() {
    let mut vs = reviews_vs();
    for r in &mut vs.http {
        for m in &mut r.matches {
            m.port = Some(1234);
        }
    }
    vs.http.truncate(2);
    let push = with_vs(vs);
    let scope = push.sidecar_scope("shop", &Default::default());
    let built = build(&scope, &Default::default());
    let rc = built.configs.iter().find(|c| c.name == "9080").unwrap();
    let vh = vhost(rc, "reviews.shop.svc.cluster.local:9080");
    let names: Vec<_> = vh.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["default"]);
}

#[test]
fn source_labels_select_routes_per_proxy() {
    let mut vs = reviews_vs();
    vs.http[0].matches[0].source_labels = labels(&[("app", "tester")]);
    let push = with_vs(vs);
    let generator = super::super::Generator::new();
    let route_names = |app: &str| {
        let mut p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
        p.labels = labels(&[("app", app)]);
        let rs = generator
            .generate(ROUTE, &p, &push, &["9080".into()])
            .unwrap();
        let rc: RouteConfiguration = decode(&rs[0]);
        vhost(&rc, "reviews.shop.svc.cluster.local:9080")
            .routes
            .iter()
            .map(|r| r.name.clone())
            .collect::<Vec<_>>()
    };
    let all = ["jason", "api", "features", "down", "moved", "split"];
    assert_eq!(route_names("tester"), all);
    assert_eq!(route_names("productpage"), all[1..]);
}

#[test]
fn vs_index_agrees_with_the_scope() {
    let mut shop = shop();
    let wildcard = VirtualService {
        hosts: vec!["*.shop.svc.cluster.local".into()],
        ..reviews_vs()
    };
    // Sorted first (by name) so the wildcard precedes the exact VirtualService.
    shop.virtual_services.push(NamedConfig {
        name: "a-wild".into(),
        namespace: "shop".into(),
        created: 0,
        spec: wildcard,
    });
    let push = shoal_proto::push_context::PushContext::from_chunks(2, [Chunk::Namespace(shop)]);
    let scope = push.sidecar_scope("shop", &Default::default());
    let index = VsIndex::new(&scope);
    for svc in &scope.services {
        let want = scope.virtual_service_for(&svc.hostname).map(|v| &v.name);
        let got = index.lookup(&svc.hostname).map(|v| &v.name);
        assert_eq!(got, want, "{}", svc.hostname);
    }
    assert_eq!(index.lookup(REVIEWS).unwrap().name, "a-wild");
}

#[test]
fn fault_mirror_cors_and_headers_translate_as_istio_does() {
    use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy;
    use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
    use prost::Message;
    let rc = route_config("shop", "9080");
    let vh = vhost(&rc, "reviews.shop.svc.cluster.local:9080");
    let features = vh.routes.iter().find(|r| r.name == "features").unwrap();

    let fault = HttpFault::decode(&*features.typed_per_filter_config[FAULT_FILTER].value).unwrap();
    assert_eq!(fault.delay.unwrap().percentage.unwrap().numerator, 100_000);
    assert_eq!(fault.abort.unwrap().percentage.unwrap().numerator, 5_000);
    let cors = CorsPolicy::decode(&*features.typed_per_filter_config[CORS_FILTER].value).unwrap();
    assert_eq!(
        (cors.allow_methods.as_str(), cors.max_age.as_str()),
        ("GET,POST", "86400")
    );

    // Route-level header operations: set overwrites, add appends, remove removes.
    let added: Vec<_> = features
        .request_headers_to_add
        .iter()
        .map(|h| (h.header.as_ref().unwrap().key.as_str(), h.append_action))
        .collect();
    use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
    assert_eq!(
        added,
        [
            (
                "x-req-set",
                HeaderAppendAction::OverwriteIfExistsOrAdd as i32
            ),
            ("x-req-add", HeaderAppendAction::AppendIfExistsOrAdd as i32)
        ]
    );
    assert_eq!(features.request_headers_to_remove, ["x-req-remove"]);
    assert_eq!(features.response_headers_to_remove, ["x-resp-remove"]);

    let a = action(features);
    let mirror = &a.request_mirror_policies[0];
    assert_eq!(
        mirror.cluster,
        "outbound|9080|v2|reviews.shop.svc.cluster.local"
    );
    assert_eq!(
        mirror
            .runtime_fraction
            .as_ref()
            .unwrap()
            .default_value
            .unwrap()
            .numerator,
        250_000
    );
    assert_eq!(a.regex_rewrite.as_ref().unwrap().substitution, "/\\1");
    let retry = a.retry_policy.as_ref().unwrap();
    assert_eq!(
        retry.retry_priority.as_ref().unwrap().name,
        "envoy.retry_priorities.previous_priorities"
    );
    // A weighted destination's header operations stay on its cluster weight.
    let Some(route_action::ClusterSpecifier::WeightedClusters(w)) = &a.cluster_specifier else {
        panic!("weighted");
    };
    assert_eq!(w.clusters[0].request_headers_to_add.len(), 2);
    assert!(w.clusters[1].request_headers_to_add.is_empty());

    let down = vh.routes.iter().find(|r| r.name == "down").unwrap();
    let Some(route::Action::DirectResponse(d)) = &down.action else {
        panic!("direct response");
    };
    assert_eq!(d.status, 503);
    let moved = vh.routes.iter().find(|r| r.name == "moved").unwrap();
    let Some(route::Action::Redirect(r)) = &moved.action else {
        panic!("redirect");
    };
    assert_eq!((r.port_redirect, r.response_code), (8443, 4));
}

#[test]
fn a_delegate_replaces_the_route_that_names_it() {
    use shoal_proto::config::istio::{Delegate, HttpMatchRequest, StringMatch};
    let prefix = |p: &str| {
        vec![HttpMatchRequest {
            uri: Some(StringMatch {
                prefix: Some(p.into()),
                ..Default::default()
            }),
            ..Default::default()
        }]
    };
    let root = VirtualService {
        hosts: vec![REVIEWS.into()],
        http: vec![HttpRoute {
            name: "root".into(),
            matches: prefix("/r"),
            delegate: Some(Delegate {
                name: "reviews-routes".into(),
                namespace: String::new(),
            }),
            timeout: Some("7s".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let child = VirtualService {
        http: vec![HttpRoute {
            name: "v2".into(),
            matches: prefix("/r/v2"),
            route: vec![HttpRouteDestination {
                destination: Destination {
                    host: REVIEWS.into(),
                    subset: "v2".into(),
                    port: None,
                },
                weight: 0,
                headers: None,
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut shop = shop();
    shop.virtual_services = [("root", root), ("reviews-routes", child)]
        .into_iter()
        .map(|(name, spec)| NamedConfig {
            name: name.into(),
            namespace: "shop".into(),
            created: 0,
            spec,
        })
        .collect();
    let push = shoal_proto::push_context::PushContext::from_chunks(2, [Chunk::Namespace(shop)]);
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let [rc]: [RouteConfiguration; 1] = generate(ROUTE, &p, &push, &["9080"]).try_into().unwrap();
    let vh = vhost(&rc, "reviews.shop.svc.cluster.local:9080");
    let r = &vh.routes[0];
    assert_eq!(r.name, "root-v2");
    assert_eq!(
        r.r#match.as_ref().unwrap().path_specifier,
        Some(route_match::PathSpecifier::Prefix("/r/v2".into()))
    );
    assert_eq!(action(r).timeout, secs(7), "inherited from the root");
    assert_eq!(
        cluster(r),
        "outbound|9080|v2|reviews.shop.svc.cluster.local"
    );
}

/// Istio's hash keys: a cookie carries its TTL (so Envoy sets it), path and attributes.
#[test]
fn hash_policies_for_every_key() {
    use route_action::hash_policy::PolicySpecifier;
    use shoal_proto::config::istio::{ConsistentHashLb, CookieAttribute, HttpCookie};
    let specifier =
        |h: ConsistentHashLb| translate::hash_policy(&h).and_then(|p| p.policy_specifier);
    let cookie = specifier(ConsistentHashLb {
        http_cookie: Some(HttpCookie {
            name: "session".into(),
            path: "/cart".into(),
            ttl: Some("1h".into()),
            attributes: vec![CookieAttribute {
                name: "SameSite".into(),
                value: "Strict".into(),
            }],
        }),
        ..Default::default()
    });
    let Some(PolicySpecifier::Cookie(c)) = cookie else {
        panic!("not a cookie policy: {cookie:?}");
    };
    assert_eq!((c.name.as_str(), c.path.as_str()), ("session", "/cart"));
    assert_eq!(c.ttl.map(|d| d.seconds), Some(3600));
    assert_eq!(c.attributes[0].name, "SameSite");
    assert!(matches!(
        specifier(ConsistentHashLb {
            use_source_ip: Some(true),
            ..Default::default()
        }),
        Some(PolicySpecifier::ConnectionProperties(p)) if p.source_ip
    ));
    assert!(matches!(
        specifier(ConsistentHashLb {
            http_query_parameter_name: Some("user".into()),
            ..Default::default()
        }),
        Some(PolicySpecifier::QueryParameter(q)) if q.name == "user"
    ));
    assert_eq!(specifier(ConsistentHashLb::default()), None);
}

fn route_to(hosts: &[&str], to: &str) -> VirtualService {
    VirtualService {
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        http: vec![HttpRoute {
            name: "to".into(),
            route: vec![HttpRouteDestination {
                destination: Destination {
                    host: to.into(),
                    subset: String::new(),
                    port: None,
                },
                weight: 0,
                headers: None,
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Istio's `separateVSHostsAndServices` and `buildSidecarVirtualHostsForVirtualService`:
/// a VirtualService host that names no service still gets a virtual host with the
/// VirtualService's routes, on the ports of the services the VirtualService does name
/// (the non-imported host of a multi-host VirtualService), or on port 80 when it names
/// none (an external host routed without a ServiceEntry).
#[test]
fn virtual_service_hosts_without_a_service_get_their_virtual_host() {
    let mut shop = shop();
    shop.virtual_services = vec![
        NamedConfig {
            name: "multi".into(),
            namespace: "shop".into(),
            created: 0,
            spec: route_to(&[REVIEWS, "reviews.example.com"], REVIEWS),
        },
        NamedConfig {
            name: "external".into(),
            namespace: "shop".into(),
            created: 0,
            spec: route_to(&["httpbin.org", "*.wild.test"], REVIEWS),
        },
    ];
    let push = shoal_proto::push_context::PushContext::from_chunks(2, [Chunk::Namespace(shop)]);
    let scope = push.sidecar_scope("shop", &Default::default());
    let built = build(&scope, &Default::default());
    let config = |name: &str| built.configs.iter().find(|c| c.name == name).unwrap();

    let multi = vhost(config("9080"), "reviews.example.com:9080");
    assert_eq!(
        multi.domains,
        ["reviews.example.com", "reviews.example.com:9080"]
    );
    assert_eq!(
        cluster(&multi.routes[0]),
        format!("outbound|9080||{REVIEWS}")
    );
    // Only on the ports of the services it names.
    assert!(
        !config("9090")
            .virtual_hosts
            .iter()
            .any(|v| v.name.starts_with("reviews.example.com"))
    );

    let external = vhost(config("80"), "httpbin.org:80");
    assert_eq!(external.domains, ["httpbin.org", "httpbin.org:80"]);
    assert_eq!(
        cluster(&external.routes[0]),
        format!("outbound|9080||{REVIEWS}")
    );
    let wild = vhost(config("80"), "*.wild.test:80");
    assert_eq!(wild.domains, ["*.wild.test", "*.wild.test:80"]);
    assert!(
        !config("9080")
            .virtual_hosts
            .iter()
            .any(|v| v.name.starts_with("httpbin.org"))
    );
}

/// Istio's ExternalName aliases (`resolveServiceAliases`, `generateVirtualHostDomains`
/// over `Aliases`): a call to an ExternalName Service naming `reviews` is routed by
/// reviews' virtual host, which carries the alias's names; the alias gets no virtual
/// host, listener or cluster of its own.
#[test]
fn an_external_name_service_is_routed_as_the_service_it_aliases() {
    let mut shop = shop();
    let mut legacy = service(
        "shop",
        "legacy",
        vec![port("http", 9080, shoal_proto::model::Protocol::Http)],
        None,
    );
    legacy.resolution = shoal_proto::model::Resolution::Dns;
    legacy.external_name = REVIEWS.into();
    shop.services.push(legacy);
    let push = shoal_proto::push_context::PushContext::from_chunks(2, [Chunk::Namespace(shop)]);
    let p = proxy("shop", "10.1.0.5", InterceptionMode::Redirect);
    let [rc]: [RouteConfiguration; 1] = generate(ROUTE, &p, &push, &["9080"]).try_into().unwrap();
    let reviews = vhost(&rc, "reviews.shop.svc.cluster.local:9080");
    for name in [
        "legacy.shop.svc.cluster.local",
        "legacy.shop.svc.cluster.local:9080",
        "legacy",
        "legacy.shop",
    ] {
        assert!(
            reviews.domains.iter().any(|d| d == name),
            "{name} not in {:?}",
            reviews.domains
        );
    }
    assert!(
        !rc.virtual_hosts
            .iter()
            .any(|v| v.name.starts_with("legacy"))
    );
    let clusters: Vec<envoy_types::pb::envoy::config::cluster::v3::Cluster> =
        generate(super::super::types::CLUSTER, &p, &push, &[]);
    assert!(!clusters.iter().any(|c| c.name.contains("legacy")));
}
