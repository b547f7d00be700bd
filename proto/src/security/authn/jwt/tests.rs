//! Every refusal reason, both algorithms, and that no message or `Debug` shows the token.
//! Keys are made at test time: ES256 by ring, RS256 by the `openssl` CLI (no committed key).

use super::*;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use serde_json::{Value, json};

const NOW: i64 = 1_800_000_000;
const ISS: &str = "https://kubernetes.default.svc.cluster.local";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

enum Signer {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

struct Key {
    kid: String,
    signer: Signer,
    jwk: Value,
}

fn ec_key(kid: &str) -> Key {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    let point = pair.public_key().as_ref();
    let jwk = json!({"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": kid,
        "x": b64(&point[1..33]), "y": b64(&point[33..65])});
    Key {
        kid: kid.into(),
        signer: Signer::Ec(pair),
        jwk,
    }
}

/// A 2048-bit RSA key from the `openssl` CLI, as a cluster's service-account key would be.
fn rsa_key(kid: &str) -> Key {
    let dir = std::env::temp_dir().join(format!("shoal-jwt-rsa-{}-{kid}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let der = dir.join("key.der");
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .output()
            .expect("the openssl CLI makes the RS256 test key");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
        out.stdout
    };
    let der_s = der.to_str().unwrap();
    run(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-outform",
        "DER",
        "-out",
        der_s,
    ]);
    let modulus = run(&["rsa", "-inform", "DER", "-in", der_s, "-noout", "-modulus"]);
    let hex = String::from_utf8(modulus).unwrap();
    let hex = hex.trim().strip_prefix("Modulus=").unwrap();
    let n: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    // ring reads the PKCS#1 RSAPrivateKey form.
    let pkcs1 = run(&[
        "rsa",
        "-inform",
        "DER",
        "-in",
        der_s,
        "-traditional",
        "-outform",
        "DER",
    ]);
    let pair = RsaKeyPair::from_der(&pkcs1).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let jwk = json!({"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
        "n": b64(&n), "e": b64(&[1, 0, 1])});
    Key {
        kid: kid.into(),
        signer: Signer::Rsa(pair),
        jwk,
    }
}

impl Key {
    fn alg(&self) -> &'static str {
        match self.signer {
            Signer::Ec(_) => "ES256",
            Signer::Rsa(_) => "RS256",
        }
    }

    fn sign_with_header(&self, header: Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let rng = SystemRandom::new();
        let sig = match &self.signer {
            Signer::Ec(pair) => pair.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(),
            Signer::Rsa(pair) => {
                let mut sig = vec![0; pair.public().modulus_len()];
                pair.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &rng,
                    input.as_bytes(),
                    &mut sig,
                )
                .unwrap();
                sig
            }
        };
        format!("{input}.{}", b64(&sig))
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_with_header(
            json!({"alg": self.alg(), "kid": self.kid, "typ": "JWT"}),
            claims,
        )
    }
}

fn set(keys: &[&Key]) -> JwkSet {
    let doc = json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
    JwkSet::from_json(doc.to_string().as_bytes()).unwrap()
}

/// A projected service-account token's claims, as the kubelet asks for pilot-agent.
fn claims() -> Value {
    json!({
        "iss": ISS, "aud": ["istio-ca"], "sub": "system:serviceaccount:shop:web",
        "iat": NOW - 60, "nbf": NOW - 60, "exp": NOW + 3600,
        "kubernetes.io": {"namespace": "shop", "serviceaccount": {"name": "web", "uid": "u1"},
            "pod": {"name": "web-0", "uid": "p1"}}
    })
}

fn verifier() -> JwtVerifier {
    JwtVerifier::new(JwtConfig::new(ISS, "cluster.local"))
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    if value.is_null() {
        claims.as_object_mut().unwrap().remove(key);
    } else {
        claims[key] = value;
    }
    claims
}

#[test]
fn an_es256_projected_token_names_its_service_account() {
    let key = ec_key("k1");
    let p = verifier()
        .verify(&key.sign(&claims()), &set(&[&key]), NOW)
        .unwrap();
    assert_eq!(
        p,
        Principal {
            trust_domain: "cluster.local".into(),
            namespace: "shop".into(),
            service_account: "web".into(),
            method: AuthMethod::Jwt,
        }
    );
}

