//! [`SigningMaterial`]: what the CA signs with — the issuing certificate and its key,
//! the chain from it up to the root, and the root bundle agents trust — read from
//! istiod's two sources, validated, or generated as istiod's self-signed root.

use super::error::CaError;
use super::key::key_pair_from_pem;
use super::pem::{cert_to_pem, certs_from_pem, parse, to_offset, to_system_time, unix_secs};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::fmt;
use std::time::{Duration, SystemTime};
use x509_parser::prelude::X509Certificate;

/// istiod's self-signed root lifetime (`CITADEL_SELF_SIGNED_CA_CERT_TTL`): 10 years.
pub const DEFAULT_SELF_SIGNED_ROOT_TTL: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Istio's plug-in file names (the `cacerts` Secret's keys, mounted at `/etc/cacerts`).
pub const CA_CERT_FILE: &str = "ca-cert.pem";
pub const CA_KEY_FILE: &str = "ca-key.pem";
pub const CERT_CHAIN_FILE: &str = "cert-chain.pem";
pub const ROOT_CERT_FILE: &str = "root-cert.pem";

/// Chains longer than this are refused rather than walked.
const MAX_CHAIN_DEPTH: usize = 8;

/// The plug-in CA's files, as read (PEM text).
#[derive(Clone, PartialEq, Eq)]
pub struct PluginCerts {
    /// `ca-cert.pem`: the intermediate that signs workload certificates.
    pub ca_cert: String,
    /// `ca-key.pem`: its private key.
    pub ca_key: String,
    /// `cert-chain.pem`: `ca-cert` and the intermediates above it (optional; without it
    /// the chain is `ca-cert` alone).
    pub cert_chain: Option<String>,
    /// `root-cert.pem`: the root(s) agents trust.
    pub root_cert: String,
}

impl fmt::Debug for PluginCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginCerts")
            .field("ca_cert_bytes", &self.ca_cert.len())
            .field("ca_key", &"<redacted>")
            .field(
                "cert_chain_bytes",
                &self.cert_chain.as_ref().map(String::len),
            )
            .field("root_cert_bytes", &self.root_cert.len())
            .finish()
    }
}

/// Where the material came from, which decides how it rotates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaterialKind {
    /// A plug-in CA (`cacerts`): rotated by whoever writes the files.
    Plugin,
    /// A self-signed root acting as issuer (`istio-ca-secret`): re-issued by the CA
    /// within its last fifth of life ([`super::rotation`]).
    SelfSigned,
}

/// The issuing certificate and key, the chain to the root and the root bundle.
pub struct SigningMaterial {
    kind: MaterialKind,
    pub(crate) issuer: Issuer<'static, KeyPair>,
    issuer_der: Vec<u8>,
    pub(crate) not_before: SystemTime,
    pub(crate) not_after: SystemTime,
    /// The certificates a response carries between the leaf and the root (ca-cert and
    /// intermediates for a plug-in CA; none for a self-signed root).
    pub(crate) chain_pem: Vec<String>,
    root_ders: Vec<Vec<u8>>,
    root_bundle_pem: String,
}

impl fmt::Debug for SigningMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningMaterial")
            .field("kind", &self.kind)
            .field("issuer_not_after", &unix_secs(self.not_after))
            .field("chain_len", &self.chain_pem.len())
            .field("roots", &self.root_ders.len())
            .field("key", &"<redacted>")
            .finish()
    }
}

impl SigningMaterial {
    /// A plug-in CA, validated as istiod does before using it: the key is `ca-cert`'s,
    /// `ca-cert` is a CA still valid at `now`, and it chains through `cert-chain` to a
    /// root of `root-cert`. Each refusal names the file at fault.
    pub fn from_plugin(files: &PluginCerts, now: SystemTime) -> Result<SigningMaterial, CaError> {
        let ca = first_cert(CA_CERT_FILE, &files.ca_cert)?;
        let key =
            key_pair_from_pem(&files.ca_key).map_err(|r| CaError::material(CA_KEY_FILE, r))?;
        let roots =
            certs_from_pem(&files.root_cert).map_err(|r| CaError::material(ROOT_CERT_FILE, r))?;
        let chain = match &files.cert_chain {
            Some(pem) => certs_from_pem(pem).map_err(|r| CaError::material(CERT_CHAIN_FILE, r))?,
            None => vec![ca.clone()],
        };
        check_issuer(&ca, &key, CA_CERT_FILE, CA_KEY_FILE, now)?;
        verify_chain(&ca, &chain, &roots)?;
        // The response carries ca-cert and what is above it, never the roots twice
        // over: a chain file ending in the root keeps it, as Istio's responses do.
        let mut chain_ders = chain;
        if chain_ders.first() != Some(&ca) {
            chain_ders.insert(0, ca.clone());
        }
        Self::assemble(
            MaterialKind::Plugin,
            ca,
            key,
            chain_ders,
            roots,
            CA_CERT_FILE,
        )
    }

