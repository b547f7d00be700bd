//! The CA end to end without I/O: real keys and certificates made here, checked with
//! x509-parser and with rustls-webpki as a TLS peer would check them.

use super::*;
use crate::security::spiffe::SpiffeId;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, UnixTime};
use std::time::{Duration, SystemTime};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

fn now() -> SystemTime {
    SystemTime::now()
}

fn id(ns: &str, sa: &str) -> SpiffeId {
    SpiffeId::new("cluster.local", ns, sa)
}

fn csr_for(uris: &[&str]) -> String {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.subject_alt_names = uris
        .iter()
        .map(|u| SanType::URI(u.to_string().try_into().unwrap()))
        .collect();
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn der_of(pem: &str) -> Vec<Vec<u8>> {
    super::pem::certs_from_pem(pem).unwrap()
}

/// Verifies `leaf` through `intermediates` to `roots` at `at` as a TLS client would
/// verify a server certificate, and as a server a client certificate.
fn webpki_verify(
    leaf: &[u8],
    intermediates: &[Vec<u8>],
    roots: &[Vec<u8>],
    at: SystemTime,
) -> Result<(), webpki::Error> {
    let roots: Vec<CertificateDer<'_>> = roots
        .iter()
        .map(|r| CertificateDer::from(r.as_slice()))
        .collect();
    let anchors: Vec<_> = roots
        .iter()
        .map(|r| webpki::anchor_from_trusted_cert(r).unwrap())
        .collect();
    let inter: Vec<CertificateDer<'_>> = intermediates
        .iter()
        .map(|c| CertificateDer::from(c.as_slice()))
        .collect();
    let leaf = CertificateDer::from(leaf);
    let ee = webpki::EndEntityCert::try_from(&leaf)?;
    let time = UnixTime::since_unix_epoch(at.duration_since(SystemTime::UNIX_EPOCH).unwrap());
    for usage in [
        webpki::KeyUsage::server_auth(),
        webpki::KeyUsage::client_auth(),
    ] {
        ee.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &inter,
            time,
            usage,
            None,
            None,
        )?;
    }
    Ok(())
}

/// A root and an intermediate below it, as `istioctl`'s tooling writes `cacerts`.
struct Plugin {
    files: PluginCerts,
    root_pem: String,
}

fn plugin(now: SystemTime) -> Plugin {
    let root_key = KeyPair::generate().unwrap();
    let mut root = CertificateParams::default();
    root.distinguished_name
        .push(DnType::OrganizationName, "Example Root");
    root.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    root.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    root.not_before = super::pem::to_offset(now - DAY);
    root.not_after = super::pem::to_offset(now + 3650 * DAY);
    let root_cert = root.self_signed(&root_key).unwrap();
    let root_issuer = Issuer::new(root, root_key);

    let ca_key = KeyPair::generate().unwrap();
    let mut inter = CertificateParams::default();
    inter.distinguished_name = DistinguishedName::new();
    inter
        .distinguished_name
        .push(DnType::OrganizationName, "Example Intermediate");
    inter.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    inter.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    inter.not_before = super::pem::to_offset(now - DAY);
    inter.not_after = super::pem::to_offset(now + 365 * DAY);
    let ca_cert = inter.signed_by(&ca_key, &root_issuer).unwrap();
    Plugin {
        files: PluginCerts {
            ca_cert: ca_cert.pem(),
            ca_key: ca_key.serialize_pem(),
            cert_chain: Some(format!("{}{}", ca_cert.pem(), root_cert.pem())),
            root_cert: root_cert.pem(),
        },
        root_pem: root_cert.pem(),
    }
}

fn parse_leaf(pem: &str) -> Vec<u8> {
    der_of(pem).remove(0)
}

