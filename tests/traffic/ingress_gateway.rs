//! An ingress gateway: a router Envoy selected by a Gateway routes by Host and path
//! over HTTP to the VirtualServices bound to it, redirects to HTTPS where the server
//! says so, answers 404 for hosts nothing routes, and terminates TLS with the
//! certificate of a `kubernetes.io/tls` Secret, which Shoal serves over SDS only to a
//! gateway that proved its identity: one on plaintext ADS gets no key. It also passes
//! TLS through by SNI to a backend that terminates it.

use crate::SERIAL;
use crate::backend::tls::TestPki;
use crate::backend::{Backend, HttpBackend};
use crate::harness::{CLIENT_NS, GATEWAY_IP, GATEWAY_NS, Mesh, Role, expect, workloads};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use base64::Engine;
use std::path::Path;
use std::process::Command;

/// The Gateway's servers are on the ports of the Service in front of the gateway
/// (80, 81, 443), as users write them for a cluster.
const GATEWAY: &str = r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: public
  namespace: istio-system
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["traffic/*.example.com"]
  - port: {number: 81, name: http-redirect, protocol: HTTP}
    hosts: ["*"]
    tls: {httpsRedirect: true}
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: ["traffic/secure.example.com"]
    tls: {mode: SIMPLE, credentialName: ingress-cert}
"#;

/// The Service `istio-ingressgateway` selecting the gateway pod (at [`GATEWAY_IP`]), as
/// Istio's chart installs it: Service ports 80, 81 and 443 sent to the pod's `targets`
/// (unprivileged ports the gateway listens on), and the EndpointSlice naming them.
fn gateway_service(targets: [u16; 3]) -> String {
    let [http, redirect, https] = targets;
    format!(
        r#"apiVersion: v1
kind: Service
metadata:
  name: istio-ingressgateway
  namespace: {GATEWAY_NS}
spec:
  selector: {{istio: ingressgateway}}
  ports:
  - {{name: http2, port: 80, targetPort: {http}}}
  - {{name: http-redirect, port: 81, targetPort: {redirect}}}
  - {{name: https, port: 443, targetPort: {https}}}
---
apiVersion: v1
kind: Pod
metadata:
  name: istio-ingressgateway
  namespace: {GATEWAY_NS}
  labels: {{istio: ingressgateway, app: istio-ingressgateway}}
status:
  podIP: {GATEWAY_IP}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: istio-ingressgateway
  namespace: {GATEWAY_NS}
  labels:
    kubernetes.io/service-name: istio-ingressgateway
addressType: IPv4
ports:
- {{name: http2, port: {http}}}
- {{name: http-redirect, port: {redirect}}}
- {{name: https, port: {https}}}
endpoints:
- addresses: [{GATEWAY_IP}]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: istio-ingressgateway, namespace: {GATEWAY_NS}}}
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
    https_get_as("secure.example.com", port, ca, &[])
}

/// `GET https://<host>:<port>/` with `curl` (more `args`, e.g. a client certificate).
fn https_get_as(host: &str, port: u16, ca: &Path, args: &[&str]) -> Result<(u16, String), String> {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "--max-time", "5"])
        .args(["-w", "%{http_code} %header{x-backend}"])
        .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
        .arg("--cacert")
        .arg(ca)
        .args(args)
        .arg(format!("https://{host}:{port}/"))
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
    // Istio's gateway port translation: the servers on Service ports 80/81/443 are
    // served on the ports the Service sends them to, where clients reach them.
    let (http, redirect, https) = (free_port(), free_port(), free_port());
    mesh.write("virtual-services.yaml", VIRTUAL_SERVICES);
    mesh.write(
        "ingress-service.yaml",
        &gateway_service([http, redirect, https]),
    );
    mesh.apply(
        "gateway.yaml",
        GATEWAY,
        "shop.example.com/api routed to api through the gateway's target port",
        async || {
            let r = mesh.get(http, "shop.example.com", "/api/items").await?;
            expect(r.backend() == Some("api-v1"), r)
        },
    )
    .await;
    // Named as istiod names them: listener and HTTP route configuration by the port
    // listened on; Service port 80 itself is not bound.
    let listeners = mesh.config_dump("dynamic_listeners").await;
    let routes = mesh.config_dump("dynamic_route_configs").await;
    assert!(
        listeners.contains(&format!("\"0.0.0.0_{http}\"")) && !listeners.contains("\"0.0.0.0_80\""),
        "{listeners}"
    );
    assert!(routes.contains(&format!("\"http.{http}\"")), "{routes}");
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
    // Hosts no VirtualService routes are redirected too (Istio adds a virtual host that
    // only redirects).
    let r = mesh.must_get(redirect, "unbound.example.com", "/").await;
    assert_eq!(r.status, 301, "{r}");

    // The gateway's Envoy here connects over plaintext ADS and proves nothing: it is
    // never sent the Secret's key (issue 17), so its HTTPS server has no certificate.
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = certificate(dir.path(), "secure.example.com");
    let ca = dir.path().join("cert.pem");
    mesh.write("ingress-cert.yaml", &tls_secret(&cert, &key));
    mesh.eventually(
        "the edge refuses the anonymous gateway its key",
        async || {
            expect(
                mesh.logs()
                    .contains("secret kubernetes://ingress-cert not sent"),
                "no refusal logged yet",
            )
        },
    )
    .await;
    let refused = https_get(https, &ca);
    assert!(
        refused.is_err(),
        "HTTPS answered with the Secret's certificate: {refused:?}"
    );
    mesh.finish().await;
}

