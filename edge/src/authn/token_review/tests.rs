//! Against the kube-test-server's TokenReview, with tokens of the test issuer.

use super::*;
use shoal_kube_test_server::{ServiceAccountIssuer, Settings, TestApiServer};
use shoal_test_support::jwt::TestIssuer;

async fn setup() -> (TestIssuer, TestApiServer, kube::Client) {
    let issuer = TestIssuer::new("https://kubernetes.default.svc.cluster.local");
    let server = TestApiServer::start_with(Settings {
        service_account_issuer: Some(ServiceAccountIssuer::new(issuer.issuer(), issuer.jwk_set())),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    (issuer, server, client)
}

fn creds(token: String) -> Credentials {
    Credentials {
        bearer_token: Some(token),
        peer_certificates: vec![],
    }
}

fn reason(r: Result<Identity, AuthnError>) -> String {
    match r {
        Err(AuthnError::Rejected {
            authenticator: NAME,
            reason,
        }) => reason,
        other => panic!("not a token-review refusal: {other:?}"),
    }
}

#[tokio::test]
async fn a_reviewed_service_account_token_is_its_principal_and_the_answer_is_cached() {
    let (issuer, _server, client) = setup().await;
    let authn = TokenReviewAuthenticator::new(client, TokenReviewConfig::new("cluster.local"));
    let token = issuer.istio_token("shop", "web");
    for _ in 0..5 {
        let id = authn.authenticate(&creds(token.clone())).await.unwrap();
        assert_eq!(
            id.principal().unwrap().spiffe_id(),
            "spiffe://cluster.local/ns/shop/sa/web"
        );
    }
    assert_eq!(authn.reviews(), 1, "a reconnect storm is one review");
    authn
        .authenticate(&creds(issuer.istio_token("shop", "api")))
        .await
        .unwrap();
    assert_eq!(authn.reviews(), 2);
}

#[tokio::test]
async fn refusals_carry_the_api_servers_reason() {
    let (issuer, _server, client) = setup().await;
    let authn = TokenReviewAuthenticator::new(client, TokenReviewConfig::new("cluster.local"));
    let r = reason(
        authn
            .authenticate(&creds(issuer.wrong_audience_token("shop", "web")))
            .await,
    );
    assert!(
        r.contains("is invalid for the target audiences [\"istio-ca\"]"),
        "{r}"
    );
    let r = reason(
        authn
            .authenticate(&creds(issuer.expired_token("shop", "web")))
            .await,
    );
    assert!(r.contains("expired"), "{r}");
    let stranger = TestIssuer::new(issuer.issuer());
    let r = reason(
        authn
            .authenticate(&creds(stranger.istio_token("kube-system", "admin")))
            .await,
    );
    assert!(r.contains("did not authenticate"), "{r}");
    assert_eq!(
        authn.authenticate(&Credentials::default()).await,
        Err(AuthnError::Missing("no bearer token"))
    );
    let r = reason(authn.authenticate(&creds("x".repeat(20_000))).await);
    assert!(r.contains("over the limit"), "{r}");
    assert_eq!(authn.reviews(), 3);
}

#[test]
fn the_answer_is_judged_as_istiod_judges_it() {
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let authn = TokenReviewAuthenticator::new(client, TokenReviewConfig::new("cluster.local"));
    let status = |user: &str, groups: &[&str], audiences: &[&str]| TokenReview {
        status: Some(TokenReviewStatus {
            authenticated: Some(true),
            user: Some(UserInfo {
                username: Some(user.into()),
                groups: Some(groups.iter().map(|g| g.to_string()).collect()),
                ..Default::default()
            }),
            audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let sa = "system:serviceaccount:shop:web";
    let ok = authn.judge(status(sa, &[SERVICE_ACCOUNTS_GROUP], &["istio-ca"]));
    assert_eq!(ok.unwrap().namespace, "shop");
    let e = authn.judge(status("alice", &[SERVICE_ACCOUNTS_GROUP], &["istio-ca"]));
    assert!(e.unwrap_err().contains("not a service account"));
    let e = authn.judge(status(sa, &["system:authenticated"], &["istio-ca"]));
    assert!(e.unwrap_err().contains("not a service account"));
    let e = authn.judge(status(sa, &[SERVICE_ACCOUNTS_GROUP], &[]));
    assert!(e.unwrap_err().contains("none of the wanted [\"istio-ca\"]"));
}
