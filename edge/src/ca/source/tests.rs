//! The sources against a real directory: plug-in files rotated under a running source,
//! a self-signed root created once and shared, and refused material reported.

use super::*;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// An intermediate signed by `root`: its certificate and key (PEM).
pub(super) fn intermediate(
    root: &(String, Issuer<'static, KeyPair>),
    name: &str,
) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::OrganizationName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = p.signed_by(&key, &root.1).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// A root and an intermediate (what `cacerts` holds), written into `dir`.
fn write_plugin(dir: &Path, root: &(String, Issuer<'static, KeyPair>), name: &str) -> String {
    let (cert, key) = intermediate(root, name);
    std::fs::write(dir.join("ca-key.pem"), key).unwrap();
    std::fs::write(dir.join("cert-chain.pem"), format!("{cert}{}", root.0)).unwrap();
    std::fs::write(dir.join("root-cert.pem"), &root.0).unwrap();
    std::fs::write(dir.join("ca-cert.pem"), &cert).unwrap();
    cert
}

pub(super) fn root() -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::default();
    p.distinguished_name
        .push(DnType::OrganizationName, "Test Root");
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let cert = p.self_signed(&key).unwrap();
    (cert.pem(), Issuer::new(p, key))
}

#[tokio::test]
async fn a_new_intermediate_in_the_plugin_dir_is_used_once_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = root();
    write_plugin(dir.path(), &root, "Intermediate A");
    let mut source = start(SourceConfig::Plugin(PluginDirConfig {
        dir: dir.path().into(),
        poll_interval: Duration::from_millis(50),
    }))
    .await
    .unwrap();
    let first = source.material.borrow_and_update().issuer_der().to_vec();

    // A broken update (a key of nothing) is refused and the old material kept.
    std::fs::write(
        dir.path().join("ca-key.pem"),
        KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!source.material.has_changed().unwrap());

    write_plugin(dir.path(), &root, "Intermediate B");
    tokio::time::timeout(Duration::from_secs(5), source.material.changed())
        .await
        .unwrap()
        .unwrap();
    let second = source.material.borrow().clone();
    assert_ne!(second.issuer_der(), first.as_slice());
    assert_eq!(second.root_bundle_pem(), root.0);
    source.task.abort();
}

#[tokio::test]
async fn broken_plugin_files_stop_the_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let err = start(SourceConfig::Plugin(PluginDirConfig::new(dir.path())))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("ca-cert.pem"), "{err}");
    write_plugin(dir.path(), &root(), "I");
    std::fs::write(dir.path().join("root-cert.pem"), root().0).unwrap();
    let err = start(SourceConfig::Plugin(PluginDirConfig::new(dir.path())))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("root-cert.pem"), "{err}");
}

#[tokio::test]
async fn a_self_signed_root_is_created_once_and_shared_through_its_directory() {
    let dir = tempfile::tempdir().unwrap();
    let config = SelfSignedConfig::new("cluster.local", Some(dir.path().join("istio-ca-secret")));
    let a = start(SourceConfig::SelfSigned(config.clone()))
        .await
        .unwrap();
    let b = start(SourceConfig::SelfSigned(config.clone()))
        .await
        .unwrap();
    assert_eq!(
        a.material.borrow().root_ders(),
        b.material.borrow().root_ders()
    );
    let key = dir.path().join("istio-ca-secret/ca-key.pem");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("istio-ca-secret"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 2, "{leftovers:?}");
    a.task.abort();
    b.task.abort();

    // In memory: one root per start.
    let m1 = start(SourceConfig::SelfSigned(SelfSignedConfig::new("td", None)))
        .await
        .unwrap();
    let m2 = start(SourceConfig::SelfSigned(SelfSignedConfig::new("td", None)))
        .await
        .unwrap();
    assert_ne!(
        m1.material.borrow().root_ders(),
        m2.material.borrow().root_ders()
    );
}

#[tokio::test]
async fn a_root_in_its_last_fifth_is_renewed_and_persisted() {
    let dir = tempfile::tempdir().unwrap();
    // A root of 10 s: its last fifth starts after 8 s; check often.
    let mut config = SelfSignedConfig::new("cluster.local", Some(dir.path().to_path_buf()));
    config.root_ttl = Duration::from_secs(10);
    config.check_interval = Duration::from_millis(100);
    // The 2-minute clock-skew backdating puts a fresh 10 s root already in its last
    // fifth, so the first check renews it.
    let mut s = start(SourceConfig::SelfSigned(config)).await.unwrap();
    let first = s.material.borrow_and_update().issuer_der().to_vec();
    tokio::time::timeout(Duration::from_secs(5), s.material.changed())
        .await
        .unwrap()
        .unwrap();
    let renewed = s.material.borrow().clone();
    assert_ne!(renewed.issuer_der(), first.as_slice());
    assert_eq!(renewed.root_ders().len(), 2, "old root kept in the bundle");
    let on_disk = std::fs::read_to_string(dir.path().join("ca-cert.pem")).unwrap();
    let (cert_pem, _) = renewed.istio_ca_secret_pem().unwrap();
    assert_eq!(on_disk, cert_pem);
    let _ = SystemTime::now();
    s.task.abort();
}
