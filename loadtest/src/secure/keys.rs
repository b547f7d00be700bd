//! `loadtest keys`: the ES256 key the loadtest mints tokens with, and the JWKS the edge
//! verifies them against (`--jwks-file`).

use shoal_test_support::jwt::TestIssuer;
use std::io::Write;
use std::path::Path;

/// Writes a new PKCS#8 PEM key to `key_file` (owner-only) and its JWKS to `jwks_file`.
pub fn write_keys(key_file: &Path, jwks_file: &Path) -> std::io::Result<()> {
    let pem = TestIssuer::generate_pkcs8_pem();
    // The issuer name is not part of the JWKS.
    let issuer = TestIssuer::from_pkcs8_pem("unused", &pem)?;
    fn with_path(path: &Path) -> impl Fn(std::io::Error) -> std::io::Error + '_ {
        move |e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(key_file)
        .and_then(|mut f| f.write_all(pem.as_bytes()))
        .map_err(with_path(key_file))?;
    issuer.write_jwks(jwks_file).map_err(with_path(jwks_file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secure::Tokens;
    use shoal_proto::security::authn::jwt::{JwkSet, JwtConfig, JwtVerifier};

    #[test]
    fn tokens_minted_from_the_key_verify_against_the_jwks() {
        let dir = tempfile::tempdir().unwrap();
        let (key, jwks) = (dir.path().join("key.pem"), dir.path().join("jwks.json"));
        write_keys(&key, &jwks).unwrap();
        let tokens = Tokens::from_key_file(&key, "https://loadtest").unwrap();
        let header = tokens.authorization("ns-3", "default");
        let token = header.to_str().unwrap().strip_prefix("Bearer ").unwrap();
        let set = JwkSet::from_json(&std::fs::read(&jwks).unwrap()).unwrap();
        let v = JwtVerifier::new(JwtConfig::new("https://loadtest", "cluster.local"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let p = v.verify(token, &set, now).unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.service_account.as_str()),
            ("ns-3", "default")
        );
    }
}
