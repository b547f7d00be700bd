//! Hostile input to the CA: arbitrary bytes as the CSR of a `CreateCertificate` request
//! (PEM text, DER under a PEM armour, or the whole protobuf request) signed for a fixed
//! caller, and as the four files of a plug-in CA. Nothing may panic; a certificate is
//! only ever issued for the caller's own SPIFFE ID, chained to the root.

#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;
use prost::Message;
use shoal_proto::security::SpiffeId;
use shoal_proto::security::ca::api::IstioCertificateRequest;
use shoal_proto::security::ca::{CertPolicy, PluginCerts, SigningMaterial};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

fn material() -> &'static SigningMaterial {
    static MATERIAL: OnceLock<SigningMaterial> = OnceLock::new();
    MATERIAL.get_or_init(|| {
        SigningMaterial::self_signed("cluster.local", Duration::from_secs(3600 * 24 * 365), SystemTime::now())
            .expect("a root")
    })
}

fn sign(csr: &str, ttl: Option<Duration>) {
    let caller = SpiffeId::new("cluster.local", "shop", "web");
    let material = material();
    if let Ok(chain) = material.sign_csr(csr, &caller, ttl, &CertPolicy::default(), SystemTime::now()) {
        // Issued: a leaf then the root bundle, and only for the caller.
        assert!(chain.len() >= 2, "a chain of {}", chain.len());
        assert_eq!(chain.last().map(String::as_str), Some(material.root_bundle_pem()));
        assert!(csr.contains("CERTIFICATE REQUEST"), "issued from no CSR");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => sign(&String::from_utf8_lossy(rest), None),
        1 => {
            let b64 = base64::engine::general_purpose::STANDARD.encode(rest);
            let pem = format!("-----BEGIN CERTIFICATE REQUEST-----\n{b64}\n-----END CERTIFICATE REQUEST-----\n");
            sign(&pem, None)
        }
        2 => {
            if let Ok(request) = IstioCertificateRequest::decode(rest) {
                let ttl = u64::try_from(request.validity_duration).ok().map(Duration::from_secs);
                sign(&request.csr, ttl);
            }
        }
        _ => {
            let text = String::from_utf8_lossy(rest);
            let mut parts = text.splitn(4, "\u{0}").map(str::to_string);
            let files = PluginCerts {
                ca_cert: parts.next().unwrap_or_default(),
                ca_key: parts.next().unwrap_or_default(),
                cert_chain: parts.next(),
                root_cert: parts.next().unwrap_or_default(),
            };
            let _ = SigningMaterial::from_plugin(&files, SystemTime::now());
        }
    }
});
