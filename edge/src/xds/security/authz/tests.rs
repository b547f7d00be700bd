use super::ordered::{HttpRbac, NetworkRbac};
use super::*;
use envoy_types::pb::envoy::config::rbac::v3::{Policy, permission, principal};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use prost::Message;
use shoal_proto::config::security::{
    AuthorizationRule, Condition, Operation, RuleFrom, RuleTo, Source,
};
use shoal_proto::push_context::security::ext_authz::{ExtAuthzApi, HttpCheck};

fn policy(
    name: &str,
    action: &str,
    rules: Vec<AuthorizationRule>,
) -> Arc<NamedConfig<AuthorizationPolicy>> {
    Arc::new(NamedConfig {
        name: name.into(),
        namespace: "beta".into(),
        created: 0,
        spec: AuthorizationPolicy {
            action: Some(action.into()),
            rules,
            ..Default::default()
        },
    })
}

fn to_paths(paths: &[&str]) -> AuthorizationRule {
    AuthorizationRule {
        to: vec![RuleTo {
            operation: Some(Operation {
                paths: paths.iter().map(|p| p.to_string()).collect(),
                ..Default::default()
            }),
        }],
        ..Default::default()
    }
}

fn from_principals(principals: &[&str]) -> AuthorizationRule {
    AuthorizationRule {
        from: vec![RuleFrom {
            source: Some(Source {
                principals: principals.iter().map(|p| p.to_string()).collect(),
                ..Default::default()
            }),
        }],
        ..Default::default()
    }
}

fn http(authz: &Authorization) -> Vec<OrderedRbac> {
    http_filters(authz)
        .iter()
        .map(|f| {
            assert_eq!(f.name, "envoy.filters.http.rbac");
            let Some(http_filter::ConfigType::TypedConfig(any)) = &f.config_type else {
                panic!("untyped")
            };
            assert_eq!(
                any.type_url,
                "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"
            );
            HttpRbac::decode(any.value.as_slice())
                .unwrap()
                .rules
                .unwrap()
        })
        .collect()
}

fn tcp(authz: &Authorization) -> Vec<OrderedRbac> {
    network_filters(authz)
        .iter()
        .map(|f| {
            let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
                panic!("untyped")
            };
            NetworkRbac::decode(any.value.as_slice())
                .unwrap()
                .rules
                .unwrap()
        })
        .collect()
}

fn only(r: &OrderedRbac) -> &Policy {
    assert_eq!(r.policies.len(), 1, "{r:?}");
    r.policies[0].value.as_ref().unwrap()
}

#[test]
fn no_policy_no_filter_and_an_allow_policy_without_rules_admits_nothing() {
    assert!(http_filters(&Authorization::default()).is_empty());
    let deny_all = Authorization {
        allow: vec![policy("nothing", "ALLOW", vec![])],
        ..Default::default()
    };
    let got = http(&deny_all);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].action, ALLOW);
    assert!(
        got[0].policies.is_empty(),
        "an ALLOW with no policy denies all"
    );
    // A rule `{}` admits everything.
    let all = Authorization {
        allow: vec![policy("all", "ALLOW", vec![AuthorizationRule::default()])],
        ..Default::default()
    };
    let p = only(&http(&all)[0]).clone();
    assert_eq!(p.permissions, vec![rules::any_permission()]);
    assert_eq!(p.principals, vec![rules::any_principal()]);
}