/// `openssl` with `args`, panicking with its output on failure.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A CA (`ca.pem`), and the server (`server.pem`, for `host`) and client (`client.pem`)
/// certificates it signs, with their keys, made by `openssl` in `dir`.
fn mutual_pki(dir: &Path, host: &str) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "1", "-subj", "/CN=test CA"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca-key.pem", "-out", "ca.pem"]);
    openssl(dir, &ca);
    for (name, cn) in [("server", host), ("client", "client.example.com")] {
        let mut req = vec!["req", "-subj"];
        let subj = format!("/CN={cn}");
        req.push(&subj);
        req.extend(ec);
        let (key, csr) = (format!("{name}-key.pem"), format!("{name}.csr"));
        req.extend(["-keyout", &key, "-out", &csr]);
        openssl(dir, &req);
        let ext = format!("{name}.ext");
        std::fs::write(dir.join(&ext), format!("subjectAltName=DNS:{cn}\n")).expect("ext");
        let pem = format!("{name}.pem");
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                &ext,
                "-out",
                &pem,
            ],
        );
    }
}

fn mutual_and_passthrough_gateway(mutual: u16, passthrough: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: edge
  namespace: {GATEWAY_NS}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {mutual}, name: https-mtls, protocol: HTTPS}}
    hosts: ["{CLIENT_NS}/mtls.example.com"]
    tls: {{mode: MUTUAL, credentialName: mtls-cert}}
  - port: {{number: {passthrough}, name: tls-passthrough, protocol: TLS}}
    hosts: ["{CLIENT_NS}/pass.example.com"]
    tls: {{mode: PASSTHROUGH}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: mtls
  namespace: {CLIENT_NS}
spec:
  hosts: [mtls.example.com]
  gateways: [{GATEWAY_NS}/edge]
  http:
  - route: [{{destination: {{host: web}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: pass
  namespace: {CLIENT_NS}
spec:
  hosts: [pass.example.com]
  gateways: [{GATEWAY_NS}/edge]
  tls:
  - match: [{{sniHosts: [pass.example.com]}}]
    route: [{{destination: {{host: pass, port: {{number: 443}}}}}}]
"#
    )
}

/// A generic Secret with Istio's keys, and the `-cacert` Secret holding the client CA.
fn mutual_secrets(dir: &Path) -> String {
    let pem = |f: &str| {
        let text = std::fs::read_to_string(dir.join(f)).expect("read PEM");
        base64::engine::general_purpose::STANDARD.encode(text)
    };
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: mtls-cert\n  namespace: {GATEWAY_NS}\n\
         data:\n  cert: {}\n  key: {}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  \
         name: mtls-cert-cacert\n  namespace: {GATEWAY_NS}\ndata:\n  cacert: {}\n",
        pem("server.pem"),
        pem("server-key.pem"),
        pem("ca.pem")
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_gateway_verifies_client_certificates_and_passes_tls_through_by_sni() {
    let _serial = SERIAL.lock().await;
    let mesh = Mesh::start_as(XdsApi::Sotw, Role::IngressGateway).await;
    let files = tempfile::tempdir().expect("tempdir");
    let web = HttpBackend::start("web-v1").await;
    let pki = TestPki::new(&files.path().join("backend"));
    let pass =
        HttpBackend::start_tls("pass-v1", pki.server_config(&["pass.example.com"], false)).await;
    mesh.write(
        "web.yaml",
        &workloads::service(CLIENT_NS, "web", "http", 80, &[web.workload("v1")]),
    );
    mesh.write(
        "pass.yaml",
        &workloads::service(CLIENT_NS, "pass", "https", 443, &[pass.workload("v1")]),
    );
    mutual_pki(files.path(), "mtls.example.com");
    mesh.write("mtls-secrets.yaml", &mutual_secrets(files.path()));
    let (mutual, passthrough) = (free_port(), free_port());
    let ca = files.path().join("ca.pem");
    let client = |f: &str| files.path().join(f).display().to_string();
    let (cert, key) = (client("client.pem"), client("client-key.pem"));
    let with_cert = ["--cert", cert.as_str(), "--key", key.as_str()];
    mesh.write(
        "edge-gateway.yaml",
        &mutual_and_passthrough_gateway(mutual, passthrough),
    );
    // Over plaintext ADS the gateway proves nothing, so it is never sent the
    // certificate or the client CA (issue 17): mutual TLS cannot be offered.
    mesh.eventually(
        "the edge refuses the anonymous gateway its key",
        async || {
            expect(
                mesh.logs()
                    .contains("secret kubernetes://mtls-cert not sent"),
                "no refusal logged yet",
            )
        },
    )
    .await;
    let refused = https_get_as("mtls.example.com", mutual, &ca, &with_cert);
    assert!(refused.is_err(), "mutual TLS answered: {refused:?}");

    // Passed through: the backend's own certificate (from its CA) answers, by SNI.
    let pass_ca = pki.dir.join("ca.pem");
    mesh.eventually("TLS passed through to pass-v1 by SNI", async || {
        let (status, backend) = https_get_as("pass.example.com", passthrough, &pass_ca, &[])?;
        expect(
            status == 200 && backend == "pass-v1",
            format!("{status} from {backend:?}"),
        )
    })
    .await;
    let seen = pass.received();
    assert!(
        seen.iter()
            .any(|r| r.header("x-tls-sni") == Some("pass.example.com")),
        "the backend saw no SNI pass.example.com"
    );
    mesh.finish().await;
}
