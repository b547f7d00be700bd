//! [`TestIssuer`]: a stand-in for a cluster's service-account token issuer (the
//! kube-apiserver's, or any OIDC issuer): ES256 keys made at start (never committed),
//! tokens shaped like Kubernetes projected service-account tokens, and, when served, the
//! OIDC discovery document and JWKS on a loopback HTTP server, as kube-apiserver serves
//! them (`/.well-known/openid-configuration`, `/openid/v1/jwks`).

use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use shoal_proto::security::authn::jwt::JwkSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The audience pilot-agent requests its token for.
pub const ISTIO_CA: &str = "istio-ca";
/// The API server's own audience: what a token for another purpose carries.
pub const KUBERNETES_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// Where kube-apiserver serves its JWKS.
pub const JWKS_PATH: &str = "/openid/v1/jwks";
pub const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";

struct SigningKey {
    kid: String,
    pair: EcdsaKeyPair,
    jwk: Value,
}

#[derive(Default)]
struct Shared {
    /// Published keys; the last one signs.
    keys: Mutex<Vec<SigningKey>>,
    jwks_fetches: AtomicUsize,
    discovery_fetches: AtomicUsize,
    issuer: String,
}

/// A token issuer for tests. Dropping a served one stops its server.
pub struct TestIssuer {
    shared: Arc<Shared>,
    address: Option<SocketAddr>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl TestIssuer {
    /// An issuer named `issuer`, not served (its keys are given to whoever verifies).
    pub fn new(issuer: impl Into<String>) -> Self {
        let shared = Shared {
            issuer: issuer.into(),
            ..Default::default()
        };
        let issuer = TestIssuer {
            shared: Arc::new(shared),
            address: None,
            server: None,
        };
        issuer.rotate();
        issuer
    }

    /// An issuer served on `127.0.0.1`; its name is its URL, as OIDC discovery requires.
    pub async fn serve() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        let mut issuer = TestIssuer::new(format!("http://{address}"));
        let app = Router::new()
            .route(DISCOVERY_PATH, get(discovery))
            .route(JWKS_PATH, get(jwks))
            .with_state(issuer.shared.clone());
        issuer.server = Some(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
        issuer.address = Some(address);
        Ok(issuer)
    }

    /// The `iss` of its tokens.
    pub fn issuer(&self) -> &str {
        &self.shared.issuer
    }

    /// The JWKS URL (when served).
    pub fn jwks_uri(&self) -> String {
        format!("{}{JWKS_PATH}", self.shared.issuer)
    }

    /// A new P-256 key as a PKCS#8 PEM `PRIVATE KEY`, for [`TestIssuer::from_pkcs8_pem`]
    /// (a tool that keeps its issuer's key in a file, as the loadtest does).
    pub fn generate_pkcs8_pem() -> String {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("generate a P-256 key");
        let body = STANDARD.encode(pkcs8.as_ref());
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).expect("base64 is ASCII"))
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    /// An issuer named `issuer` signing with the P-256 key of `pem` (PKCS#8, as
    /// [`TestIssuer::generate_pkcs8_pem`] writes), not served. Its `kid` is `test-key-1`
    /// whatever the process, so tokens minted in one match a JWKS written by another.
    pub fn from_pkcs8_pem(issuer: impl Into<String>, pem: &str) -> std::io::Result<Self> {
        let invalid = |why: String| std::io::Error::new(std::io::ErrorKind::InvalidData, why);
        let body: String = pem
            .lines()
            .map(str::trim)
            .skip_while(|l| *l != "-----BEGIN PRIVATE KEY-----")
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        if body.is_empty() {
            return Err(invalid("no PEM PRIVATE KEY block (PKCS#8) found".into()));
        }
        let der = STANDARD
            .decode(body)
            .map_err(|e| invalid(format!("the PRIVATE KEY block is not base64: {e}")))?;
        let shared = Shared {
            issuer: issuer.into(),
            ..Default::default()
        };
        let issuer = TestIssuer {
            shared: Arc::new(shared),
            address: None,
            server: None,
        };
        issuer
            .add_key(&der)
            .map_err(|_| invalid("the PRIVATE KEY is not a PKCS#8 P-256 key".into()))?;
        Ok(issuer)
    }

