//! An ingress gateway: a router Envoy selected by a Gateway routes by Host and path
//! over HTTP to the VirtualServices bound to it, redirects to HTTPS where the server
//! says so, answers 404 for hosts nothing routes, and terminates TLS with the
//! certificate of a `kubernetes.io/tls` Secret, which Shoal serves to it over SDS.

use crate::SERIAL;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, GATEWAY_NS, Mesh, Role, expect, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use base64::Engine;
use std::path::Path;
use std::process::Command;

fn gateway(http: u16, redirect: u16, https: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: public
  namespace: {GATEWAY_NS}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {http}, name: http, protocol: HTTP}}
    hosts: ["{CLIENT_NS}/*.example.com"]
  - port: {{number: {redirect}, name: http-redirect, protocol: HTTP}}
    hosts: ["*"]
    tls: {{httpsRedirect: true}}
  - port: {{number: {https}, name: https, protocol: HTTPS}}
    hosts: ["{CLIENT_NS}/secure.example.com"]
    tls: {{mode: SIMPLE, credentialName: ingress-cert}}
"#
    )
}

const VIRTUAL_SERVICES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: shop
  namespace: traffic
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/public]
  http:
  - match: [{uri: {prefix: /api}}]
    route: [{destination: {host: api}}]
  - route: [{destination: {host: web}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: secure
  namespace: traffic
spec:
  hosts: [secure.example.com]
  gateways: [istio-system/public]
  http:
  - route: [{destination: {host: api}}]
"#;

/// A self-signed certificate and key for `host`, made by `openssl`, as PEM.
fn certificate(dir: &Path, host: &str) -> (String, String) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", &format!("/CN={host}")])
        .args(["-addext", &format!("subjectAltName=DNS:{host}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (install it with apt-get install openssl)");
    assert!(status.status.success(), "openssl: {status:?}");
    let read = |p: &Path| std::fs::read_to_string(p).expect("read PEM");
    (read(&cert), read(&key))
}

/// The Secret as `kubectl create secret tls` writes it: base64 `data`.
fn tls_secret(cert: &str, key: &str) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ingress-cert\n  namespace: {GATEWAY_NS}\n\
         type: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(cert),
        b64(key)
    )
}

/// `GET https://secure.example.com:<port>/` with `curl`, trusting only `ca`: the
/// status and the `x-backend` that answered.
fn https_get(port: u16, ca: &Path) -> Result<(u16, String), String> {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "--max-time", "5"])
        .args(["-w", "%{http_code} %header{x-backend}"])
        .args(["--resolve", &format!("secure.example.com:{port}:127.0.0.1")])
        .arg("--cacert")
        .arg(ca)
        .arg(format!("https://secure.example.com:{port}/"))
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (status, backend) = text.split_once(' ').unwrap_or((&text, ""));
    match status.parse() {
        Ok(s) if s > 0 => Ok((s, backend.to_string())),
        _ => Err(format!(
            "curl exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_gateway_routes_by_host_and_path_and_terminates_tls() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start_as(XdsApi::Delta, Role::IngressGateway).await;
    let web = HttpBackend::start("web-v1").await;
    let api = HttpBackend::start("api-v1").await;
    for (name, backend) in [("web", &web), ("api", &api)] {
        mesh.write(
            &format!("{name}.yaml"),
            &workloads::service(CLIENT_NS, name, "http", 80, &[backend.workload("v1")]),
        );
    }
    let (http, redirect, https) = (free_port(), free_port(), free_port());
    mesh.write("virtual-services.yaml", VIRTUAL_SERVICES);
    mesh.apply(
        "gateway.yaml",
        &gateway(http, redirect, https),
        "shop.example.com/api routed to api through the gateway",
        async || {
            let r = mesh.get(http, "shop.example.com", "/api/items").await?;
            expect(r.backend() == Some("api-v1"), r)
        },
    )
    .await;
    let r = mesh.must_get(http, "shop.example.com", "/").await;
    assert_eq!(r.served_by(), Ok("web-v1"), "{r}");
    // The Host decides: no VirtualService routes other.example.com.
    let r = mesh.must_get(http, "other.example.com", "/api").await;
    assert_eq!(r.status, 404, "{r}");
    let r = mesh
        .must_get(redirect, "secure.example.com", "/login")
        .await;
    assert_eq!(r.status, 301, "{r}");
    let location = r.header("location").unwrap_or_default();
    assert!(location.starts_with("https://secure.example.com"), "{r}");

    // Until its Secret exists the HTTPS server is left out; then its certificate is
    // served over SDS, and only a client trusting it gets through.
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(dir.path(), "secure.example.com");
    let ca = dir.path().join("cert.pem");
    assert!(
        https_get(https, &ca).is_err(),
        "HTTPS answered before the Secret existed"
    );
    mesh.apply(
        "ingress-cert.yaml",
        &tls_secret(&cert, &key),
        "HTTPS on the gateway with the Secret's certificate",
        async || {
            let (status, backend) = https_get(https, &ca)?;
            expect(
                status == 200 && backend == "api-v1",
                format!("{status} from {backend:?}"),
            )
        },
    )
    .await;
    // A client trusting another certificate for the same name is refused.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    certificate(&other, "secure.example.com");
    let refused = https_get(https, &other.join("cert.pem"));
    assert!(
        refused.is_err(),
        "a client trusting another CA got {refused:?}"
    );
    mesh.finish().await;
}
