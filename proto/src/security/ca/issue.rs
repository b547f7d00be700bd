//! Issuing certificates: workload certificates from CSRs (what `CreateCertificate`
//! returns) and the edge's own serving certificates, both as Istio makes them.

use super::csr::verify_csr;
use super::error::CaError;
use super::material::SigningMaterial;
use super::pem::{cert_to_pem, to_offset};
use crate::security::spiffe::SpiffeId;
use rcgen::{
    CertificateParams, DistinguishedName, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    SanType, SerialNumber, SubjectPublicKeyInfo,
};
use std::fmt;
use std::time::{Duration, SystemTime};

/// Istio's default workload certificate lifetime (`DEFAULT_WORKLOAD_CERT_TTL`): 24 h.
pub const DEFAULT_WORKLOAD_CERT_TTL: Duration = Duration::from_secs(24 * 3600);
/// Istio's longest workload certificate lifetime (`MAX_WORKLOAD_CERT_TTL`): 90 days.
pub const MAX_WORKLOAD_CERT_TTL: Duration = Duration::from_secs(90 * 24 * 3600);
/// Certificates are valid from this long before they are issued, for clocks behind ours
/// (Istio's `ClockSkewGracePeriod`).
pub const CLOCK_SKEW_GRACE: Duration = Duration::from_secs(120);

/// Lifetimes the CA grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CertPolicy {
    /// When the request asks for none.
    pub default_ttl: Duration,
    /// A request asking for more is refused (Istio's `TTL_ERROR`), not shortened.
    pub max_ttl: Duration,
}

impl Default for CertPolicy {
    fn default() -> Self {
        CertPolicy {
            default_ttl: DEFAULT_WORKLOAD_CERT_TTL,
            max_ttl: MAX_WORKLOAD_CERT_TTL,
        }
    }
}

/// A certificate and key the CA made for the edge itself.
#[derive(Clone)]
pub struct ServingCert {
    /// The leaf then the intermediates, PEM (what a TLS endpoint presents; no root).
    pub chain_pem: String,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCert")
            .field("chain_bytes", &self.chain_pem.len())
            .field("key_pem", &"<redacted>")
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .finish()
    }
}

impl SigningMaterial {
    /// Signs a workload CSR for `caller`, the identity its credentials proved.
    ///
    /// The CSR must be signed by its own key and name exactly `caller` (one URI SAN, no
    /// other name). Its lifetime is `requested_ttl` (`None` or zero: the policy's
    /// default), refused over the policy's maximum, and never past the issuer's expiry.
    /// Returns the chain as Istio's response carries it: the leaf, the intermediates one
    /// per element, then the root bundle as the last element.
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        caller: &SpiffeId,
        requested_ttl: Option<Duration>,
        policy: &CertPolicy,
        now: SystemTime,
    ) -> Result<Vec<String>, CaError> {
        let csr = verify_csr(csr_pem)?;
        let expected = caller.to_string();
        match csr.sans.as_slice() {
            [only] if csr.uri_sans.len() == 1 && *only == expected => {}
            [] => {
                return Err(CaError::IdentityMismatch {
                    requested: "no subjectAltName".into(),
                    caller: expected,
                });
            }
            sans => {
                return Err(CaError::IdentityMismatch {
                    requested: sans.join(", "),
                    caller: expected,
                });
            }
        }
        let ttl = match requested_ttl.filter(|t| !t.is_zero()) {
            None => policy.default_ttl,
            Some(t) if t > policy.max_ttl => {
                return Err(CaError::Ttl {
                    requested: t,
                    max: policy.max_ttl,
                });
            }
            Some(t) => t,
        };
        let public_key = SubjectPublicKeyInfo::from_der(&csr.spki_der)
            .map_err(|e| CaError::Csr(format!("its public key is not supported ({e})")))?;
        let params = self.leaf_params(vec![uri_san(&expected)?], ttl, now)?;
        let leaf = params
            .signed_by(&public_key, &self.issuer)
            .map_err(|e| CaError::CertGen(e.to_string()))?;
        let mut chain = Vec::with_capacity(self.chain_pem.len() + 2);
        chain.push(cert_to_pem(leaf.der()));
        chain.extend(self.chain_pem.iter().cloned());
        chain.push(self.root_bundle_pem().to_string());
        Ok(chain)
    }

    /// A key and certificate for the edge's own TLS server and client: `dns_names` (the
    /// Service names, `istiod.<ns>.svc`) and, when given, the edge's SPIFFE ID, so that
    /// the same certificate proves the edge to another edge.
    pub fn issue_serving(
        &self,
        dns_names: &[String],
        spiffe: Option<&SpiffeId>,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<ServingCert, CaError> {
        let mut sans = Vec::with_capacity(dns_names.len() + 1);
        for name in dns_names {
            if !is_dns_name(name) {
                return Err(CaError::CertGen(format!("{name:?} is not a DNS name")));
            }
            let dns = name
                .clone()
                .try_into()
                .map_err(|_| CaError::CertGen(format!("{name:?} is not a DNS name")))?;
            sans.push(SanType::DnsName(dns));
        }
        if let Some(id) = spiffe {
            sans.push(uri_san(&id.to_string())?);
        }
        if sans.is_empty() {
            return Err(CaError::CertGen(
                "a serving certificate needs at least one name".into(),
            ));
        }
        let key = KeyPair::generate().map_err(|e| CaError::CertGen(e.to_string()))?;
        let params = self.leaf_params(sans, ttl, now)?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| CaError::CertGen(e.to_string()))?;
        let mut chain_pem = cert_to_pem(cert.der());
        chain_pem.extend(self.chain_pem.iter().map(String::as_str));
        Ok(ServingCert {
            chain_pem,
            key_pem: key.serialize_pem(),
            not_before: now - CLOCK_SKEW_GRACE,
            not_after: (now + ttl).min(self.not_after),
        })
    }

    /// A leaf as Istio makes one: empty subject (so the SAN extension is critical),
    /// digitalSignature + keyEncipherment, serverAuth + clientAuth, not a CA, from
    /// `now` less the clock-skew grace until `now + ttl` or the issuer's expiry.
    fn leaf_params(
        &self,
        sans: Vec<SanType>,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<CertificateParams, CaError> {
        if self.not_after <= now {
            return Err(CaError::IssuerExpired {
                expired_at: super::pem::unix_secs(self.not_after),
            });
        }
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names = sans;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial()?);
        params.not_before = to_offset(now - CLOCK_SKEW_GRACE);
        params.not_after = to_offset((now + ttl).min(self.not_after));
        Ok(params)
    }
}

/// Letters, digits and hyphens in non-empty dot-separated labels (a leading `*.` allowed).
fn is_dns_name(name: &str) -> bool {
    let name = name.strip_prefix("*.").unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn uri_san(uri: &str) -> Result<SanType, CaError> {
    let ia5 = uri
        .to_string()
        .try_into()
        .map_err(|_| CaError::CertGen(format!("{uri:?} is not an ASCII URI")))?;
    Ok(SanType::URI(ia5))
}

/// A random positive 128-bit serial number.
pub(crate) fn random_serial() -> Result<SerialNumber, CaError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| CaError::CertGen("no randomness for a serial number".into()))?;
    bytes[0] = (bytes[0] & 0x7f) | 0x01;
    Ok(SerialNumber::from_slice(&bytes))
}