#[test]
fn an_rs256_token_verifies_with_its_modulus_and_exponent() {
    let rsa = rsa_key("r1");
    let ec = ec_key("e1");
    let keys = set(&[&ec, &rsa]);
    let p = verifier().verify(&rsa.sign(&claims()), &keys, NOW).unwrap();
    assert_eq!(
        (p.namespace.as_str(), p.service_account.as_str()),
        ("shop", "web")
    );
    // Another key's signature on the same claims does not pass for this kid.
    let r2 = rsa_key("r2");
    let forged = r2.sign_with_header(json!({"alg": "RS256", "kid": "r1"}), &claims());
    assert_eq!(
        verifier().verify(&forged, &keys, NOW),
        Err(JwtError::BadSignature)
    );
    let unknown = r2.sign(&claims());
    assert_eq!(
        verifier().verify(&unknown, &keys, NOW),
        Err(JwtError::UnknownKeyId("r2".into()))
    );
}

#[test]
fn a_token_without_kid_tries_each_key_of_its_algorithm() {
    let (a, b) = (ec_key("a"), ec_key("b"));
    let keys = set(&[&a, &b]);
    let token = b.sign_with_header(json!({"alg": "ES256"}), &claims());
    assert!(verifier().verify(&token, &keys, NOW).is_ok());
    let stranger = ec_key("c").sign_with_header(json!({"alg": "ES256"}), &claims());
    assert_eq!(
        verifier().verify(&stranger, &keys, NOW),
        Err(JwtError::BadSignature)
    );
    let rs = rsa_key("r").sign_with_header(json!({"alg": "RS256"}), &claims());
    assert_eq!(
        verifier().verify(&rs, &keys, NOW),
        Err(JwtError::NoKeyForAlgorithm("RS256"))
    );
}

#[test]
fn a_tampered_payload_or_signature_is_a_bad_signature() {
    let key = ec_key("k1");
    let keys = set(&[&key]);
    let token = key.sign(&claims());
    let (head, rest) = token.split_once('.').unwrap();
    let (_, sig) = rest.split_once('.').unwrap();
    let other = b64(with(
        claims(),
        "sub",
        json!("system:serviceaccount:kube-system:admin"),
    )
    .to_string()
    .as_bytes());
    let tampered = format!("{head}.{other}.{sig}");
    assert_eq!(
        verifier().verify(&tampered, &keys, NOW),
        Err(JwtError::BadSignature)
    );
    // The right kid with another algorithm's header is refused too.
    let confused = key.sign_with_header(json!({"alg": "RS256", "kid": "k1"}), &claims());
    assert_eq!(
        verifier().verify(&confused, &keys, NOW),
        Err(JwtError::BadSignature)
    );
}

#[test]
fn each_claim_refusal_has_its_own_reason() {
    let key = ec_key("k1");
    let keys = set(&[&key]);
    let v = verifier();
    let check = |claims: Value| v.verify(&key.sign(&claims), &keys, NOW).unwrap_err();

    let e = check(with(claims(), "exp", json!(NOW - 31)));
    assert!(matches!(e, JwtError::Expired { .. }), "{e}");
    assert!(e.to_string().contains("expired"), "{e}");
    // Within the skew, still valid.
    assert!(
        v.verify(
            &key.sign(&with(claims(), "exp", json!(NOW - 29))),
            &keys,
            NOW
        )
        .is_ok()
    );

    let e = check(with(claims(), "nbf", json!(NOW + 31)));
    assert!(matches!(e, JwtError::NotYetValid { .. }), "{e}");
    assert!(e.to_string().contains("not valid before"), "{e}");

    assert_eq!(
        check(with(claims(), "exp", Value::Null)),
        JwtError::MissingClaim("exp")
    );
    assert_eq!(
        check(with(claims(), "iss", Value::Null)),
        JwtError::MissingClaim("iss")
    );

    let e = check(with(
        claims(),
        "aud",
        json!("https://kubernetes.default.svc"),
    ));
    assert!(matches!(e, JwtError::WrongAudience { .. }), "{e}");
    assert!(
        e.to_string().contains("\"istio-ca\""),
        "names the wanted audience: {e}"
    );

    let e = check(with(claims(), "iss", json!("https://evil.example")));
    assert!(matches!(e, JwtError::UnknownIssuer { .. }), "{e}");
    assert!(e.to_string().contains("https://evil.example"), "{e}");

    let e = check(with(
        with(claims(), "kubernetes.io", Value::Null),
        "sub",
        json!("alice@example.com"),
    ));
    assert!(matches!(e, JwtError::NotServiceAccount(_)), "{e}");
    let e = check(with(
        with(claims(), "kubernetes.io", Value::Null),
        "sub",
        Value::Null,
    ));
    assert!(matches!(e, JwtError::NotServiceAccount(_)), "{e}");
    let e = check(with(
        claims(),
        "sub",
        json!("system:serviceaccount:other:web"),
    ));
    assert!(
        e.to_string().contains("shop/web") && e.to_string().contains("other/web"),
        "{e}"
    );

    let kid = key.sign_with_header(json!({"alg": "ES256", "kid": "gone"}), &claims());
    assert_eq!(
        v.verify(&kid, &keys, NOW),
        Err(JwtError::UnknownKeyId("gone".into()))
    );
}