#[test]
fn a_self_signed_root_signs_a_workload_csr_that_verifies_as_istio_makes_it() {
    let t = now();
    let ca =
        SigningMaterial::self_signed("cluster.local", DEFAULT_SELF_SIGNED_ROOT_TTL, t).unwrap();
    let caller = id("shop", "web");
    let chain = ca
        .sign_csr(
            &csr_for(&[&caller.to_string()]),
            &caller,
            None,
            &CertPolicy::default(),
            t,
        )
        .unwrap();
    assert_eq!(chain.len(), 2, "leaf then root");
    assert_eq!(chain[1], ca.root_bundle_pem());
    let leaf_der = parse_leaf(&chain[0]);
    webpki_verify(&leaf_der, &[], ca.root_ders(), t).unwrap();

    let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
    assert!(
        leaf.subject().as_raw().len() <= 2,
        "empty subject: {}",
        leaf.subject()
    );
    let san = leaf.subject_alternative_name().unwrap().unwrap();
    assert!(san.critical, "SAN critical with an empty subject");
    assert_eq!(
        san.value.general_names,
        vec![GeneralName::URI("spiffe://cluster.local/ns/shop/sa/web")]
    );
    let ku = leaf.key_usage().unwrap().unwrap().value;
    assert!(ku.digital_signature() && ku.key_encipherment() && !ku.key_cert_sign());
    let eku = leaf.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && eku.client_auth);
    assert!(
        !leaf
            .basic_constraints()
            .unwrap()
            .is_some_and(|b| b.value.ca)
    );
    let v = leaf.validity();
    assert_eq!(
        v.not_after.timestamp() - v.not_before.timestamp(),
        (DAY + CLOCK_SKEW_GRACE).as_secs() as i64,
        "24h default + skew grace"
    );

    // The root as istiod makes it: organization = trust domain, a CA, 10 years.
    let (_, root) = X509Certificate::from_der(&ca.root_ders()[0]).unwrap();
    assert_eq!(
        root.subject()
            .iter_organization()
            .next()
            .unwrap()
            .as_str()
            .unwrap(),
        "cluster.local"
    );
    assert!(root.basic_constraints().unwrap().unwrap().value.ca);
}

#[test]
fn a_plugin_ca_signs_and_the_response_carries_the_chain_root_last() {
    let t = now();
    let p = plugin(t);
    let ca = SigningMaterial::from_plugin(&p.files, t).unwrap();
    assert_eq!(ca.kind(), MaterialKind::Plugin);
    assert!(
        ca.istio_ca_secret_pem().is_none(),
        "a plug-in key is never handed out to persist"
    );
    let caller = id("shop", "web");
    let chain = ca
        .sign_csr(
            &csr_for(&[&caller.to_string()]),
            &caller,
            Some(HOUR),
            &CertPolicy::default(),
            t,
        )
        .unwrap();
    // leaf, ca-cert, root (from cert-chain.pem), root bundle.
    assert_eq!(chain.len(), 4, "{chain:?}");
    assert_eq!(chain.last().unwrap(), &p.root_pem);
    let inter = der_of(&chain[1]);
    webpki_verify(&parse_leaf(&chain[0]), &inter, ca.root_ders(), t).unwrap();
    // Not valid past the requested hour.
    assert!(webpki_verify(&parse_leaf(&chain[0]), &inter, ca.root_ders(), t + 2 * HOUR).is_err());

    // Without cert-chain.pem, ca-cert alone is the chain.
    let mut files = p.files.clone();
    files.cert_chain = None;
    let ca = SigningMaterial::from_plugin(&files, t).unwrap();
    let chain = ca
        .sign_csr(
            &csr_for(&[&caller.to_string()]),
            &caller,
            None,
            &CertPolicy::default(),
            t,
        )
        .unwrap();
    assert_eq!(chain.len(), 3);
    webpki_verify(
        &parse_leaf(&chain[0]),
        &der_of(&chain[1]),
        ca.root_ders(),
        t,
    )
    .unwrap();
}

#[test]
fn a_leaf_never_outlives_its_issuer_and_ttls_follow_istio() {
    let t = now();
    let ca = SigningMaterial::self_signed("cluster.local", 2 * DAY, t).unwrap();
    let caller = id("a", "b");
    let csr = csr_for(&[&caller.to_string()]);
    let policy = CertPolicy::default();
    let chain = ca
        .sign_csr(&csr, &caller, Some(30 * DAY), &policy, t)
        .unwrap();
    let leaf_der = parse_leaf(&chain[0]);
    let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
    let (_, issuer_end) = ca.issuer_validity();
    assert_eq!(
        leaf.validity().not_after.timestamp(),
        super::pem::unix_secs(issuer_end)
    );

    // Over the maximum: refused with Istio's TTL error, not shortened.
    let err = ca
        .sign_csr(
            &csr,
            &caller,
            Some(MAX_WORKLOAD_CERT_TTL + HOUR),
            &policy,
            t,
        )
        .unwrap_err();
    assert_eq!(err.kind(), CaErrorKind::TtlError);
    assert!(
        err.to_string().contains("greater than the max allowed TTL"),
        "{err}"
    );
    // Zero means the default.
    let chain = ca
        .sign_csr(&csr, &caller, Some(Duration::ZERO), &policy, t)
        .unwrap();
    let leaf_der = parse_leaf(&chain[0]);
    let (_, leaf) = X509Certificate::from_der(&leaf_der).unwrap();
    let v = leaf.validity();
    assert_eq!(
        v.not_after.timestamp() - v.not_before.timestamp(),
        (DAY + CLOCK_SKEW_GRACE).as_secs() as i64
    );
    // An expired issuer signs nothing.
    let err = ca
        .sign_csr(&csr, &caller, None, &policy, t + 3 * DAY)
        .unwrap_err();
    assert_eq!(err.kind(), CaErrorKind::CaNotReady, "{err}");
}

