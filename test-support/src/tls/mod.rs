//! `TestPki`: a throw-away certificate authority made at test time, and the PEM files a
//! TLS server (nats-server, redis-server) and its client read, written to a temporary
//! directory removed on drop. Nothing here is committed key material: every run makes
//! new keys.
//!
//! ```text
//! <dir>/ca.pem                      the CA certificate (clients and servers trust it)
//! <dir>/server.pem, server-key.pem  localhost, 127.0.0.1, ::1
//! <dir>/client.pem, client-key.pem  a client certificate for mutual TLS
//! ```

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// The names the server certificate holds: what a test connects to.
pub const SERVER_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

pub struct TestPki {
    dir: TempDir,
}

impl TestPki {
    /// A new CA (common name `name`), a server certificate for [`SERVER_NAMES`] and a
    /// client certificate, all signed by it.
    pub fn new(name: &str) -> Self {
        let dir = tempfile::tempdir().expect("create pki dir");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("CA certificate");
        write(dir.path(), "ca.pem", &cert.pem());
        let issuer = Issuer::new(params, key);
        let leaf = |file: &str, names: &[&str], usage: ExtendedKeyUsagePurpose| {
            let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
            let mut params = CertificateParams::new(names).expect("leaf params");
            params
                .distinguished_name
                .push(DnType::CommonName, format!("{name} {file}"));
            params.extended_key_usages = vec![usage];
            let key = KeyPair::generate().expect("leaf key");
            let cert = params.signed_by(&key, &issuer).expect("sign leaf");
            write(dir.path(), &format!("{file}.pem"), &cert.pem());
            write(dir.path(), &format!("{file}-key.pem"), &key.serialize_pem());
        };
        leaf("server", &SERVER_NAMES, ExtendedKeyUsagePurpose::ServerAuth);
        leaf("client", &["client"], ExtendedKeyUsagePurpose::ClientAuth);
        Self { dir }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn server_cert(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    pub fn server_key(&self) -> PathBuf {
        self.dir.path().join("server-key.pem")
    }

    pub fn client_cert(&self) -> PathBuf {
        self.dir.path().join("client.pem")
    }

    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("client-key.pem")
    }
}

fn write(dir: &Path, file: &str, pem: &str) {
    std::fs::write(dir.join(file), pem).unwrap_or_else(|e| panic!("write {file}: {e}"));
}
