//! TokenReview through a real kube client, for tokens of the test issuer.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::PostParams;
use kube::{Api, Client, Config};
use shoal_kube_test_server::{ServiceAccountIssuer, Settings, TestApiServer};
use shoal_test_support::jwt::TestIssuer;

async fn review(client: &Client, token: &str, audiences: &[&str]) -> TokenReview {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: token.to_string(),
            audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
        },
        ..Default::default()
    };
    Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
}

#[tokio::test]
async fn reviews_are_answered_as_the_api_server_answers_them() {
    let issuer = TestIssuer::new("https://kubernetes.default.svc.cluster.local");
    let server = TestApiServer::start_with(Settings {
        service_account_issuer: Some(ServiceAccountIssuer::new(issuer.issuer(), issuer.jwk_set())),
        ..Default::default()
    })
    .await
    .unwrap();
    let client = Client::try_from(Config::new(server.url().parse().unwrap())).unwrap();

    let ok = review(
        &client,
        &issuer.istio_token("shop", "web"),
        &["istio-ca", "other"],
    )
    .await;
    let status = ok.status.unwrap();
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(status.audiences, Some(vec!["istio-ca".to_string()]));
    let user = status.user.unwrap();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:shop:web")
    );
    let groups = user.groups.unwrap();
    assert!(
        groups.contains(&"system:serviceaccounts:shop".to_string()),
        "{groups:?}"
    );

    let wrong = review(
        &client,
        &issuer.wrong_audience_token("shop", "web"),
        &["istio-ca"],
    )
    .await;
    let status = wrong.status.unwrap();
    assert_eq!(status.authenticated, None);
    assert_eq!(
        status.error.as_deref(),
        Some(
            "[invalid bearer token, token audiences [\"https://kubernetes.default.svc.cluster.local\"] \
             is invalid for the target audiences [\"istio-ca\"]]"
        )
    );
    // No audiences asked: the server's own, which the wrong-audience token has.
    let own = review(&client, &issuer.wrong_audience_token("shop", "web"), &[]).await;
    assert_eq!(own.status.unwrap().authenticated, Some(true));

    let expired = review(&client, &issuer.expired_token("shop", "web"), &["istio-ca"]).await;
    let status = expired.status.unwrap();
    assert_ne!(status.authenticated, Some(true));
    assert!(status.error.unwrap().contains("expired"));

    let stranger = TestIssuer::new(issuer.issuer());
    let forged = review(
        &client,
        &stranger.istio_token("kube-system", "admin"),
        &["istio-ca"],
    )
    .await;
    assert_ne!(forged.status.unwrap().authenticated, Some(true));
}
