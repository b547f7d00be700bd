//! istiod's plug-in CA (`cacerts`), made at test time: a root and an intermediate that
//! signs workload certificates; a second intermediate under the same root for rotation.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    PKCS_ECDSA_P256_SHA256, SanType,
};
use std::path::Path;

pub struct PluginCa {
    root: Issuer<'static, KeyPair>,
    pub root_pem: String,
}

/// An intermediate as written to the plug-in directory.
pub struct Intermediate {
    pub cert_der: Vec<u8>,
}

fn ca_params(name: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(DnType::OrganizationName, "shoal-test");
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

impl PluginCa {
    pub fn new() -> PluginCa {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("root key");
        let params = ca_params("Shoal test root");
        let cert = params.self_signed(&key).expect("root");
        PluginCa {
            root_pem: cert.pem(),
            root: Issuer::new(params, key),
        }
    }

    /// Writes a new intermediate `name` into `dir` as istiod's plug-in files
    /// (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem).
    pub fn write_intermediate(&self, dir: &Path, name: &str) -> Intermediate {
        std::fs::create_dir_all(dir).expect("mkdir cacerts");
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("intermediate key");
        let cert = ca_params(name)
            .signed_by(&key, &self.root)
            .expect("sign intermediate");
        // Written to temporary names first, then renamed: the CA polls the folder and
        // must never read a key that does not match the certificate.
        let files = [
            ("root-cert.pem", self.root_pem.clone()),
            ("cert-chain.pem", format!("{}{}", cert.pem(), self.root_pem)),
            ("ca-key.pem", key.serialize_pem()),
            ("ca-cert.pem", cert.pem()),
        ];
        for (file, text) in &files {
            let tmp = dir.join(format!(".{file}.tmp"));
            std::fs::write(&tmp, text).expect("write plug-in file");
        }
        for (file, _) in &files {
            std::fs::rename(dir.join(format!(".{file}.tmp")), dir.join(file))
                .expect("rename plug-in file");
        }
        Intermediate {
            cert_der: cert.der().to_vec(),
        }
    }

    /// A client certificate for `spiffe` straight from the root (the test's own probe).
    pub fn client(&self, spiffe: &str) -> (String, String) {
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        p.subject_alt_names = vec![SanType::URI(spiffe.try_into().expect("URI"))];
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("leaf key");
        let cert = p.signed_by(&key, &self.root).expect("sign leaf");
        (cert.pem(), key.serialize_pem())
    }
}
