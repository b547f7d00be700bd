//! A throwaway mesh CA for TLS tests: a self-signed root and the leaf certificates it
//! signs, with the DNS / IP names and SPIFFE ID (URI SAN) a test chooses. Made by the code
//! at test time (rcgen), never canned.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::path::{Path, PathBuf};

/// A mesh root and its signing key.
pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    /// The root certificate, DER.
    pub root_der: Vec<u8>,
    pub root_pem: String,
}

/// A certificate signed by a [`TestCa`], and its key.
pub struct Leaf {
    /// The leaf, DER (the chain is the leaf alone: the root signs it directly).
    pub cert_der: Vec<u8>,
    pub cert_pem: String,
    /// PKCS#8 DER.
    pub key_der: Vec<u8>,
    pub key_pem: String,
}

impl std::fmt::Debug for Leaf {
    // Key material stays out of test output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leaf").finish_non_exhaustive()
    }
}

impl TestCa {
    /// A new root named `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        TestCa {
            root_der: cert.der().to_vec(),
            root_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (DNS names or IP addresses) and, when given, the URI SAN
    /// `spiffe`; good for both server and client authentication.
    pub fn issue(&self, names: &[&str], spiffe: Option<&str>) -> Leaf {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        if let Some(uri) = spiffe {
            params
                .subject_alt_names
                .push(SanType::URI(uri.try_into().expect("URI SAN")));
        }
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        Leaf {
            cert_der: cert.der().to_vec(),
            cert_pem: cert.pem(),
            key_der: key.serialize_der(),
            key_pem: key.serialize_pem(),
        }
    }

    /// Writes `leaf` and this root into `dir` as `<stem>.pem`, `<stem>-key.pem` and
    /// `ca.pem`; returns the three paths.
    pub fn write(&self, dir: &Path, stem: &str, leaf: &Leaf) -> (PathBuf, PathBuf, PathBuf) {
        std::fs::create_dir_all(dir).expect("mkdir pki");
        let cert = dir.join(format!("{stem}.pem"));
        let key = dir.join(format!("{stem}-key.pem"));
        let ca = dir.join("ca.pem");
        std::fs::write(&cert, &leaf.cert_pem).expect("write cert");
        std::fs::write(&key, &leaf.key_pem).expect("write key");
        std::fs::write(&ca, &self.root_pem).expect("write ca");
        (cert, key, ca)
    }
}

/// The SPIFFE ID edges present by default.
pub const EDGE_SPIFFE: &str = "spiffe://cluster.local/ns/istio-system/sa/shoal-edge";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leaf_is_signed_by_its_root() {
        let ca = TestCa::new("test mesh");
        let leaf = ca.issue(&["127.0.0.1", "edge.test"], Some(EDGE_SPIFFE));
        assert!(leaf.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!leaf.key_der.is_empty());
        assert_ne!(leaf.cert_der, ca.root_der);
        assert_eq!(format!("{leaf:?}"), "Leaf { .. }");
    }
}
