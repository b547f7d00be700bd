//! [`CaError`]: why the CA refused or failed. Messages name the file or the request and
//! the reason; none ever contains key material (keys are never formatted, and the
//! errors of the crypto crates carry none).

use std::time::Duration;

/// Istio's CA error types (`security/pkg/pki/error`), which decide the gRPC status and
/// the `error_type` label of `citadel_server_csr_sign_err_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaErrorKind {
    /// The CA has no usable signing material (Internal).
    CaNotReady,
    /// The CSR is malformed, badly signed, too large or names another identity
    /// (InvalidArgument).
    CsrError,
    /// The requested lifetime is over the maximum (InvalidArgument).
    TtlError,
    /// Certificate generation failed (Internal).
    CertGenError,
}

impl CaErrorKind {
    /// The label value Istio's metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            CaErrorKind::CaNotReady => "CA_NOT_READY",
            CaErrorKind::CsrError => "CSR_ERROR",
            CaErrorKind::TtlError => "TTL_ERROR",
            CaErrorKind::CertGenError => "CERT_GEN_ERROR",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaError {
    /// Signing material that cannot be used: `file` is the file (or Secret key) at fault.
    #[error("{file}: {reason}")]
    Material { file: String, reason: String },
    /// The issuing certificate is no longer valid.
    #[error(
        "the CA certificate expired at {expired_at} (unix seconds); no certificate can be issued"
    )]
    IssuerExpired { expired_at: i64 },
    #[error("the CSR is {size} bytes, over the limit of {limit} bytes")]
    CsrTooLarge { size: usize, limit: usize },
    #[error("the CSR is not usable: {0}")]
    Csr(String),
    /// The CSR names another identity than the caller's.
    #[error("the CSR asks for {requested} but the caller is {caller}")]
    IdentityMismatch { requested: String, caller: String },
    #[error("requested TTL {requested:?} is greater than the max allowed TTL {max:?}")]
    Ttl { requested: Duration, max: Duration },
    #[error("could not generate the certificate: {0}")]
    CertGen(String),
}

impl CaError {
    pub(crate) fn material(file: impl Into<String>, reason: impl Into<String>) -> CaError {
        CaError::Material {
            file: file.into(),
            reason: reason.into(),
        }
    }

    /// Istio's error type of this error.
    pub fn kind(&self) -> CaErrorKind {
        match self {
            CaError::Material { .. } | CaError::IssuerExpired { .. } => CaErrorKind::CaNotReady,
            CaError::CsrTooLarge { .. } | CaError::Csr(_) | CaError::IdentityMismatch { .. } => {
                CaErrorKind::CsrError
            }
            CaError::Ttl { .. } => CaErrorKind::TtlError,
            CaError::CertGen(_) => CaErrorKind::CertGenError,
        }
    }
}