#[test]
fn a_csr_for_another_identity_or_with_two_names_is_refused_naming_both() {
    let t = now();
    let ca = SigningMaterial::self_signed("cluster.local", DAY, t).unwrap();
    let caller = id("shop", "web");
    let policy = CertPolicy::default();
    let other = "spiffe://cluster.local/ns/bank/sa/vault";
    let err = ca
        .sign_csr(&csr_for(&[other]), &caller, None, &policy, t)
        .unwrap_err();
    assert_eq!(err.kind(), CaErrorKind::CsrError);
    let msg = err.to_string();
    assert!(
        msg.contains(other) && msg.contains(&caller.to_string()),
        "{msg}"
    );

    let err = ca
        .sign_csr(
            &csr_for(&[&caller.to_string(), other]),
            &caller,
            None,
            &policy,
            t,
        )
        .unwrap_err();
    assert!(matches!(err, CaError::IdentityMismatch { .. }), "{err}");
    let err = ca
        .sign_csr(&csr_for(&[]), &caller, None, &policy, t)
        .unwrap_err();
    assert!(err.to_string().contains("no subjectAltName"), "{err}");
}

#[test]
fn garbage_forged_and_oversized_csrs_are_refused_clearly() {
    let t = now();
    let ca = SigningMaterial::self_signed("cluster.local", DAY, t).unwrap();
    let caller = id("shop", "web");
    let policy = CertPolicy::default();
    let err = ca
        .sign_csr("not a csr", &caller, None, &policy, t)
        .unwrap_err();
    assert_eq!(err.kind(), CaErrorKind::CsrError);
    assert!(err.to_string().contains("not PEM"), "{err}");

    let cert_pem = ca.root_bundle_pem();
    let err = ca
        .sign_csr(cert_pem, &caller, None, &policy, t)
        .unwrap_err();
    assert!(
        err.to_string().contains("not a CERTIFICATE REQUEST"),
        "{err}"
    );

    // A CSR whose signature is broken: flip a byte of the signature (the DER's tail).
    let good = csr_for(&[&caller.to_string()]);
    let (_, block) = x509_parser::pem::parse_x509_pem(good.as_bytes()).unwrap();
    let mut der = block.contents.clone();
    let last = der.len() - 3;
    der[last] ^= 0x55;
    use base64::Engine;
    let forged = format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        base64::engine::general_purpose::STANDARD.encode(&der)
    );
    let err = ca.sign_csr(&forged, &caller, None, &policy, t).unwrap_err();
    assert!(err.to_string().contains("signature"), "{err}");

    let huge = "A".repeat(super::csr::MAX_CSR_BYTES + 1);
    let err = ca.sign_csr(&huge, &caller, None, &policy, t).unwrap_err();
    assert!(matches!(err, CaError::CsrTooLarge { .. }), "{err}");
}

#[test]
fn plugin_material_is_validated_with_the_file_named() {
    let t = now();
    let p = plugin(t);
    // A key of another certificate.
    let mut files = p.files.clone();
    files.ca_key = KeyPair::generate().unwrap().serialize_pem();
    let err = SigningMaterial::from_plugin(&files, t)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("ca-key.pem:") && err.contains("does not match"),
        "{err}"
    );
    assert!(!err.contains("PRIVATE"), "{err}");

    // A root that did not sign the chain.
    let other = plugin(t);
    let mut files = p.files.clone();
    files.root_cert = other.root_pem.clone();
    files.cert_chain = None;
    let err = SigningMaterial::from_plugin(&files, t)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("root-cert.pem:") && err.contains("Example Intermediate"),
        "{err}"
    );

    // A leaf is not a CA.
    let ca = SigningMaterial::self_signed("cluster.local", DAY, t).unwrap();
    let serving = ca.issue_serving(&["x.svc".into()], None, HOUR, t).unwrap();
    let files = PluginCerts {
        ca_cert: serving.chain_pem.clone(),
        ca_key: serving.key_pem.clone(),
        cert_chain: None,
        root_cert: ca.root_bundle_pem().to_string(),
    };
    let err = SigningMaterial::from_plugin(&files, t)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("ca-cert.pem:") && err.contains("not a CA"),
        "{err}"
    );

    // Garbage and expiry.
    let mut files = p.files.clone();
    files.root_cert = "junk".into();
    let err = SigningMaterial::from_plugin(&files, t)
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("root-cert.pem:"), "{err}");
    let err = SigningMaterial::from_plugin(&p.files, t + 400 * DAY)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("ca-cert.pem:") && err.contains("expired"),
        "{err}"
    );
    // Debug never shows the key.
    assert!(!format!("{:?}", p.files).contains("PRIVATE"));
}

