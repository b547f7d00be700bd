//! RequestAuthentication through the sidecar generator: `jwt_authn` before the RBAC
//! filters, and fetched keys reaching the listener through the generator's cache.

use super::*;
use crate::xds::Generator;
use crate::xds::clusters::inbound::tests::{WORKLOAD, workload_mesh};
use crate::xds::security::jwt::keys::{JwksStore, UNFETCHED_JWKS};
use crate::xds::testing::{decode, unpack};
use crate::xds::types::LISTENER;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwtAuthentication, jwt_provider,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_filter,
};
use shoal_proto::config::security::{
    AuthorizationPolicy, AuthorizationRule, JwtRule, RequestAuthentication, RuleFrom, Source,
};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;
use std::sync::Arc;

const URI: &str = "http://127.0.0.1:1/jwks";

fn with_jwt() -> PushContext {
    let base = workload_mesh();
    let mut app = (**base.namespace("app").unwrap()).clone();
    app.request_authentications.push(NamedConfig {
        name: "jwt".into(),
        namespace: "app".into(),
        created: 0,
        spec: RequestAuthentication {
            jwt_rules: vec![JwtRule {
                issuer: "https://issuer.example.com".into(),
                jwks_uri: URI.into(),
                ..Default::default()
            }],
            ..Default::default()
        },
    });
    app.authorization_policies.push(NamedConfig {
        name: "need-jwt".into(),
        namespace: "app".into(),
        created: 0,
        spec: AuthorizationPolicy {
            rules: vec![AuthorizationRule {
                from: vec![RuleFrom {
                    source: Some(Source {
                        request_principals: vec!["https://issuer.example.com/*".into()],
                        ..Default::default()
                    }),
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    });
    base.with_changes(2, [Chunk::Namespace(app)], [])
}

/// The HTTP filters of the first HTTP connection manager on port 8080.
fn http_filters(l: &Listener) -> Vec<(String, Option<envoy_types::pb::google::protobuf::Any>)> {
    let chain = l
        .filter_chains
        .iter()
        .find(|c| {
            c.filter_chain_match
                .as_ref()
                .and_then(|m| m.destination_port)
                .map(|p| p.value)
                == Some(8080)
        })
        .expect("a chain on 8080");
    let hcm = chain
        .filters
        .iter()
        .find(|f| f.name == "envoy.filters.network.http_connection_manager")
        .expect("an HTTP chain");
    let Some(filter::ConfigType::TypedConfig(any)) = &hcm.config_type else {
        panic!("untyped")
    };
    let hcm: HttpConnectionManager = unpack(any);
    hcm.http_filters
        .into_iter()
        .map(|f| {
            let any = match f.config_type {
                Some(http_filter::ConfigType::TypedConfig(any)) => Some(any),
                _ => None,
            };
            (f.name, any)
        })
        .collect()
}

fn inbound(generator: &Generator, push: &PushContext) -> Listener {
    let p = meshed("app", WORKLOAD, InterceptionMode::Redirect);
    generator
        .generate(LISTENER, &p, push, &[])
        .unwrap()
        .iter()
        .map(|r| decode::<Listener>(r))
        .find(|l| l.name == "virtualInbound")
        .expect("virtualInbound")
}

fn jwks_of(l: &Listener) -> String {
    let filters = http_filters(l);
    let jwt: JwtAuthentication = unpack(filters[0].1.as_ref().unwrap());
    match &jwt.providers["origins-0"].jwks_source_specifier {
        Some(jwt_provider::JwksSourceSpecifier::LocalJwks(ds)) => match &ds.specifier {
            Some(
                envoy_types::pb::envoy::config::core::v3::data_source::Specifier::InlineString(s),
            ) => s.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn jwt_authn_goes_before_the_rbac_filters_that_match_its_payload() {
    let push = with_jwt();
    let l = inbound(&Generator::new(), &push);
    let names: Vec<String> = http_filters(&l).into_iter().map(|f| f.0).collect();
    let jwt = names
        .iter()
        .position(|n| n == "envoy.filters.http.jwt_authn");
    let rbac = names.iter().position(|n| n == "envoy.filters.http.rbac");
    assert_eq!(jwt, Some(0), "{names:?}");
    assert!(rbac.is_some_and(|r| r > 0), "{names:?}");
    assert_eq!(
        names.last().map(String::as_str),
        Some("envoy.filters.http.router")
    );
}

#[test]
fn fetched_keys_reach_the_listener_through_the_generator_cache() {
    let push = with_jwt();
    let keys = Arc::new(JwksStore::new());
    let generator = Generator::with_jwks(Default::default(), keys.clone());
    assert_eq!(jwks_of(&inbound(&generator, &push)), UNFETCHED_JWKS);
    let doc = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"abc"}]}"#;
    keys.set(URI, Arc::from(doc));
    assert_eq!(
        jwks_of(&inbound(&generator, &push)),
        doc,
        "same snapshot, new keys"
    );
}