    /// A self-signed root acting as issuer, as istiod keeps it in the `istio-ca-secret`
    /// Secret (`ca-cert.pem`, `ca-key.pem`); the root bundle is the root itself.
    pub fn from_istio_ca_secret(
        ca_cert_pem: &str,
        ca_key_pem: &str,
        now: SystemTime,
    ) -> Result<SigningMaterial, CaError> {
        let file = "istio-ca-secret ca-cert.pem";
        let ca = first_cert(file, ca_cert_pem)?;
        let key = key_pair_from_pem(ca_key_pem)
            .map_err(|r| CaError::material("istio-ca-secret ca-key.pem", r))?;
        check_issuer(&ca, &key, file, "istio-ca-secret ca-key.pem", now)?;
        let cert = parse(&ca).map_err(|r| CaError::material(file, r))?;
        if cert.subject().as_raw() != cert.issuer().as_raw() || cert.verify_signature(None).is_err()
        {
            return Err(CaError::material(
                file,
                "the certificate is not self-signed",
            ));
        }
        drop(cert);
        Self::assemble(
            MaterialKind::SelfSigned,
            ca.clone(),
            key,
            Vec::new(),
            vec![ca],
            file,
        )
    }

    /// Generates a self-signed root as istiod does without a plug-in CA: organization =
    /// trust domain, valid from `now` (less the clock-skew grace) for `ttl` (istiod:
    /// [`DEFAULT_SELF_SIGNED_ROOT_TTL`]). The key is ECDSA P-256 (istiod uses RSA 2048;
    /// ring cannot generate RSA keys, and agents accept either).
    pub fn self_signed(
        trust_domain: &str,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<SigningMaterial, CaError> {
        let key = KeyPair::generate().map_err(|e| CaError::CertGen(e.to_string()))?;
        Self::self_signed_with_key(trust_domain, key, ttl, now, Vec::new())
    }

    /// A new self-signed root with the same key and subject (istiod's root rotator does
    /// the same, so certificates issued under the old root still verify under the new);
    /// the old root stays in the bundle so that peers holding only it keep working.
    pub fn renew_self_signed(
        &self,
        trust_domain: &str,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<SigningMaterial, CaError> {
        if self.kind != MaterialKind::SelfSigned {
            return Err(CaError::material(
                "ca-cert.pem",
                "only a self-signed root is renewed by the CA; a plug-in CA is rotated by replacing its files",
            ));
        }
        let key_pem = self.issuer.key().serialize_pem();
        let key = key_pair_from_pem(&key_pem).map_err(CaError::CertGen)?;
        let old_roots = self.root_ders.clone();
        Self::self_signed_with_key(trust_domain, key, ttl, now, old_roots)
    }

    fn self_signed_with_key(
        trust_domain: &str,
        key: KeyPair,
        ttl: Duration,
        now: SystemTime,
        old_roots: Vec<Vec<u8>>,
    ) -> Result<SigningMaterial, CaError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::OrganizationName, trust_domain);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(super::issue::random_serial()?);
        params.not_before = to_offset(now - super::issue::CLOCK_SKEW_GRACE);
        params.not_after = to_offset(now + ttl);
        let cert = params
            .self_signed(&key)
            .map_err(|e| CaError::CertGen(e.to_string()))?;
        let der = cert.der().to_vec();
        let mut roots = vec![der.clone()];
        roots.extend(old_roots.into_iter().filter(|r| *r != der));
        Self::assemble(
            MaterialKind::SelfSigned,
            der,
            key,
            Vec::new(),
            roots,
            "self-signed root",
        )
    }

    /// Adds roots to the bundle agents are given (a root change: the new root is
    /// trusted before the issuer switches to it, the old one until every certificate
    /// under it has expired). Certificates already present are not repeated.
    pub fn with_extra_roots(mut self, roots_pem: &str) -> Result<SigningMaterial, CaError> {
        let extra = certs_from_pem(roots_pem).map_err(|r| CaError::material("extra roots", r))?;
        for der in extra {
            if !self.root_ders.contains(&der) {
                self.root_ders.push(der);
            }
        }
        self.root_bundle_pem = self.root_ders.iter().map(|d| cert_to_pem(d)).collect();
        Ok(self)
    }

    fn assemble(
        kind: MaterialKind,
        issuer_der: Vec<u8>,
        key: KeyPair,
        chain: Vec<Vec<u8>>,
        roots: Vec<Vec<u8>>,
        file: &str,
    ) -> Result<SigningMaterial, CaError> {
        let cert = parse(&issuer_der).map_err(|r| CaError::material(file, r))?;
        let not_before = to_system_time(cert.validity().not_before.timestamp());
        let not_after = to_system_time(cert.validity().not_after.timestamp());
        drop(cert);
        let issuer = Issuer::from_ca_cert_der(&issuer_der.as_slice().into(), key).map_err(|e| {
            CaError::material(file, format!("cannot sign as this certificate ({e})"))
        })?;
        Ok(SigningMaterial {
            kind,
            issuer,
            issuer_der,
            not_before,
            not_after,
            chain_pem: chain.iter().map(|d| cert_to_pem(d)).collect(),
            root_bundle_pem: roots.iter().map(|d| cert_to_pem(d)).collect(),
            root_ders: roots,
        })
    }

