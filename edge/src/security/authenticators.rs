//! The authenticator chain of the secure listener and the CA, in istiod's order: a
//! client certificate (verified against the mesh root in the handshake), then a token
//! verified against its issuer's keys, then a Kubernetes TokenReview.

use super::SecurityError;
use super::args::SecurityArgs;
use crate::authn::{
    JwksAuthenticator, JwksConfig, JwksSource, TokenReviewAuthenticator, TokenReviewConfig,
};
use shoal_proto::security::Authenticator;
use shoal_proto::security::authn::jwt::JwtConfig;
use shoal_proto::security::authn::{Chain, ClientCertificate};
use std::sync::Arc;

pub(super) async fn chain(
    args: &SecurityArgs,
    trust_domain: &str,
    kube: Option<kube::Client>,
) -> Result<Arc<dyn Authenticator>, SecurityError> {
    let mut chain = Chain::new(vec![Arc::new(ClientCertificate::new(
        trust_domain,
        args.trust_domain_aliases.clone(),
    ))]);
    if let Some(issuer) = &args.jwt_issuer {
        let source = match (&args.jwks_file, &args.jwks_uri) {
            (Some(file), _) => JwksSource::File(file.clone()),
            (None, Some(uri)) => JwksSource::Uri(uri.clone()),
            (None, None) => JwksSource::Discovery,
        };
        let mut jwt = JwtConfig::new(issuer.clone(), trust_domain);
        jwt.audiences = args.token_audiences.clone();
        let mut config = JwksConfig::new(jwt, source);
        config.ca_file = args.jwt_issuer_ca_file.clone();
        let jwks =
            JwksAuthenticator::new(config).map_err(|e| SecurityError::Authn(e.to_string()))?;
        // Unreachable keys at start are not fatal: they are fetched again on demand.
        if let Err(error) = jwks.refresh().await {
            tracing::warn!(%issuer, %error, "token issuer keys not loaded yet; retried on the first token");
        }
        chain = chain.then(Arc::new(jwks));
    }
    if let Some(client) = kube.filter(|_| args.token_review()) {
        let mut review = TokenReviewConfig::new(trust_domain);
        review.audiences = args.token_audiences.clone();
        chain = chain.then(Arc::new(TokenReviewAuthenticator::new(client, review)));
    }
    tracing::info!(authenticators = ?chain.names(), "secure xDS and CA callers are authenticated by");
    Ok(Arc::new(chain))
}
