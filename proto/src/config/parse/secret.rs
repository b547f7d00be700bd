//! A Secret's TLS material, read as Istio's credential controller reads it: `tls.crt`,
//! `tls.key` and `ca.crt`, or Istio's generic `cert`, `key` and `cacert`; `data` is
//! base64 and `stringData` plain, as the API server takes them.

use super::super::k8s::SecretSpec;
use super::doc::{DecodeError, Doc};
use base64::Engine;
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct RawSecret {
    data: BTreeMap<String, String>,
    string_data: BTreeMap<String, String>,
}

/// The TLS material of the Secret in `doc`; empty when it has none. A key that is not
/// base64, or not text, is an error naming the key (never its content).
pub fn tls_material(doc: Doc<'_>) -> Result<SecretSpec, DecodeError> {
    let raw: RawSecret = doc.decode()?;
    let value = |keys: [&str; 2]| -> Result<String, DecodeError> {
        for key in keys {
            if let Some(v) = raw.string_data.get(key) {
                return Ok(v.clone());
            }
            if let Some(v) = raw.data.get(key) {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(v.trim())
                    .map_err(|e| DecodeError::custom(format!("data.{key}: not base64: {e}")))?;
                return String::from_utf8(bytes)
                    .map_err(|_| DecodeError::custom(format!("data.{key}: not PEM text")));
            }
        }
        Ok(String::new())
    };
    let spec = SecretSpec {
        cert_chain: value(["tls.crt", "cert"])?,
        private_key: value(["tls.key", "key"])?,
        ca_cert: value(["ca.crt", "cacert"])?,
    };
    if !spec.cert_chain.is_empty() && spec.private_key.is_empty() {
        return Err(DecodeError::custom(
            "has a certificate (tls.crt or cert) but no private key (tls.key or key)",
        ));
    }
    for (key, pem) in [
        ("certificate", &spec.cert_chain),
        ("private key", &spec.private_key),
        ("CA certificate", &spec.ca_cert),
    ] {
        if !pem.is_empty() && !pem.contains("-----BEGIN ") {
            return Err(DecodeError::custom(format!(
                "the {key} is not PEM (no -----BEGIN line)"
            )));
        }
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn tls_and_generic_keys_are_read() {
        let doc = format!(
            "data:\n  tls.crt: {}\n  tls.key: {}\n  ca.crt: {}\n",
            b64(PEM),
            b64("-----BEGIN PRIVATE KEY-----\nx\n"),
            b64(PEM)
        );
        let s = tls_material(Doc::Yaml(&doc)).unwrap();
        assert_eq!((s.cert_chain.as_str(), s.ca_cert.as_str()), (PEM, PEM));
        assert!(s.private_key.starts_with("-----BEGIN PRIVATE KEY"));

        let generic = format!(
            "stringData:\n  cacert: |\n    {}\n",
            PEM.replace('\n', "\n    ")
        );
        let s = tls_material(Doc::Yaml(&generic)).unwrap();
        assert!(s.has_tls_material() && s.cert_chain.is_empty());
    }

    #[test]
    fn other_secrets_have_no_material_and_bad_keys_are_named() {
        assert!(
            !tls_material(Doc::Yaml("data:\n  token: YWJj\n"))
                .unwrap()
                .has_tls_material()
        );
        let err = tls_material(Doc::Yaml("data:\n  tls.crt: '%%%'\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("data.tls.crt: not base64"), "{err}");
        let err = tls_material(Doc::Yaml(&format!("data:\n  tls.crt: {}\n", b64(PEM))))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no private key"), "{err}");
        // The Debug form shows which parts there are, never the key.
        let s = SecretSpec {
            private_key: "SECRET".into(),
            ..Default::default()
        };
        assert!(!format!("{s:?}").contains("SECRET"));
    }
}