#[test]
fn a_self_signed_root_persists_and_reloads_and_renews_with_the_same_key() {
    let t = now();
    let ca =
        SigningMaterial::self_signed("cluster.local", DEFAULT_SELF_SIGNED_ROOT_TTL, t).unwrap();
    assert!(!format!("{ca:?}").contains("PRIVATE"), "{ca:?}");
    let (cert, key) = ca.istio_ca_secret_pem().unwrap();
    let again = SigningMaterial::from_istio_ca_secret(&cert, &key, t).unwrap();
    assert_eq!(again.root_ders(), ca.root_ders());
    let caller = id("a", "b");
    let chain = again
        .sign_csr(
            &csr_for(&[&caller.to_string()]),
            &caller,
            None,
            &CertPolicy::default(),
            t,
        )
        .unwrap();
    webpki_verify(&parse_leaf(&chain[0]), &[], ca.root_ders(), t).unwrap();

    // Renewed: new root, same key and subject; leaves of either verify under either.
    let renewed = ca
        .renew_self_signed("cluster.local", DEFAULT_SELF_SIGNED_ROOT_TTL, t)
        .unwrap();
    assert_eq!(renewed.root_ders().len(), 2, "new root first, old kept");
    assert_ne!(renewed.root_ders()[0], ca.root_ders()[0]);
    let new_leaf = renewed
        .sign_csr(
            &csr_for(&[&caller.to_string()]),
            &caller,
            None,
            &CertPolicy::default(),
            t,
        )
        .unwrap();
    webpki_verify(&parse_leaf(&new_leaf[0]), &[], &ca.root_ders()[..1], t).unwrap();
    webpki_verify(&parse_leaf(&chain[0]), &[], &renewed.root_ders()[..1], t).unwrap();

    // An istio-ca-secret whose key is another's is refused.
    let other = SigningMaterial::self_signed("cluster.local", DAY, t).unwrap();
    let (_, other_key) = other.istio_ca_secret_pem().unwrap();
    let err = SigningMaterial::from_istio_ca_secret(&cert, &other_key, t)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("istio-ca-secret ca-key.pem") && err.contains("does not match"),
        "{err}"
    );
}

#[test]
fn extra_roots_join_the_bundle_once() {
    let t = now();
    let ca = SigningMaterial::self_signed("cluster.local", DAY, t).unwrap();
    let next = SigningMaterial::self_signed("cluster.local", DAY, t).unwrap();
    let own = ca.root_bundle_pem().to_string();
    let both = ca
        .with_extra_roots(&format!("{}{own}", next.root_bundle_pem()))
        .unwrap();
    assert_eq!(both.root_ders().len(), 2);
    assert!(both.root_bundle_pem().starts_with(&own));
    assert!(
        both.with_extra_roots("junk")
            .unwrap_err()
            .to_string()
            .starts_with("extra roots:")
    );
}

#[test]
fn a_serving_certificate_names_the_edge_for_tls_servers_and_clients() {
    let t = now();
    let p = plugin(t);
    let ca = SigningMaterial::from_plugin(&p.files, t).unwrap();
    let edge = id("istio-system", "shoal-edge");
    let names = vec![
        "istiod.istio-system.svc".to_string(),
        "shoal-edge.istio-system.svc".to_string(),
    ];
    let serving = ca.issue_serving(&names, Some(&edge), DAY, t).unwrap();
    assert!(!format!("{serving:?}").contains("PRIVATE"));
    let chain = der_of(&serving.chain_pem);
    webpki_verify(&chain[0], &chain[1..], ca.root_ders(), t).unwrap();
    let leaf = CertificateDer::from(chain[0].as_slice());
    let ee = webpki::EndEntityCert::try_from(&leaf).unwrap();
    let name = rustls::pki_types::ServerName::try_from("istiod.istio-system.svc").unwrap();
    ee.verify_is_valid_for_subject_name(&name).unwrap();
    let (_, x) = X509Certificate::from_der(&chain[0]).unwrap();
    let sans = x
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .clone();
    assert!(sans.contains(&GeneralName::URI(
        "spiffe://cluster.local/ns/istio-system/sa/shoal-edge"
    )));
    // The key is the certificate's.
    let key = KeyPair::from_pem(&serving.key_pem).unwrap();
    assert_eq!(
        x.public_key().subject_public_key.data.as_ref(),
        key.public_key_raw()
    );
    assert!(
        ca.issue_serving(&["not a name!".into()], None, DAY, t)
            .is_err()
    );
}