    /// Adds a new signing key (the old ones stay published) and returns its `kid`.
    pub fn rotate(&self) -> String {
        let rng = SystemRandom::new();
        let alg = &ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("generate a P-256 key");
        self.add_key(pkcs8.as_ref()).expect("read it back")
    }

    /// Adds the PKCS#8 P-256 key `pkcs8` as the signing key; returns its `kid`.
    fn add_key(&self, pkcs8: &[u8]) -> Result<String, ring::error::KeyRejected> {
        let rng = SystemRandom::new();
        let alg = &ECDSA_P256_SHA256_FIXED_SIGNING;
        let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8, &rng)?;
        let mut keys = self.keys();
        let kid = format!("test-key-{}", keys.len() + 1);
        let point = pair.public_key().as_ref();
        let jwk = json!({"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
            "x": b64(&point[1..33]), "y": b64(&point[33..65])});
        keys.push(SigningKey {
            kid: kid.clone(),
            pair,
            jwk,
        });
        Ok(kid)
    }

    /// Stops publishing every key but the current one.
    pub fn retire_old_keys(&self) {
        let mut keys = self.keys();
        let last = keys.len() - 1;
        keys.drain(..last);
    }

    /// The JWKS document.
    pub fn jwks_json(&self) -> String {
        let keys: Vec<Value> = self.keys().iter().map(|k| k.jwk.clone()).collect();
        json!({ "keys": keys }).to_string()
    }

    pub fn jwk_set(&self) -> JwkSet {
        JwkSet::from_json(self.jwks_json().as_bytes()).expect("the issuer's own JWKS")
    }

    /// Writes the JWKS document to `path` (as `kubectl get --raw /openid/v1/jwks > path`).
    pub fn write_jwks(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.jwks_json())
    }

    /// How many times its JWKS and its discovery document were fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.shared.jwks_fetches.load(Ordering::Relaxed)
    }

    pub fn discovery_fetches(&self) -> usize {
        self.shared.discovery_fetches.load(Ordering::Relaxed)
    }

    /// The claims of a projected service-account token for `namespace/service_account`,
    /// valid from now for `ttl`.
    pub fn claims(
        &self,
        namespace: &str,
        service_account: &str,
        audiences: &[&str],
        ttl: Duration,
    ) -> Value {
        let now = unix_now();
        json!({
            "iss": self.issuer(),
            "aud": audiences,
            "sub": format!("system:serviceaccount:{namespace}:{service_account}"),
            "iat": now,
            "nbf": now,
            "exp": now + ttl.as_secs() as i64,
            "kubernetes.io": {
                "namespace": namespace,
                "serviceaccount": {"name": service_account, "uid": format!("uid-{namespace}-{service_account}")},
                "pod": {"name": format!("{service_account}-0"), "uid": format!("pod-uid-{namespace}-{service_account}")},
            },
        })
    }

    /// A token for `namespace/service_account` with `audiences`, valid for `ttl`.
    pub fn token(
        &self,
        namespace: &str,
        service_account: &str,
        audiences: &[&str],
        ttl: Duration,
    ) -> String {
        self.sign(&self.claims(namespace, service_account, audiences, ttl))
    }

    /// A token as pilot-agent's: audience `istio-ca`, one hour.
    pub fn istio_token(&self, namespace: &str, service_account: &str) -> String {
        self.token(
            namespace,
            service_account,
            &[ISTIO_CA],
            Duration::from_secs(3600),
        )
    }

    /// An `istio-ca` token that expired ten minutes ago (past any clock skew).
    pub fn expired_token(&self, namespace: &str, service_account: &str) -> String {
        let mut claims = self.claims(namespace, service_account, &[ISTIO_CA], Duration::ZERO);
        let now = unix_now();
        claims["iat"] = json!(now - 4200);
        claims["nbf"] = json!(now - 4200);
        claims["exp"] = json!(now - 600);
        self.sign(&claims)
    }

    /// A valid token for the API server's audience, not `istio-ca`.
    pub fn wrong_audience_token(&self, namespace: &str, service_account: &str) -> String {
        self.token(
            namespace,
            service_account,
            &[KUBERNETES_AUDIENCE],
            Duration::from_secs(3600),
        )
    }

    /// Signs any claims with the current key (kid in the header).
    pub fn sign(&self, claims: &Value) -> String {
        let keys = self.keys();
        let key = keys.last().expect("an issuer always has a key");
        let header = json!({"alg": "ES256", "kid": key.kid, "typ": "JWT"});
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let sig = key
            .pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .expect("sign");
        format!("{input}.{}", b64(sig.as_ref()))
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, Vec<SigningKey>> {
        self.shared
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
        }
    }
}

