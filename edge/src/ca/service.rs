//! [`CaService`]: `istio.v1.auth.IstioCertificateService/CreateCertificate`, a unary
//! tonic service written by hand (as the ADS transport is) over tonic's prost codec.
//!
//! ```text
//!  request ─► credentials (token, peer certs) ─► Authenticator ─► caller's SpiffeId
//!          ─► SigningMaterial (watch: rotation is a send) .sign_csr ─► cert chain
//! ```
//! Refusals follow istiod: unauthenticated → UNAUTHENTICATED ("request authenticate
//! failure"); a bad CSR, another identity or a TTL over the maximum → INVALID_ARGUMENT;
//! no usable material or a signing failure → INTERNAL. Each is logged with its reason
//! (never the token or a key) and counted.

use super::credentials::request_credentials;
use super::metrics::{CaMetrics, ErrorLabel};
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use shoal_proto::security::ca::api::{
    CREATE_CERTIFICATE_PATH, IstioCertificateRequest, IstioCertificateResponse, SERVICE_NAME,
};
use shoal_proto::security::ca::csr::MAX_CSR_BYTES;
use shoal_proto::security::ca::{CaError, CaErrorKind, CertPolicy, SigningMaterial};
use shoal_proto::security::{Authenticator, Identity, SpiffeId};
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::watch;
use tonic::server::NamedService;
use tonic::{Code, Status};

/// The largest request accepted: a CSR at its limit plus the envelope.
const MAX_REQUEST_BYTES: usize = MAX_CSR_BYTES + 4096;

/// The CA gRPC service, to mount with `tonic::transport::Server::add_service` (or a
/// `Routes`) on the secure port beside ADS.
#[derive(Clone)]
pub struct CaService {
    inner: Arc<Inner>,
}

struct Inner {
    authenticator: Arc<dyn Authenticator>,
    material: watch::Receiver<Arc<SigningMaterial>>,
    policy: CertPolicy,
    metrics: CaMetrics,
}

impl CaService {
    /// `material` is the current signing material; sending a new value rotates it for
    /// the next request. Metrics are registered in `registry` under Istio's names.
    pub fn new(
        authenticator: Arc<dyn Authenticator>,
        material: watch::Receiver<Arc<SigningMaterial>>,
        policy: CertPolicy,
        registry: &mut Registry,
    ) -> CaService {
        CaService {
            inner: Arc::new(Inner {
                authenticator,
                material,
                policy,
                metrics: CaMetrics::register(registry),
            }),
        }
    }
}

impl NamedService for CaService {
    const NAME: &'static str = SERVICE_NAME;
}

impl<B> tower_service::Service<http::Request<B>> for CaService
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != CREATE_CERTIFICATE_PATH {
            let status = Status::unimplemented(format!(
                "{} is not a method of this server; the CA serves {CREATE_CERTIFICATE_PATH}",
                req.uri().path()
            ));
            return Box::pin(std::future::ready(Ok(status.into_http())));
        }
        let method = CreateCertificate(self.inner.clone());
        Box::pin(async move {
            let codec = tonic_prost::ProstCodec::<IstioCertificateResponse, IstioCertificateRequest>::default();
            let mut grpc = tonic::server::Grpc::new(codec)
                .apply_max_message_size_config(Some(MAX_REQUEST_BYTES), None);
            Ok(grpc.unary(method, req).await)
        })
    }
}

/// The one method, as tonic's unary handler calls it.
struct CreateCertificate(Arc<Inner>);

impl tower_service::Service<tonic::Request<IstioCertificateRequest>> for CreateCertificate {
    type Response = tonic::Response<IstioCertificateResponse>;
    type Error = Status;
    type Future = BoxFuture<'static, Result<Self::Response, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::Request<IstioCertificateRequest>) -> Self::Future {
        let inner = self.0.clone();
        Box::pin(async move {
            inner
                .create_certificate(req)
                .await
                .map(tonic::Response::new)
        })
    }
}

impl Inner {
    async fn create_certificate(
        &self,
        req: tonic::Request<IstioCertificateRequest>,
    ) -> Result<IstioCertificateResponse, Status> {
        self.metrics.csr.inc();
        let credentials = request_credentials(req.metadata(), req.extensions());
        let caller = match self.authenticator.authenticate(&credentials).await {
            Ok(Identity::Authenticated(p)) => SpiffeId::from(&*p),
            Ok(Identity::Anonymous) => {
                return Err(self.unauthenticated("no workload identity was proven"));
            }
            Err(e) => return Err(self.unauthenticated(&e.to_string())),
        };
        let request = req.into_inner();
        // Istio: a non-positive validity means the default.
        let ttl = u64::try_from(request.validity_duration)
            .ok()
            .filter(|s| *s > 0)
            .map(Duration::from_secs);
        let material = self.material.borrow().clone();
        self.metrics
            .cert_chain_expiry_timestamp
            .set(unix_secs(material.issuer_validity().1));
        let policy = self.policy;
        let signer = caller.clone();
        // Signing is CPU work (an RSA signature is milliseconds): off the async threads.
        let signed = tokio::task::spawn_blocking(move || {
            material.sign_csr(&request.csr, &signer, ttl, &policy, SystemTime::now())
        })
        .await
        .unwrap_or_else(|e| Err(CaError::CertGen(format!("the signing task failed: {e}"))));
        match signed {
            Ok(cert_chain) => {
                self.metrics.success_cert_issuance.inc();
                tracing::debug!(%caller, ?ttl, "CreateCertificate: issued");
                Ok(IstioCertificateResponse { cert_chain })
            }
            Err(e) => {
                let kind = e.kind();
                if matches!(e, CaError::Csr(_) | CaError::CsrTooLarge { .. }) {
                    self.metrics.csr_parsing_err.inc();
                }
                self.metrics
                    .csr_sign_err
                    .get_or_create(&ErrorLabel {
                        error: kind.as_str(),
                    })
                    .inc();
                tracing::warn!(%caller, reason = %e, "CreateCertificate refused");
                let code = match kind {
                    CaErrorKind::CsrError | CaErrorKind::TtlError => Code::InvalidArgument,
                    CaErrorKind::CaNotReady | CaErrorKind::CertGenError => Code::Internal,
                };
                Err(Status::new(code, format!("CSR signing error ({e})")))
            }
        }
    }

    fn unauthenticated(&self, reason: &str) -> Status {
        self.metrics.authentication_failure.inc();
        tracing::warn!(
            authenticator = self.authenticator.name(),
            reason,
            "CreateCertificate refused: the caller is not authenticated"
        );
        Status::unauthenticated(format!("request authenticate failure: {reason}"))
    }
}

fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
