//! RequestAuthentication enforced by b's sidecar with standard Envoy's `jwt_authn`,
//! keys fetched by Shoal's edge from the issuer's `jwksUri` (a test issuer serving its
//! JWKS on loopback; ES256 keys made at start), and an AuthorizationPolicy requiring
//! `requestPrincipals: ["<iss>/*"]`: a valid token reaches b (straight and through a's
//! sidecar), none is denied by RBAC (403), an expired one or one signed by a key the
//! issuer does not publish is refused by `jwt_authn` (401). Then an inline `jwks` rule.
//! Each with b's Envoy on SotW and on Delta.

use crate::mtls::{LONG, Pair};
use shoal_test_support::jwt::TestIssuer;

fn policies(issuer: &str, jwks: &str) -> String {
    format!(
        r#"apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {{name: jwt, namespace: beta}}
spec:
  selector: {{matchLabels: {{app: b}}}}
  jwtRules:
  - issuer: "{issuer}"
    {jwks}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: need-jwt, namespace: beta}}
spec:
  selector: {{matchLabels: {{app: b}}}}
  rules:
  - from: [{{source: {{requestPrincipals: ["{issuer}/*"]}}}}]
"#
    )
}

/// The status of a GET of `base`/ with `token` as bearer: `200 <body>` or the status.
async fn status(pair: &Pair, base: &str, token: Option<&str>) -> String {
    let mut req = pair.http.get(format!("{base}/")).header("host", pair.host);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    match req.send().await {
        Ok(resp) => {
            let code = resp.status().as_u16();
            let body = resp.text().await.unwrap_or_default();
            if code == 200 {
                format!("200 {body}")
            } else {
                code.to_string()
            }
        }
        Err(e) => format!("GET {base}: {e}"),
    }
}

async fn expect(pair: &Pair, what: &str, cases: &[(&str, Option<&str>, &str)]) {
    pair.mesh
        .eventually(&format!("{what}; {}", pair.logs()), LONG, async || {
            for (i, (base, token, want)) in cases.iter().enumerate() {
                let got = status(pair, base, *token).await;
                if got != *want {
                    return Err(format!("case {i} ({base}): {got}, want {want}"));
                }
            }
            Ok(())
        })
        .await;
}

async fn b_validates_jwts(b_api_type: &'static str) {
    let _serial = crate::SERIAL.lock().await;
    let issuer = TestIssuer::serve().await.expect("serve the issuer");
    let pair = Pair::start_with(b_api_type).await;
    pair.wait_mtls().await;
    let (a, outside) = (pair.via_a.as_str(), pair.direct.as_str());

    pair.apply(
        "jwt.yaml",
        &policies(
            issuer.issuer(),
            &format!("jwksUri: \"{}\"", issuer.jwks_uri()),
        ),
    );
    let valid = issuer.istio_token("shop", "client");
    let expired = issuer.expired_token("shop", "client");
    // Same issuer name, a key it never published.
    let forged = TestIssuer::new(issuer.issuer()).istio_token("shop", "client");
    expect(
        &pair,
        "jwksUri: valid, none, expired, unknown key",
        &[
            (outside, Some(&valid), "200 b"),
            (a, Some(&valid), "200 b"),
            (outside, None, "403"),
            (a, None, "403"),
            (outside, Some(&expired), "401"),
            (outside, Some(&forged), "401"),
        ],
    )
    .await;
    assert!(issuer.jwks_fetches() > 0, "the edge fetched the keys");

    // Inline keys of another issuer (never served): its tokens pass, the first one's
    // are refused (no provider accepts them).
    let inline = TestIssuer::new("https://inline.example.com");
    pair.apply(
        "jwt.yaml",
        &policies(inline.issuer(), &format!("jwks: '{}'", inline.jwks_json())),
    );
    let inline_token = inline.istio_token("shop", "client");
    expect(
        &pair,
        "inline jwks",
        &[
            (outside, Some(&inline_token), "200 b"),
            (outside, Some(&valid), "401"),
            (outside, None, "403"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_on_sotw_validates_jwts_and_requires_request_principals() {
    b_validates_jwts("GRPC").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_on_delta_validates_jwts_and_requires_request_principals() {
    b_validates_jwts("DELTA_GRPC").await;
}