    pub fn kind(&self) -> MaterialKind {
        self.kind
    }

    /// The roots agents trust, concatenated PEM (`root-cert.pem`, the
    /// `istio-ca-root-cert` ConfigMap's `root-cert.pem`, the last element of a response).
    pub fn root_bundle_pem(&self) -> &str {
        &self.root_bundle_pem
    }

    /// The roots, DER, for a TLS verifier.
    pub fn root_ders(&self) -> &[Vec<u8>] {
        &self.root_ders
    }

    /// The issuing certificate, DER.
    pub fn issuer_der(&self) -> &[u8] {
        &self.issuer_der
    }

    /// The issuing certificate's validity.
    pub fn issuer_validity(&self) -> (SystemTime, SystemTime) {
        (self.not_before, self.not_after)
    }

    /// `(ca-cert.pem, ca-key.pem)` of a self-signed root, to persist it as istiod does in
    /// `istio-ca-secret`; `None` for a plug-in CA, whose key is never written by Shoal.
    /// The key is PKCS#8 PEM: the caller writes it where only the CA can read it.
    pub fn istio_ca_secret_pem(&self) -> Option<(String, String)> {
        (self.kind == MaterialKind::SelfSigned).then(|| {
            (
                cert_to_pem(&self.issuer_der),
                self.issuer.key().serialize_pem(),
            )
        })
    }
}

fn first_cert(file: &str, pem: &str) -> Result<Vec<u8>, CaError> {
    let mut certs = certs_from_pem(pem).map_err(|r| CaError::material(file, r))?;
    Ok(certs.swap_remove(0))
}

/// The key is the certificate's, the certificate is a CA allowed to sign certificates,
/// and it is valid at `now`.
fn check_issuer(
    der: &[u8],
    key: &KeyPair,
    cert_file: &str,
    key_file: &str,
    now: SystemTime,
) -> Result<(), CaError> {
    let cert = parse(der).map_err(|r| CaError::material(cert_file, r))?;
    if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
        return Err(CaError::material(
            key_file,
            format!("the key does not match the certificate of {cert_file}"),
        ));
    }
    let is_ca = cert
        .basic_constraints()
        .ok()
        .flatten()
        .is_some_and(|bc| bc.value.ca);
    if !is_ca {
        return Err(CaError::material(
            cert_file,
            "the certificate is not a CA (basicConstraints CA:TRUE missing)",
        ));
    }
    if let Ok(Some(ku)) = cert.key_usage()
        && !ku.value.key_cert_sign()
    {
        return Err(CaError::material(
            cert_file,
            "the certificate's key usage does not allow signing certificates (keyCertSign)",
        ));
    }
    let not_after = cert.validity().not_after.timestamp();
    if not_after <= unix_secs(now) {
        return Err(CaError::material(
            cert_file,
            format!("the certificate expired at {} (unix seconds)", not_after),
        ));
    }
    Ok(())
}

/// Walks from `ca` through `chain` to one of `roots`, checking names and signatures.
fn verify_chain(ca: &[u8], chain: &[Vec<u8>], roots: &[Vec<u8>]) -> Result<(), CaError> {
    let roots_x = parse_all(roots, ROOT_CERT_FILE)?;
    let chain_x = parse_all(chain, CERT_CHAIN_FILE)?;
    if roots.iter().any(|r| r.as_slice() == ca) {
        return Ok(());
    }
    let mut current = parse(ca).map_err(|r| CaError::material(CA_CERT_FILE, r))?;
    let mut current_der = ca;
    for _ in 0..MAX_CHAIN_DEPTH {
        let signed_by = |issuer: &X509Certificate<'_>| {
            issuer.subject().as_raw() == current.issuer().as_raw()
                && current.verify_signature(Some(issuer.public_key())).is_ok()
        };
        if roots_x.iter().any(signed_by) {
            return Ok(());
        }
        let next = chain
            .iter()
            .zip(&chain_x)
            .find(|(der, c)| der.as_slice() != current_der && signed_by(c));
        match next {
            Some((der, _)) => {
                current_der = der;
                current = parse(der).map_err(|r| CaError::material(CERT_CHAIN_FILE, r))?;
            }
            None => {
                return Err(CaError::material(
                    ROOT_CERT_FILE,
                    format!(
                        "no root here signed the chain: the certificate for {} is issued by {}, which is neither in {CERT_CHAIN_FILE} nor in {ROOT_CERT_FILE} (or its signature does not verify)",
                        current.subject(),
                        current.issuer()
                    ),
                ));
            }
        }
    }
    Err(CaError::material(
        CERT_CHAIN_FILE,
        format!("the chain is longer than {MAX_CHAIN_DEPTH} certificates"),
    ))
}

fn parse_all<'a>(ders: &'a [Vec<u8>], file: &str) -> Result<Vec<X509Certificate<'a>>, CaError> {
    ders.iter()
        .map(|d| parse(d).map_err(|r| CaError::material(file, r)))
        .collect()
}
