//! `action: CUSTOM` through a real Envoy: b's sidecar asks an HTTP ext_authz provider
//! from the mesh config (`extensionProviders[].envoyExtAuthzHttp`, a Service in the
//! registry) about the requests the policy's rules match, and only those; the provider
//! allows a request carrying `x-ext-authz: allow`. A policy naming a provider the mesh
//! config does not define denies what its rules match (Istio fails closed).
//!
//! The authorizer is a small HTTP server written here: ext_authz's HTTP protocol is
//! only "answer 2xx to allow", which it speaks as any real authorizer does.

use crate::mtls::{LONG, Pair};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// An HTTP authorizer: 200 when the check carries `x-ext-authz: allow`, else 403.
struct Authorizer {
    addr: SocketAddr,
    checks: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Authorizer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Authorizer {
    async fn start() -> Authorizer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let checks = Arc::new(AtomicUsize::new(0));
        let counted = checks.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let checks = counted.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        buf.drain(..end);
                        checks.fetch_add(1, Ordering::SeqCst);
                        let allow = head.lines().any(|l| l.trim() == "x-ext-authz: allow");
                        let (status, verdict) = if allow {
                            ("200 OK", "allowed")
                        } else {
                            ("403 Forbidden", "denied")
                        };
                        let resp = format!(
                            "HTTP/1.1 {status}\r\nx-ext-authz-check-result: {verdict}\r\ncontent-length: {}\r\n\r\n{verdict}",
                            verdict.len()
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Authorizer { addr, checks, task }
    }

    fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }
}

/// The authorizer as a Service of the registry (port 8000), outside the mesh.
fn authorizer_service(addr: SocketAddr) -> String {
    format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: ext-authz, namespace: beta}}
spec:
  ports: [{{name: http, port: 8000, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ext-authz-0
  namespace: beta
  labels: {{kubernetes.io/service-name: ext-authz}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints:
- addresses: ["{ip}"]
  conditions: {{ready: true}}
"#,
        port = addr.port(),
        ip = addr.ip()
    )
}

const MESH_CONFIG: &str = r#"apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    extensionProviders:
    - name: sample-ext-authz
      envoyExtAuthzHttp:
        service: ext-authz.beta.svc.cluster.local
        port: "8000"
        includeRequestHeadersInCheck: [x-ext-authz]
        headersToDownstreamOnDeny: [x-ext-authz-check-result]
"#;

fn custom_policy(provider: &str) -> String {
    format!(
        r#"apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: ext, namespace: beta}}
spec:
  selector: {{matchLabels: {{app: b}}}}
  action: CUSTOM
  provider: {{name: {provider}}}
  rules:
  - to: [{{operation: {{paths: ["/custom/*"]}}}}]
"#
    )
}

/// `GET base+path` with b's host and, when given, `x-ext-authz: <verdict>`: the status
/// and, on a denial, the authorizer's verdict header.
async fn call(pair: &Pair, base: &str, path: &str, ask: Option<&str>) -> String {
    let mut req = pair
        .http
        .get(format!("{base}{path}"))
        .header("host", pair.host);
    if let Some(v) = ask {
        req = req.header("x-ext-authz", v);
    }
    match req.send().await {
        Ok(resp) => {
            let verdict = resp
                .headers()
                .get("x-ext-authz-check-result")
                .map(|v| format!(" {}", v.to_str().unwrap_or("?")))
                .unwrap_or_default();
            format!("{}{verdict}", resp.status().as_u16())
        }
        Err(e) => format!("error: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_asks_the_mesh_configs_authorizer_for_what_its_rules_match() {
    let _serial = crate::SERIAL.lock().await;
    let authorizer = Authorizer::start().await;
    let pair = Pair::start().await;
    pair.wait_mtls().await;
    pair.apply("ext-authz.yaml", &authorizer_service(authorizer.addr));
    pair.apply("mesh.yaml", MESH_CONFIG);
    pair.apply("custom.yaml", &custom_policy("sample-ext-authz"));
    let a = pair.via_a.as_str();

    // Matched by the rule: the authorizer decides (its verdict reaches the client on a
    // denial, as headersToDownstreamOnDeny says).
    pair.mesh
        .eventually(
            &format!("CUSTOM enforced; {}", pair.logs()),
            LONG,
            async || {
                let denied = call(&pair, a, "/custom/x", None).await;
                let allowed = call(&pair, a, "/custom/x", Some("allow")).await;
                if denied == "403 denied" && allowed == "200" {
                    Ok(())
                } else {
                    Err(format!("without the header: {denied}; with it: {allowed}"))
                }
            },
        )
        .await;
    // Not matched: served without asking the authorizer.
    let before = authorizer.checks();
    for _ in 0..3 {
        assert_eq!(
            call(&pair, a, "/public", None).await,
            "200",
            "{}",
            pair.logs()
        );
    }
    assert_eq!(
        authorizer.checks(),
        before,
        "unmatched requests were checked"
    );
    // The plaintext client outside the mesh is checked the same way.
    assert_eq!(
        call(&pair, &pair.direct, "/custom/y", None).await,
        "403 denied"
    );
    assert_eq!(
        call(&pair, &pair.direct, "/custom/y", Some("allow")).await,
        "200"
    );

    // A provider the mesh config does not define: the rules deny, whatever the header.
    pair.apply("custom.yaml", &custom_policy("undefined-provider"));
    pair.mesh
        .eventually(
            &format!("an undefined provider fails closed; {}", pair.logs()),
            LONG,
            async || match call(&pair, a, "/custom/x", Some("allow")).await.as_str() {
                "403" => Ok(()),
                other => Err(format!("answered {other}")),
            },
        )
        .await;
    assert_eq!(call(&pair, a, "/public", None).await, "200");
}
