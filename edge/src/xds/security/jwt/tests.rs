use super::*;
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::JwtAuthentication;
use prost::Message;
use shoal_proto::config::security::{ClaimToHeader, JwtHeader as RuleHeader};

const JWKS: &str = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"abc","kid":"k1"}]}"#;

fn ra(name: &str, rules: Vec<JwtRule>) -> Arc<NamedConfig<RequestAuthentication>> {
    Arc::new(NamedConfig {
        name: name.into(),
        namespace: "shop".into(),
        created: 0,
        spec: RequestAuthentication {
            jwt_rules: rules,
            ..Default::default()
        },
    })
}

fn rule(issuer: &str) -> JwtRule {
    JwtRule {
        issuer: issuer.into(),
        jwks: JWKS.into(),
        ..Default::default()
    }
}

fn decode(filter: &HttpFilter) -> JwtAuthentication {
    assert_eq!(filter.name, "envoy.filters.http.jwt_authn");
    let Some(http_filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
        panic!("untyped")
    };
    assert_eq!(
        any.type_url,
        "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"
    );
    JwtAuthentication::decode(any.value.as_slice()).unwrap()
}

fn inline(p: &JwtProvider) -> &str {
    match &p.jwks_source_specifier {
        Some(jwt_provider::JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(data_source::Specifier::InlineString(s)),
            ..
        })) => s,
        other => panic!("not inline: {other:?}"),
    }
}

fn requires(config: &JwtAuthentication) -> &JwtRequirement {
    assert_eq!(config.rules.len(), 1);
    let rule = &config.rules[0];
    assert_eq!(
        rule.r#match.as_ref().unwrap().path_specifier,
        Some(route_match::PathSpecifier::Prefix("/".into()))
    );
    match &rule.requirement_type {
        Some(requirement_rule::RequirementType::Requires(r)) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_rules_no_filter() {
    assert_eq!(http_filter(&[], &JwksStore::new()), None);
    assert_eq!(http_filter(&[ra("empty", vec![])], &JwksStore::new()), None);
}

#[test]
fn a_rule_becomes_a_provider_with_its_fields_and_the_payload_in_metadata() {
    let rule = JwtRule {
        issuer: "https://issuer.example.com".into(),
        audiences: vec!["shop".into()],
        jwks: JWKS.into(),
        from_headers: vec![RuleHeader {
            name: "x-jwt".into(),
            prefix: "Bearer ".into(),
        }],
        from_params: vec!["token".into()],
        from_cookies: vec!["session".into()],
        output_payload_to_header: "x-payload".into(),
        forward_original_token: true,
        output_claim_to_headers: vec![ClaimToHeader {
            header: "x-sub".into(),
            claim: "sub".into(),
        }],
        space_delimited_claims: vec!["roles".into(), "scope".into()],
        ..Default::default()
    };
    let config = decode(&http_filter(&[ra("jwt", vec![rule])], &JwksStore::new()).unwrap());
    assert!(config.bypass_cors_preflight);
    let p = &config.providers["origins-0"];
    assert_eq!(p.issuer, "https://issuer.example.com");
    assert_eq!(p.audiences, ["shop"]);
    assert!(p.forward);
    assert_eq!(p.forward_payload_header, "x-payload");
    assert_eq!(p.payload_in_metadata, "payload");
    assert_eq!(
        p.normalize_payload_in_metadata
            .as_ref()
            .unwrap()
            .space_delimited_claims,
        ["permission", "roles", "scope"]
    );
    assert_eq!(
        p.from_headers,
        [JwtHeader {
            name: "x-jwt".into(),
            value_prefix: "Bearer ".into()
        }]
    );
    assert_eq!(p.from_params, ["token"]);
    assert_eq!(p.from_cookies, ["session"]);
    assert_eq!(p.claim_to_headers[0].header_name, "x-sub");
    assert_eq!(p.claim_to_headers[0].claim_name, "sub");
    assert_eq!(inline(p), JWKS);
    // A token must verify if present; none passes (AuthorizationPolicy decides).
    assert_eq!(
        *requires(&config),
        requires_any(vec![
            provider_named("origins-0"),
            requirement(jwt_requirement::RequiresType::AllowMissing(Empty {})),
        ])
    );
}

#[test]
fn several_rules_need_any_one_valid_token_and_no_invalid_one_in_issuer_order() {
    let config = decode(
        &http_filter(
            &[
                ra("a", vec![rule("https://z.example.com")]),
                ra("b", vec![rule("https://a.example.com")]),
            ],
            &JwksStore::new(),
        )
        .unwrap(),
    );
    assert_eq!(
        config.providers["origins-0"].issuer,
        "https://a.example.com"
    );
    assert_eq!(
        config.providers["origins-1"].issuer,
        "https://z.example.com"
    );
    let or_missing = |name: &str| {
        requires_any(vec![
            provider_named(name),
            requirement(jwt_requirement::RequiresType::AllowMissing(Empty {})),
        ])
    };
    assert_eq!(
        *requires(&config),
        requires_any(vec![
            provider_named("origins-0"),
            provider_named("origins-1"),
            requirement(jwt_requirement::RequiresType::RequiresAll(
                JwtRequirementAndList {
                    requirements: vec![or_missing("origins-0"), or_missing("origins-1")],
                }
            )),
        ])
    );
}

#[test]
fn a_jwks_uri_gets_the_fetched_keys_or_keys_that_refuse_every_token() {
    let by_uri = JwtRule {
        issuer: "https://issuer.example.com".into(),
        jwks_uri: "https://issuer.example.com/jwks".into(),
        ..Default::default()
    };
    let policies = [ra("jwt", vec![by_uri])];
    let keys = JwksStore::new();
    let config = decode(&http_filter(&policies, &keys).unwrap());
    assert_eq!(inline(&config.providers["origins-0"]), UNFETCHED_JWKS);
    assert_eq!(keys_version(&policies, &keys), 0);
    assert!(keys.set("https://issuer.example.com/jwks", Arc::from(JWKS)));
    assert!(
        !keys.set("https://issuer.example.com/jwks", Arc::from(JWKS)),
        "unchanged"
    );
    assert_eq!(keys_version(&policies, &keys), 1);
    let config = decode(&http_filter(&policies, &keys).unwrap());
    assert_eq!(inline(&config.providers["origins-0"]), JWKS);
    // Inline keys do not depend on the store.
    let inline_only = [ra("inline", vec![rule("https://x")])];
    assert_eq!(keys_version(&inline_only, &keys), 0);
    assert_eq!(
        jwks_uris(&policies).collect::<Vec<_>>(),
        ["https://issuer.example.com/jwks"]
    );
    // Forgotten once no policy names it.
    keys.retain(&Default::default());
    assert!(keys.is_empty());
    assert_eq!(keys_version(&policies, &keys), 2);
}

#[test]
fn the_unfetched_keys_are_a_valid_jwks() {
    let keys =
        shoal_proto::security::authn::jwt::JwkSet::from_json(UNFETCHED_JWKS.as_bytes()).unwrap();
    assert_eq!(keys.keys().len(), 1);
}

#[test]
fn the_encoding_is_the_same_every_time() {
    let policies: Vec<_> = (0..10)
        .map(|i| ra(&format!("p{i}"), vec![rule(&format!("https://i{i}"))]))
        .collect();
    let keys = JwksStore::new();
    let first = http_filter(&policies, &keys).unwrap().encode_to_vec();
    for _ in 0..5 {
        assert_eq!(
            http_filter(&policies, &keys).unwrap().encode_to_vec(),
            first
        );
    }
}