#[test]
fn deny_comes_before_allow_and_names_paths_and_principals() {
    let authz = Authorization {
        deny: vec![policy("no-admin", "DENY", vec![to_paths(&["/admin*"])])],
        allow: vec![policy(
            "only-a",
            "ALLOW",
            vec![from_principals(&["cluster.local/ns/alpha/sa/a"])],
        )],
        ..Default::default()
    };
    let got = http(&authz);
    assert_eq!(
        got.iter().map(|r| r.action).collect::<Vec<_>>(),
        [DENY, ALLOW]
    );
    assert_eq!(got[0].policies[0].key, "ns[beta]-policy[no-admin]-rule[0]");
    let deny = only(&got[0]);
    let Some(permission::Rule::UrlPath(path)) = &deny.permissions[0].rule else {
        panic!("{:?}", deny.permissions)
    };
    let Some(envoy_types::pb::envoy::r#type::matcher::v3::path_matcher::Rule::Path(m)) = &path.rule
    else {
        panic!()
    };
    assert_eq!(m.match_pattern, Some(MatchPattern::Prefix("/admin".into())));
    let allow = only(&got[1]);
    let Some(principal::Identifier::Authenticated(a)) = &allow.principals[0].identifier else {
        panic!("{:?}", allow.principals)
    };
    assert_eq!(
        a.principal_name.as_ref().unwrap().match_pattern,
        Some(MatchPattern::Exact(
            "spiffe://cluster.local/ns/alpha/sa/a".into()
        ))
    );
}

#[test]
fn tcp_chains_fail_closed_on_what_they_cannot_see() {
    let authz = Authorization {
        deny: vec![policy("no-admin", "DENY", vec![to_paths(&["/admin"])])],
        allow: vec![policy(
            "paths",
            "ALLOW",
            vec![
                to_paths(&["/public"]),
                from_principals(&["cluster.local/ns/alpha/sa/a"]),
            ],
        )],
        ..Default::default()
    };
    let got = tcp(&authz);
    // DENY: the path is dropped, so the rule denies every connection.
    assert_eq!(only(&got[0]).permissions, vec![rules::any_permission()]);
    // ALLOW: the path rule can never match (a NOT any), the principal rule stays.
    let allow = &got[1];
    assert_eq!(allow.policies.len(), 2);
    let path_rule = allow.policies[0].value.as_ref().unwrap();
    assert!(matches!(
        path_rule.permissions[0].rule,
        Some(permission::Rule::NotRule(_))
    ));
}

#[test]
fn a_when_on_request_headers_or_jwt_claims_drops_an_allow_rule_on_tcp_and_custom_denies() {
    let rule = AuthorizationRule {
        when: vec![Condition {
            key: "request.headers[x-token]".into(),
            values: vec!["yes".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    let allow = Authorization {
        allow: vec![policy("header", "ALLOW", vec![rule.clone()])],
        ..Default::default()
    };
    assert_eq!(http(&allow)[0].policies.len(), 1);
    assert!(tcp(&allow)[0].policies.is_empty(), "never matches on TCP");
    let claims = AuthorizationRule {
        when: vec![Condition {
            key: "request.auth.claims[iss]".into(),
            values: vec!["x".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    let jwt = Authorization {
        allow: vec![policy("jwt", "ALLOW", vec![claims])],
        ..Default::default()
    };
    let checked = http(&jwt)[0].policies[0].value.clone().unwrap();
    let Some(principal::Identifier::AndIds(ids)) = &checked.principals[0].identifier else {
        panic!("{checked:?}")
    };
    assert!(
        matches!(
            ids.ids[1].identifier,
            Some(principal::Identifier::SourcedMetadata(_))
        ),
        "the claim is matched on jwt_authn's payload: {checked:?}"
    );
    assert!(tcp(&jwt)[0].policies.is_empty(), "never matches on TCP");
    let custom = Authorization {
        custom: vec![policy("ext", "CUSTOM", vec![to_paths(&["/x"])])],
        ..Default::default()
    };
    assert_eq!(http(&custom)[0].action, DENY);
}

fn provider(api: ExtAuthzApi) -> Arc<ExtAuthzProvider> {
    Arc::new(ExtAuthzProvider {
        name: "authz".into(),
        hostname: "ext-authz.foo.svc.cluster.local".into(),
        cluster: "outbound|8000||ext-authz.foo.svc.cluster.local".into(),
        timeout: std::time::Duration::from_millis(500),
        fail_open: false,
        status_on_error: Some(503),
        body: None,
        api,
    })
}

fn typed(f: &HttpFilter) -> &[u8] {
    let Some(http_filter::ConfigType::TypedConfig(any)) = &f.config_type else {
        panic!("untyped")
    };
    &any.value
}

#[test]
fn custom_asks_its_provider_only_for_what_its_rules_match() {
    use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3 as ext;
    let http_provider = provider(ExtAuthzApi::Http(HttpCheck {
        request_headers: vec!["x-ext-authz".into()],
        upstream_on_allow: vec!["x-ext-authz-*".into()],
        ..Default::default()
    }));
    let authz = Authorization {
        custom: vec![policy("ext", "CUSTOM", vec![to_paths(&["/custom/*"])])],
        deny: vec![policy("deny", "DENY", vec![to_paths(&["/admin"])])],
        ext_authz: Some(Ok(http_provider)),
        ..Default::default()
    };
    let filters = http_filters(&authz);
    let names: Vec<&str> = filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "envoy.filters.http.rbac",
            "envoy.filters.http.ext_authz",
            "envoy.filters.http.rbac"
        ]
    );
    let shadow = HttpRbac::decode(typed(&filters[0])).unwrap();
    assert!(shadow.rules.is_none(), "the shadow RBAC never denies");
    assert_eq!(shadow.shadow_rules_stat_prefix, "istio_ext_authz_");
    let keys: Vec<_> = (shadow.shadow_rules.unwrap().policies.into_iter())
        .map(|p| p.key)
        .collect();
    assert_eq!(keys, ["istio-ext-authz-ns[beta]-policy[ext]-rule[0]"]);
    let ext_authz = ext::ExtAuthz::decode(typed(&filters[1])).unwrap();
    let enabled = ext_authz.filter_enabled_metadata.unwrap();
    assert_eq!(enabled.filter, "envoy.filters.http.rbac");
    assert!(format!("{:?}", enabled.path).contains("istio_ext_authz_shadow_effective_policy_id"));
    let Some(ext::ext_authz::Services::HttpService(service)) = ext_authz.services else {
        panic!("an HTTP service")
    };
    let uri = service.server_uri.unwrap();
    assert_eq!(uri.uri, "http://ext-authz.foo.svc.cluster.local");
    assert_eq!(ext_authz.status_on_error.unwrap().code, 503);
    assert_eq!(ext_authz.allowed_headers.unwrap().patterns.len(), 1);
    // The DENY policy is unchanged, and an HTTP provider does not check TCP.
    assert_eq!(
        HttpRbac::decode(typed(&filters[2]))
            .unwrap()
            .rules
            .unwrap()
            .action,
        DENY
    );
    let tcp_names: Vec<_> = network_filters(&authz)
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(tcp_names, ["envoy.filters.network.rbac"]);
    // A gRPC provider checks TCP too.
    let grpc = Authorization {
        ext_authz: Some(Ok(provider(ExtAuthzApi::Grpc))),
        ..authz.clone()
    };
    let tcp_names: Vec<_> = network_filters(&grpc).into_iter().map(|f| f.name).collect();
    assert_eq!(
        tcp_names,
        [
            "envoy.filters.network.rbac",
            "envoy.filters.network.ext_authz",
            "envoy.filters.network.rbac"
        ]
    );
}

#[test]
fn custom_with_an_unusable_provider_denies_what_its_rules_match() {
    let authz = Authorization {
        custom: vec![policy("ext", "CUSTOM", vec![to_paths(&["/custom/*"])])],
        deny: vec![policy("deny", "DENY", vec![to_paths(&["/admin"])])],
        ext_authz: Some(Err("provider \"x\" is not in the mesh config".into())),
        ..Default::default()
    };
    let rules = http(&authz);
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].action, DENY);
    let keys: Vec<_> = rules[0].policies.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "ns[beta]-policy[deny]-rule[0]",
            "ns[beta]-policy[ext]-rule[0]-deny-due-to-bad-CUSTOM-action"
        ]
    );
}

#[test]
fn the_encoding_is_the_same_every_time() {
    let authz = Authorization {
        allow: (0..20)
            .map(|i| {
                policy(
                    &format!("p{i}"),
                    "ALLOW",
                    vec![to_paths(&["/a"]), to_paths(&["/b"])],
                )
            })
            .collect(),
        ..Default::default()
    };
    let a: Vec<Vec<u8>> = http_filters(&authz)
        .iter()
        .map(|f| f.encode_to_vec())
        .collect();
    for _ in 0..5 {
        let b: Vec<Vec<u8>> = http_filters(&authz)
            .iter()
            .map(|f| f.encode_to_vec())
            .collect();
        assert_eq!(a, b);
    }
    // And it decodes as Envoy's own message, with every rule.
    let Some(http_filter::ConfigType::TypedConfig(any)) = &http_filters(&authz)[0].config_type
    else {
        panic!()
    };
    let envoy = envoy_types::pb::envoy::extensions::filters::http::rbac::v3::Rbac::decode(
        any.value.as_slice(),
    )
    .unwrap();
    assert_eq!(envoy.rules.unwrap().policies.len(), 40);
}

#[test]
fn a_gateways_chains_are_guarded_before_routing_and_proxying() {
    use crate::xds::listeners::{rds_http_chain, tcp_proxy_filter};
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::tcp_proxy;
    let authz = Authorization {
        deny: vec![policy("no-admin", "DENY", vec![to_paths(&["/admin"])])],
        ..Default::default()
    };
    let tcp = FilterChain {
        filters: vec![tcp_proxy_filter(
            "db",
            tcp_proxy::ClusterSpecifier::Cluster("db".into()),
        )],
        ..Default::default()
    };
    let mut chains = vec![rds_http_chain(80, "http.80".into(), true), tcp];
    let untouched = chains.clone();
    guard_chains(&mut chains, &Authorization::default(), None);
    assert_eq!(chains, untouched, "no policy, no change");
    guard_chains(&mut chains, &authz, None);
    let Some(filter::ConfigType::TypedConfig(cfg)) = &chains[0].filters[0].config_type else {
        panic!()
    };
    let hcm = HttpConnectionManager::decode(cfg.value.as_slice()).unwrap();
    assert_eq!(hcm.http_filters[0].name, "envoy.filters.http.rbac");
    assert_eq!(
        hcm.http_filters.last().unwrap().name,
        "envoy.filters.http.router"
    );
    let names: Vec<&str> = chains[1].filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "envoy.filters.network.rbac",
            "envoy.filters.network.tcp_proxy"
        ]
    );
}

#[test]
fn a_gateways_jwt_authn_goes_before_its_rbac() {
    use crate::xds::listeners::rds_http_chain;
    let authz = Authorization {
        deny: vec![policy("no-admin", "DENY", vec![to_paths(&["/admin"])])],
        ..Default::default()
    };
    let authn = HttpFilter {
        name: "envoy.filters.http.jwt_authn".into(),
        ..Default::default()
    };
    let hcm_filters = |authz: &Authorization, authn: Option<&HttpFilter>| {
        let mut chains = vec![rds_http_chain(80, "http.80".into(), true)];
        guard_chains(&mut chains, authz, authn);
        let Some(filter::ConfigType::TypedConfig(cfg)) = &chains[0].filters[0].config_type else {
            panic!()
        };
        let hcm = HttpConnectionManager::decode(cfg.value.as_slice()).unwrap();
        hcm.http_filters
            .into_iter()
            .map(|f| f.name)
            .collect::<Vec<_>>()
    };
    let names = hcm_filters(&authz, Some(&authn));
    assert_eq!(names[0], "envoy.filters.http.jwt_authn");
    assert_eq!(names[1], "envoy.filters.http.rbac");
    // A RequestAuthentication alone still guards the chain (its 401s).
    let names = hcm_filters(&Authorization::default(), Some(&authn));
    assert_eq!(names[0], "envoy.filters.http.jwt_authn");
    assert_eq!(names.last().unwrap(), "envoy.filters.http.router");
}
