//! Certificate bundles in PEM: split into DER certificates, and written back one PEM
//! block per certificate (LF line endings, as Istio's files and responses have them).

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The DER certificates of a PEM bundle, in order; `Err` is the reason.
pub(crate) fn certs_from_pem(pem: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for (i, block) in x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()).enumerate() {
        let block = block.map_err(|e| format!("PEM block {} is not readable ({e})", i + 1))?;
        if block.label != "CERTIFICATE" {
            return Err(format!(
                "PEM block {} is {:?}, not a CERTIFICATE",
                i + 1,
                block.label
            ));
        }
        X509Certificate::from_der(&block.contents)
            .map_err(|e| format!("certificate {} is not valid X.509 ({e})", i + 1))?;
        out.push(block.contents);
    }
    if out.is_empty() {
        return Err("no PEM certificate found".into());
    }
    Ok(out)
}

/// One `CERTIFICATE` PEM block.
pub(crate) fn cert_to_pem(der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::with_capacity(b64.len() + b64.len() / 64 + 64);
    out.push_str("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// Parses a DER certificate known to be valid (checked by [`certs_from_pem`] or made here).
pub(crate) fn parse(der: &[u8]) -> Result<X509Certificate<'_>, String> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| format!("not valid X.509 ({e})"))
}

pub(crate) fn to_system_time(unix_secs: i64) -> SystemTime {
    if unix_secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(unix_secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(unix_secs.unsigned_abs())
    }
}

pub(crate) fn unix_secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    }
}

pub(crate) fn to_offset(t: SystemTime) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(unix_secs(t))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}
