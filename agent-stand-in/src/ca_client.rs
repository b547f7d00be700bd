//! The Istio CA client (the agent's `caclient/providers/citadel`): one unary
//! `CreateCertificate` per request, the token read from its file for each call.

use crate::config::Config;
use crate::tls;
use anyhow::Context;
use rustls::ClientConfig;
use shoal_proto::security::ca::api::{
    CREATE_CERTIFICATE_PATH, IstioCertificateRequest, IstioCertificateResponse,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::Channel;

#[derive(Clone)]
pub struct CaClient {
    channel: Channel,
    token_path: PathBuf,
    timeout: Duration,
}

impl CaClient {
    pub fn new(
        addr: &str,
        server_name: &str,
        config: Arc<ClientConfig>,
        cfg: &Config,
    ) -> anyhow::Result<CaClient> {
        Ok(CaClient {
            channel: tls::channel(addr, server_name, config)?,
            token_path: cfg.token_path.clone(),
            timeout: cfg.ca_timeout,
        })
    }

    /// Sends `csr_pem`, asking for `ttl`; the chain as the CA returns it (leaf first).
    pub async fn create_certificate(
        &self,
        csr_pem: String,
        ttl: Duration,
    ) -> anyhow::Result<Vec<String>> {
        let token = read_token(&self.token_path)?;
        let mut grpc = tonic::client::Grpc::new(self.channel.clone());
        let call = async {
            grpc.ready().await.context("the CA is not reachable")?;
            let mut req = tonic::Request::new(IstioCertificateRequest {
                csr: csr_pem,
                validity_duration: i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX),
            });
            req.metadata_mut().insert(
                "authorization",
                format!("Bearer {token}")
                    .parse()
                    .context("the token is not a valid header value")?,
            );
            let codec = tonic_prost::ProstCodec::<
                IstioCertificateRequest,
                IstioCertificateResponse,
            >::default();
            let path = http::uri::PathAndQuery::from_static(CREATE_CERTIFICATE_PATH);
            grpc.unary(req, path, codec)
                .await
                .map_err(|s| anyhow::anyhow!("CreateCertificate: {:?}: {}", s.code(), s.message()))
        };
        let resp = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| anyhow::anyhow!("CreateCertificate took over {:?}", self.timeout))??;
        let chain = resp.into_inner().cert_chain;
        if chain.is_empty() {
            anyhow::bail!("the CA returned an empty chain");
        }
        Ok(chain)
    }
}

/// The token, trimmed; its content never goes into an error.
pub fn read_token(path: &PathBuf) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read the token {}", path.display()))?;
    let token = text.trim().to_string();
    if token.is_empty() {
        anyhow::bail!("the token file {} is empty", path.display());
    }
    Ok(token)
}
