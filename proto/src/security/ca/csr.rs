//! Workload CSRs: parsed, their signature checked, and the identity they ask for read.
//! Bounded: a CSR over [`MAX_CSR_BYTES`] is refused before it is parsed.

use super::error::CaError;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::FromDer;

/// The largest CSR accepted (an RSA 4096 CSR is about 1.7 KiB of PEM).
pub const MAX_CSR_BYTES: usize = 64 * 1024;

/// What is taken from a verified CSR: only its public key and the names it asks for
/// (the certificate is built by the CA, not copied from the request).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedCsr {
    /// The SubjectPublicKeyInfo, DER.
    pub spki_der: Vec<u8>,
    /// The subjectAltName entries: URIs as written, others described.
    pub sans: Vec<String>,
    pub uri_sans: Vec<String>,
}

/// Parses a PEM CSR and checks that it is signed by the key it carries.
pub fn verify_csr(pem: &str) -> Result<VerifiedCsr, CaError> {
    if pem.len() > MAX_CSR_BYTES {
        return Err(CaError::CsrTooLarge {
            size: pem.len(),
            limit: MAX_CSR_BYTES,
        });
    }
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| CaError::Csr(format!("it is not PEM ({e})")))?;
    if block.label != "CERTIFICATE REQUEST" && block.label != "NEW CERTIFICATE REQUEST" {
        return Err(CaError::Csr(format!(
            "the PEM block is {:?}, not a CERTIFICATE REQUEST",
            block.label
        )));
    }
    let (_, csr) = X509CertificationRequest::from_der(&block.contents)
        .map_err(|e| CaError::Csr(format!("it is not a PKCS#10 request ({e})")))?;
    csr.verify_signature().map_err(|e| {
        CaError::Csr(format!(
            "its signature does not verify with its own key ({e})"
        ))
    })?;
    let mut sans = Vec::new();
    let mut uri_sans = Vec::new();
    for ext in csr.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for name in &san.general_names {
                match name {
                    GeneralName::URI(uri) => {
                        uri_sans.push(uri.to_string());
                        sans.push(uri.to_string());
                    }
                    other => sans.push(other.to_string()),
                }
            }
        }
    }
    Ok(VerifiedCsr {
        spki_der: csr.certification_request_info.subject_pki.raw.to_vec(),
        sans,
        uri_sans,
    })
}
