//! Against the test issuer's real HTTP server (and its JWKS file).

use super::*;
use shoal_test_support::jwt::TestIssuer;

fn creds(token: String) -> Credentials {
    Credentials {
        bearer_token: Some(token),
        peer_certificates: vec![],
    }
}

fn config(issuer: &TestIssuer, source: JwksSource) -> JwksConfig {
    JwksConfig::new(JwtConfig::new(issuer.issuer(), "cluster.local"), source)
}

fn reason(r: Result<Identity, AuthnError>) -> String {
    match r {
        Err(AuthnError::Rejected {
            authenticator: "jwt",
            reason,
        }) => reason,
        other => panic!("not a jwt refusal: {other:?}"),
    }
}

#[tokio::test]
async fn keys_found_by_oidc_discovery_verify_tokens_and_are_cached() {
    let issuer = TestIssuer::serve().await.unwrap();
    let authn = JwksAuthenticator::new(config(&issuer, JwksSource::Discovery)).unwrap();
    for sa in ["web", "api"] {
        let id = authn
            .authenticate(&creds(issuer.istio_token("shop", sa)))
            .await
            .unwrap();
        assert_eq!(
            id.principal().unwrap().spiffe_id(),
            format!("spiffe://cluster.local/ns/shop/sa/{sa}")
        );
    }
    assert_eq!((issuer.discovery_fetches(), issuer.jwks_fetches()), (1, 1));

    let r = authn
        .authenticate(&creds(issuer.expired_token("shop", "web")))
        .await;
    assert!(reason(r).contains("expired"));
    let r = reason(
        authn
            .authenticate(&creds(issuer.wrong_audience_token("shop", "web")))
            .await,
    );
    assert!(r.contains("istio-ca"), "{r}");
    assert_eq!(
        authn.authenticate(&Credentials::default()).await,
        Err(AuthnError::Missing("no bearer token"))
    );
    assert_eq!(issuer.jwks_fetches(), 1, "refusals fetch nothing");
}

#[tokio::test]
async fn a_rotated_key_is_fetched_once_and_made_up_kids_are_rate_limited() {
    let issuer = TestIssuer::serve().await.unwrap();
    let mut cfg = config(&issuer, JwksSource::Uri(issuer.jwks_uri()));
    cfg.min_refetch_interval = Duration::from_secs(3600);
    let authn = JwksAuthenticator::new(cfg).unwrap();
    authn
        .authenticate(&creds(issuer.istio_token("shop", "web")))
        .await
        .unwrap();
    assert_eq!(issuer.jwks_fetches(), 1);

    issuer.rotate();
    issuer.retire_old_keys();
    let id = authn
        .authenticate(&creds(issuer.istio_token("shop", "web")))
        .await;
    assert!(id.is_ok(), "{id:?}");
    assert_eq!(
        issuer.jwks_fetches(),
        2,
        "the unknown kid refetched the keys"
    );

    // A token with a kid the issuer never published: refused, and within the rate
    // limit it costs no fetch.
    let mut claims = issuer.claims("shop", "web", &["istio-ca"], Duration::from_secs(60));
    claims["x"] = serde_json::json!(1);
    let stranger = TestIssuer::new(issuer.issuer());
    for _ in 0..3 {
        let r = reason(authn.authenticate(&creds(stranger.sign(&claims))).await);
        assert!(r.contains("key id") || r.contains("signature"), "{r}");
    }
    assert_eq!(issuer.jwks_fetches(), 2);
}

#[tokio::test]
async fn a_jwks_file_is_reread_when_it_changes() {
    let issuer = TestIssuer::new("https://kubernetes.default.svc.cluster.local");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    issuer.write_jwks(&path).unwrap();
    let authn = JwksAuthenticator::new(config(&issuer, JwksSource::File(path.clone()))).unwrap();
    authn
        .authenticate(&creds(issuer.istio_token("shop", "web")))
        .await
        .unwrap();
    authn
        .authenticate(&creds(issuer.istio_token("shop", "api")))
        .await
        .unwrap();
    assert_eq!(authn.fetches(), 1, "an unchanged file is not re-read");

    issuer.rotate();
    issuer.write_jwks(&path).unwrap();
    authn
        .authenticate(&creds(issuer.istio_token("shop", "web")))
        .await
        .unwrap();
    assert_eq!(authn.fetches(), 2);
}

#[tokio::test]
async fn an_unreachable_issuer_is_a_clear_refusal() {
    let issuer = TestIssuer::new("http://127.0.0.1:9");
    let authn = JwksAuthenticator::new(config(&issuer, JwksSource::Discovery)).unwrap();
    let r = reason(
        authn
            .authenticate(&creds(issuer.istio_token("shop", "web")))
            .await,
    );
    assert!(
        r.contains("http://127.0.0.1:9/.well-known/openid-configuration"),
        "{r}"
    );
    assert!(!r.contains(&issuer.istio_token("shop", "web")[..20]), "{r}");
}
