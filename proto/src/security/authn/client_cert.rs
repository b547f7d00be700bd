//! [`ClientCertificate`]: the identity of a client certificate's SPIFFE URI SAN.
//!
//! The chain has already been verified against the mesh root by the TLS layer (the 15012
//! server's rustls client-certificate verifier), so this reads the leaf only, as istiod's
//! client-certificate authenticator does: its URI SAN, which must be a workload SPIFFE ID
//! of the mesh's trust domain or one of its aliases.

use super::{Authenticator, AuthnError, Credentials};
use crate::security::identity::{AuthMethod, Identity};
use crate::security::spiffe::SpiffeId;
use async_trait::async_trait;
use x509_parser::extensions::GeneralName;

const NAME: &str = "client-certificate";

/// Authenticates by the verified leaf certificate's SPIFFE ID.
#[derive(Clone, Debug)]
pub struct ClientCertificate {
    trust_domain: String,
    aliases: Vec<String>,
}

impl ClientCertificate {
    /// Accepts the mesh's trust domain and its aliases (`meshConfig.trustDomainAliases`).
    pub fn new(trust_domain: impl Into<String>, aliases: Vec<String>) -> Self {
        ClientCertificate {
            trust_domain: trust_domain.into(),
            aliases,
        }
    }

    /// The SPIFFE ID of a DER leaf certificate, or why it has none acceptable.
    pub fn identify(&self, leaf: &[u8]) -> Result<SpiffeId, String> {
        let (_, cert) = x509_parser::parse_x509_certificate(leaf)
            .map_err(|e| format!("the leaf certificate does not parse: {e}"))?;
        let subject = cert.subject().to_string();
        let san = cert
            .subject_alternative_name()
            .map_err(|e| format!("certificate {subject:?}: its SAN extension is invalid: {e}"))?
            .ok_or_else(|| format!("certificate {subject:?} has no subjectAltName"))?;
        let uris: Vec<&str> = san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::URI(uri) => Some(*uri),
                _ => None,
            })
            .collect();
        let mut reasons = Vec::new();
        for uri in &uris {
            match SpiffeId::parse(uri) {
                Ok(id) if self.accepts(&id.trust_domain) => return Ok(id),
                Ok(id) => reasons.push(format!(
                    "{uri:?} is of trust domain {:?}, not {:?}{}",
                    id.trust_domain,
                    self.trust_domain,
                    if self.aliases.is_empty() {
                        String::new()
                    } else {
                        format!(" or its aliases {:?}", self.aliases)
                    }
                )),
                Err(e) => reasons.push(e.to_string()),
            }
        }
        if uris.is_empty() {
            return Err(format!(
                "certificate {subject:?} has no URI SAN (SPIFFE ID)"
            ));
        }
        Err(reasons.join("; "))
    }

    fn accepts(&self, trust_domain: &str) -> bool {
        trust_domain == self.trust_domain || self.aliases.iter().any(|a| a == trust_domain)
    }
}

#[async_trait]
impl Authenticator for ClientCertificate {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn authenticate(&self, credentials: &Credentials) -> Result<Identity, AuthnError> {
        let leaf = credentials
            .peer_certificates
            .first()
            .ok_or(AuthnError::Missing("no client certificate"))?;
        let id = self.identify(leaf).map_err(|reason| AuthnError::Rejected {
            authenticator: NAME,
            reason,
        })?;
        Ok(Identity::authenticated(
            id.into_principal(AuthMethod::ClientCertificate),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::identity::Principal;
    use bytes::Bytes;
    use futures::FutureExt;
    use rcgen::{CertificateParams, KeyPair, SanType};

    fn cert(sans: &[SanType]) -> Bytes {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = sans.to_vec();
        let key = KeyPair::generate().unwrap();
        Bytes::from(params.self_signed(&key).unwrap().der().to_vec())
    }

    fn uri(s: &str) -> SanType {
        SanType::URI(s.try_into().unwrap())
    }

    fn authn(certs: Vec<Bytes>) -> Result<Identity, AuthnError> {
        let creds = Credentials {
            bearer_token: None,
            peer_certificates: certs,
        };
        ClientCertificate::new("cluster.local", vec!["old.local".into()])
            .authenticate(&creds)
            .now_or_never()
            .unwrap()
    }

    fn rejected(r: Result<Identity, AuthnError>) -> String {
        match r {
            Err(AuthnError::Rejected {
                authenticator,
                reason,
            }) => {
                assert_eq!(authenticator, NAME);
                reason
            }
            other => panic!("not rejected: {other:?}"),
        }
    }

    #[test]
    fn the_leafs_spiffe_id_is_the_principal() {
        let leaf = cert(&[
            SanType::DnsName("web.shop.svc".try_into().unwrap()),
            uri("spiffe://cluster.local/ns/shop/sa/web"),
        ]);
        let id = authn(vec![leaf, Bytes::from_static(b"intermediate, unread")]).unwrap();
        assert_eq!(
            id.principal(),
            Some(&Principal {
                trust_domain: "cluster.local".into(),
                namespace: "shop".into(),
                service_account: "web".into(),
                method: AuthMethod::ClientCertificate,
            })
        );
        // An alias of the trust domain is accepted and kept as the certificate says.
        let id = authn(vec![cert(&[uri("spiffe://old.local/ns/a/sa/b")])]).unwrap();
        assert_eq!(id.principal().unwrap().trust_domain, "old.local");
    }

    #[test]
    fn another_trust_domain_a_non_workload_uri_or_no_uri_is_refused() {
        let r = rejected(authn(vec![cert(&[uri(
            "spiffe://evil.example/ns/shop/sa/web",
        )])]));
        assert!(
            r.contains("evil.example") && r.contains("cluster.local"),
            "{r}"
        );
        let r = rejected(authn(vec![cert(&[uri("spiffe://cluster.local/workload")])]));
        assert!(r.contains("/ns/<namespace>/sa/"), "{r}");
        let r = rejected(authn(vec![cert(&[SanType::DnsName(
            "x.example".try_into().unwrap(),
        )])]));
        assert!(r.contains("no URI SAN"), "{r}");
        let r = rejected(authn(vec![cert(&[])]));
        assert!(r.contains("no subjectAltName"), "{r}");
        let r = rejected(authn(vec![Bytes::from_static(b"not DER")]));
        assert!(r.contains("does not parse"), "{r}");
    }

    #[test]
    fn no_certificate_is_missing_credentials() {
        assert_eq!(
            authn(vec![]),
            Err(AuthnError::Missing("no client certificate"))
        );
    }
}
