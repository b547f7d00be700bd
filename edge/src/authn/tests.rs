//! The chain as the 15012 server builds it: client certificate first, then the JWT.

use super::*;
use shoal_proto::security::authn::jwt::JwtConfig;
use shoal_proto::security::authn::{Chain, ClientCertificate};
use shoal_proto::security::{Authenticator, Credentials};
use shoal_test_support::jwt::TestIssuer;
use std::sync::Arc;

#[tokio::test]
async fn the_chain_takes_the_token_when_no_certificate_and_lists_both_reasons_otherwise() {
    let issuer = TestIssuer::serve().await.unwrap();
    let jwt = JwksAuthenticator::new(JwksConfig::new(
        JwtConfig::new(issuer.issuer(), "cluster.local"),
        JwksSource::Discovery,
    ))
    .unwrap();
    let chain = Chain::new(vec![
        Arc::new(ClientCertificate::new("cluster.local", vec![])),
        Arc::new(jwt),
    ]);
    let token = |t: String| Credentials {
        bearer_token: Some(t),
        peer_certificates: vec![],
    };
    let id = chain
        .authenticate(&token(issuer.istio_token("shop", "web")))
        .await
        .unwrap();
    assert_eq!(
        id.to_string(),
        "spiffe://cluster.local/ns/shop/sa/web (jwt)"
    );

    let e = chain
        .authenticate(&token(issuer.expired_token("shop", "web")))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("client-certificate: no client certificate"),
        "{e}"
    );
    assert!(e.contains("jwt: the token expired"), "{e}");
    assert!(matches!(
        chain.authenticate(&Credentials::default()).await,
        Err(AuthnError::Missing(_))
    ));
}