async fn discovery(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    shared.discovery_fetches.fetch_add(1, Ordering::Relaxed);
    axum::Json(json!({
        "issuer": shared.issuer,
        "jwks_uri": format!("{}{JWKS_PATH}", shared.issuer),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    }))
}

async fn jwks(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    shared.jwks_fetches.fetch_add(1, Ordering::Relaxed);
    let keys: Vec<Value> = shared
        .keys
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|k| k.jwk.clone())
        .collect();
    (
        [(axum::http::header::CONTENT_TYPE, "application/jwk-set+json")],
        json!({ "keys": keys }).to_string(),
    )
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_proto::security::authn::jwt::{JwtConfig, JwtError, JwtVerifier};

    #[tokio::test]
    async fn its_tokens_verify_against_its_served_keys_and_its_bad_ones_do_not() {
        let issuer = TestIssuer::serve().await.unwrap();
        let v = JwtVerifier::new(JwtConfig::new(issuer.issuer(), "cluster.local"));
        let now = unix_now();
        let p = v
            .verify(&issuer.istio_token("shop", "web"), &issuer.jwk_set(), now)
            .unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.service_account.as_str()),
            ("shop", "web")
        );
        let e = v.verify(&issuer.expired_token("shop", "web"), &issuer.jwk_set(), now);
        assert!(matches!(e, Err(JwtError::Expired { .. })), "{e:?}");
        let e = v.verify(
            &issuer.wrong_audience_token("shop", "web"),
            &issuer.jwk_set(),
            now,
        );
        assert!(matches!(e, Err(JwtError::WrongAudience { .. })), "{e:?}");
        let old = issuer.istio_token("shop", "web");
        let kid = issuer.rotate();
        assert_eq!(kid, "test-key-2");
        issuer.retire_old_keys();
        let e = v.verify(&old, &issuer.jwk_set(), now);
        assert_eq!(e, Err(JwtError::UnknownKeyId("test-key-1".into())));
        assert_eq!(issuer.jwks_fetches(), 0);
    }

    #[test]
    fn an_issuer_from_a_key_file_signs_what_another_from_the_same_file_publishes() {
        let pem = TestIssuer::generate_pkcs8_pem();
        let minting = TestIssuer::from_pkcs8_pem("https://iss", &pem).unwrap();
        let publishing = TestIssuer::from_pkcs8_pem("https://iss", &pem).unwrap();
        let v = JwtVerifier::new(JwtConfig::new("https://iss", "cluster.local"));
        let token = minting.istio_token("ns-1", "default");
        let p = v.verify(&token, &publishing.jwk_set(), unix_now()).unwrap();
        assert_eq!(p.namespace, "ns-1");
        let other = TestIssuer::from_pkcs8_pem("https://iss", &TestIssuer::generate_pkcs8_pem());
        let e = v.verify(&token, &other.unwrap().jwk_set(), unix_now());
        assert!(e.is_err(), "another key does not verify it");
        let bad = TestIssuer::from_pkcs8_pem("https://iss", "no key here");
        assert!(bad.is_err());
    }
}
