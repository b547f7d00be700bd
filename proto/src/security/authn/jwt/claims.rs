//! The claims Shoal reads from a verified token, and how they name a service account:
//! the `kubernetes.io` claim of a projected token, or `sub:
//! system:serviceaccount:<namespace>:<name>`.

use super::error::JwtError;
use serde::Deserialize;

const SUBJECT_PREFIX: &str = "system:serviceaccount:";

/// The registered claims and the Kubernetes ones; others are ignored.
#[derive(Debug, Default, Deserialize)]
pub struct Claims {
    #[serde(default)]
    pub iss: Option<String>,
    #[serde(default)]
    pub sub: Option<String>,
    #[serde(default)]
    pub aud: Audiences,
    #[serde(default, deserialize_with = "numeric_date")]
    pub exp: Option<i64>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub nbf: Option<i64>,
    #[serde(default, deserialize_with = "numeric_date")]
    pub iat: Option<i64>,
    #[serde(default, rename = "kubernetes.io")]
    pub kubernetes: Option<KubernetesClaims>,
}

/// `aud`: one string or an array of them (RFC 7519 §4.1.3).
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "OneOrMany")]
pub struct Audiences(pub Vec<String>);

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl From<OneOrMany> for Audiences {
    fn from(v: OneOrMany) -> Self {
        match v {
            OneOrMany::One(s) => Audiences(vec![s]),
            OneOrMany::Many(v) => Audiences(v),
        }
    }
}

/// The `kubernetes.io` claim of a projected service-account token.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct KubernetesClaims {
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub serviceaccount: Option<NamedObject>,
    #[serde(default)]
    pub pod: Option<NamedObject>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct NamedObject {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub uid: Option<String>,
}

/// NumericDate: seconds, which some issuers write with a fraction.
fn numeric_date<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let v: Option<f64> = Option::deserialize(d)?;
    Ok(v.map(|s| s as i64))
}

/// `(namespace, service account)` of `system:serviceaccount:<ns>:<sa>`.
pub fn parse_subject(sub: &str) -> Option<(&str, &str)> {
    let (ns, sa) = sub.strip_prefix(SUBJECT_PREFIX)?.split_once(':')?;
    (!ns.is_empty() && !sa.is_empty() && !sa.contains(':')).then_some((ns, sa))
}

impl Claims {
    /// The service account the token names; where it names it twice (the projected
    /// token's `kubernetes.io` and its `sub`), both must agree.
    pub fn service_account(&self) -> Result<(String, String), JwtError> {
        let from_sub = self.sub.as_deref().map(|sub| {
            parse_subject(sub).ok_or_else(|| {
                JwtError::NotServiceAccount(format!(
                    "its sub {sub:?} is not system:serviceaccount:<namespace>:<name>"
                ))
            })
        });
        let from_k8s = self.kubernetes.as_ref().map(|k| {
            let ns = k.namespace.as_deref().filter(|s| !s.is_empty());
            let sa = k.serviceaccount.as_ref().and_then(|s| s.name.as_deref());
            match (ns, sa.filter(|s| !s.is_empty())) {
                (Some(ns), Some(sa)) => Ok((ns, sa)),
                _ => Err(JwtError::NotServiceAccount(
                    "its kubernetes.io claim lacks namespace or serviceaccount.name".into(),
                )),
            }
        });
        match (from_k8s, from_sub) {
            (Some(k8s), Some(sub)) => {
                let (k8s, sub) = (k8s?, sub?);
                if k8s != sub {
                    return Err(JwtError::NotServiceAccount(format!(
                        "its kubernetes.io claim names {}/{} but its sub names {}/{}",
                        k8s.0, k8s.1, sub.0, sub.1
                    )));
                }
                Ok((k8s.0.to_string(), k8s.1.to_string()))
            }
            (Some(one), None) | (None, Some(one)) => {
                let (ns, sa) = one?;
                Ok((ns.to_string(), sa.to_string()))
            }
            (None, None) => Err(JwtError::NotServiceAccount(
                "it has neither a kubernetes.io claim nor a sub".into(),
            )),
        }
    }
}
