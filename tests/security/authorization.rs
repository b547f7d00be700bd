//! AuthorizationPolicy enforced by b's sidecar, with a reaching it over the mesh's mTLS
//! and a plaintext client from outside the mesh (b PERMISSIVE): a DENY by path blocks
//! that path only; an ALLOW by principal admits a and no one else; an ALLOW that admits
//! one path denies the rest (Istio's default deny once an ALLOW selects a workload); an
//! ALLOW `when` a request header has a value (and not another); a policy of another
//! workload changes nothing for b.

use crate::mtls::{LONG, Pair};

fn policy(name: &str, selector_app: &str, action: &str, rules: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: beta}}\nspec:\n  selector: {{matchLabels: {{app: {selector_app}}}}}\n  action: {action}\n  rules:\n{rules}"
    )
}

/// The status a request ends with: 200 with b's body, or the error (403 from RBAC).
async fn status(pair: &Pair, base: &str, path: &str) -> String {
    match pair.get(base, path).await {
        Ok(body) => format!("200 {body}"),
        Err(e) if e.contains("403") => "403".into(),
        Err(e) => e,
    }
}

/// The status of `GET base/` with header `x-user` when given.
async fn with_user(pair: &Pair, base: &str, user: Option<&str>) -> String {
    let mut req = pair.http.get(format!("{base}/")).header("host", pair.host);
    if let Some(user) = user {
        req = req.header("x-user", user);
    }
    match req.send().await {
        Ok(resp) => resp.status().as_u16().to_string(),
        Err(e) => e.to_string(),
    }
}

/// Waits until `(base, path)` requests end as `want`, each.
async fn expect(pair: &Pair, what: &str, cases: &[(&str, &str, &str)]) {
    pair.mesh
        .eventually(&format!("{what}; {}", pair.logs()), LONG, async || {
            for (base, path, want) in cases {
                let got = status(pair, base, path).await;
                if got != *want {
                    return Err(format!("{base}{path}: {got}, want {want}"));
                }
            }
            Ok(())
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b_enforces_deny_by_path_allow_by_principal_and_the_default_deny() {
    let _serial = crate::SERIAL.lock().await;
    let pair = Pair::start().await;
    pair.wait_mtls().await;
    let (a, outside) = (pair.via_a.as_str(), pair.direct.as_str());

    // DENY by path: /admin is refused to everyone, the rest served.
    pair.apply(
        "deny.yaml",
        &policy(
            "no-admin",
            "b",
            "DENY",
            "  - to: [{operation: {paths: [\"/admin*\"]}}]\n",
        ),
    );
    expect(
        &pair,
        "DENY /admin*",
        &[
            (a, "/admin/x", "403"),
            (outside, "/admin", "403"),
            (a, "/", "200 b"),
            (outside, "/", "200 b"),
        ],
    )
    .await;

    // ALLOW by principal: a (its mTLS identity) is admitted, the plaintext client not.
    pair.apply(
        "allow.yaml",
        &policy(
            "only-a",
            "b",
            "ALLOW",
            "  - from: [{source: {principals: [\"cluster.local/ns/alpha/sa/a\"]}}]\n",
        ),
    );
    expect(
        &pair,
        "ALLOW a only",
        &[
            (a, "/", "200 b"),
            (outside, "/", "403"),
            (a, "/admin", "403"),
        ],
    )
    .await;

    // An ALLOW of one path: everything else is denied, whoever asks.
    pair.apply(
        "allow.yaml",
        &policy(
            "only-public",
            "b",
            "ALLOW",
            "  - to: [{operation: {paths: [\"/public\"]}}]\n",
        ),
    );
    expect(
        &pair,
        "ALLOW /public only",
        &[
            (a, "/public", "200 b"),
            (outside, "/public", "200 b"),
            (a, "/", "403"),
        ],
    )
    .await;

    // `when`: a request header (values and notValues) and the destination port, read
    // by b's sidecar from the request a forwards.
    pair.apply(
        "allow.yaml",
        &policy(
            "by-header",
            "b",
            "ALLOW",
            "  - when:\n    - {key: \"request.headers[x-user]\", values: [\"alice\", \"bob\"], notValues: [\"bob\"]}\n    - {key: destination.port, notValues: [\"1\"]}\n",
        ),
    );
    pair.mesh
        .eventually(
            &format!("ALLOW when x-user; {}", pair.logs()),
            LONG,
            async || {
                let got = [
                    with_user(&pair, a, Some("alice")).await,
                    with_user(&pair, a, Some("bob")).await,
                    with_user(&pair, a, None).await,
                ];
                if got == ["200", "403", "403"] {
                    Ok(())
                } else {
                    Err(format!("alice, bob, nobody: {got:?}"))
                }
            },
        )
        .await;

    // Policies of another workload: b is back to its DENY alone.
    pair.apply("allow.yaml", &policy("for-c", "c", "ALLOW", "  - {}\n"));
    expect(
        &pair,
        "another workload's ALLOW",
        &[(a, "/", "200 b"), (a, "/admin", "403")],
    )
    .await;
}