#[test]
fn sub_alone_or_kubernetes_claim_alone_names_the_account() {
    let key = ec_key("k1");
    let keys = set(&[&key]);
    let v = verifier();
    let only_sub = with(claims(), "kubernetes.io", Value::Null);
    assert_eq!(
        v.verify(&key.sign(&only_sub), &keys, NOW)
            .unwrap()
            .service_account,
        "web"
    );
    let only_k8s = with(claims(), "sub", Value::Null);
    assert_eq!(
        v.verify(&key.sign(&only_k8s), &keys, NOW)
            .unwrap()
            .namespace,
        "shop"
    );
    // A single-string aud is an audience list of one.
    let one_aud = with(claims(), "aud", json!("istio-ca"));
    assert!(v.verify(&key.sign(&one_aud), &keys, NOW).is_ok());
    assert_eq!(
        parse_subject("system:serviceaccount:ns:sa"),
        Some(("ns", "sa"))
    );
    assert_eq!(parse_subject("system:serviceaccount:ns:sa:x"), None);
    assert_eq!(parse_subject("system:serviceaccount::sa"), None);
}

#[test]
fn malformed_oversized_and_unsigned_tokens_are_refused_without_echoing_them() {
    let key = ec_key("k1");
    let keys = set(&[&key]);
    let v = verifier();
    let secretish = "c2VjcmV0LXRva2Vu";
    for (token, want) in [
        (secretish.to_string(), "three dot-separated parts"),
        (
            format!("{secretish}.{secretish}.!!"),
            "header is not a JSON",
        ),
        (
            format!("{}.{secretish}.", b64(br#"{"alg":"none"}"#)),
            "\"none\"",
        ),
        (
            format!("{}.{secretish}.", b64(br#"{"alg":"HS256"}"#)),
            "\"HS256\"",
        ),
        (
            format!("{}.{secretish}.AA", b64(br#"{"alg":"ES256","crit":["x"]}"#)),
            "crit",
        ),
        ("a".repeat(DEFAULT_MAX_TOKEN_BYTES + 1), "over the limit"),
    ] {
        let e = v.verify(&token, &keys, NOW).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
        assert!(!e.contains(secretish), "the message shows the token: {e}");
    }
    let token = key.sign(&claims());
    let jws = Jws::parse(&token, DEFAULT_MAX_TOKEN_BYTES).unwrap();
    let debug = format!("{jws:?}");
    let payload = token.split('.').nth(1).unwrap();
    assert!(
        !debug.contains(payload) && debug.contains("Es256"),
        "{debug}"
    );
}

#[test]
fn a_key_set_is_bounded_and_says_which_keys_it_skipped() {
    let key = ec_key("k1");
    let doc = json!({"keys": [key.jwk,
        {"kty": "oct", "kid": "hmac", "k": "AAAA"},
        {"kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"},
        {"kty": "RSA", "kid": "small", "n": b64(&[0xff; 128]), "e": "AQAB"},
        {"kty": "EC", "crv": "P-256", "kid": "enc", "use": "enc", "x": "AA", "y": "AA"},
        {"kty": "EC", "crv": "P-256", "kid": "wrongalg", "alg": "RS256",
            "x": key.jwk["x"], "y": key.jwk["y"]}]});
    let set = JwkSet::from_json(doc.to_string().as_bytes()).unwrap();
    assert_eq!(set.keys().len(), 1);
    assert!(set.has_key_id("k1"));
    let skipped = set.skipped.join("\n");
    for why in ["\"oct\"", "P-384", "under 2048", "\"enc\"", "\"RS256\""] {
        assert!(skipped.contains(why), "{why}: {skipped}");
    }
    let many = json!({"keys": vec![key.jwk.clone(); 3]});
    let e = JwkSet::from_json_bounded(many.to_string().as_bytes(), 2).unwrap_err();
    assert_eq!(e, JwksError::TooManyKeys { count: 3, max: 2 });
    let none = json!({"keys": [{"kty": "oct", "k": "AAAA"}]});
    let e = JwkSet::from_json(none.to_string().as_bytes()).unwrap_err();
    assert!(e.to_string().contains("no usable"), "{e}");
    assert!(matches!(
        JwkSet::from_json(b"[]"),
        Err(JwksError::Malformed(_))
    ));
}
