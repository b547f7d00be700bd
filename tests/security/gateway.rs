//! A gateway's credential (`kubernetes://<credentialName>`) reaches its own router, and
//! nobody else: the router Envoy, behind an agent stand-in with the gateway's identity,
//! serves HTTPS with it; another namespace's identity and an anonymous client get none.
//! Then an AuthorizationPolicy selecting the gateway refuses a path there.

use crate::bootstrap::{Node, bootstrap};
use crate::client::{SECRET_TYPE, ads_first_response, expect_code};
use crate::k8s::{Workload, namespace, service};
use crate::mesh::Mesh;
use crate::support::envoy::Envoy;
use crate::support::{backend, free_port};
use base64::Engine;
use shoal_test_support::pki::TestCa;
use std::process::Command;
use std::time::Duration;
use tonic::Code;

const GW_NS: &str = "gw";
const GW_IP: &str = "127.0.0.4";

fn gateway_config(
    https_port: u16,
    web_port: u16,
    cert: &str,
    key: &str,
) -> Vec<(&'static str, String)> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    vec![
        (
            "ns.yaml",
            format!("{}---\n{}", namespace(GW_NS), namespace("other")),
        ),
        (
            "web.yaml",
            service(
                GW_NS,
                "web",
                "http",
                80,
                &[Workload::new("web-0", "v1", web_port)],
            ),
        ),
        (
            "gateway.yaml",
            format!(
                r#"apiVersion: v1
kind: Service
metadata: {{name: ingress, namespace: {GW_NS}}}
spec:
  selector: {{istio: ingress}}
  ports: [{{name: https, port: 443, targetPort: {https_port}}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: ingress-0
  namespace: {GW_NS}
  labels: {{istio: ingress}}
status:
  podIP: {GW_IP}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ingress
  namespace: {GW_NS}
  labels: {{kubernetes.io/service-name: ingress}}
addressType: IPv4
ports: [{{name: https, port: {https_port}}}]
endpoints:
- addresses: [{GW_IP}]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: ingress-0, namespace: {GW_NS}}}
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: {GW_NS}}}
spec:
  selector: {{istio: ingress}}
  servers:
  - port: {{number: 443, name: https, protocol: HTTPS}}
    hosts: ["{GW_NS}/secure.example.com"]
    tls: {{mode: SIMPLE, credentialName: ingress-cert}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: secure, namespace: {GW_NS}}}
spec:
  hosts: [secure.example.com]
  gateways: [edge]
  http:
  - route: [{{destination: {{host: web}}}}]
---
apiVersion: v1
kind: Secret
metadata: {{name: ingress-cert, namespace: {GW_NS}}}
type: kubernetes.io/tls
data:
  tls.crt: {}
  tls.key: {}
"#,
                b64(cert),
                b64(key)
            ),
        ),
    ]
}

fn curl_https(port: u16, ca: &std::path::Path) -> Result<String, String> {
    curl_https_path(port, ca, "/")
}

fn curl_https_path(port: u16, ca: &std::path::Path, path: &str) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "5", "--cacert"])
        .arg(ca)
        .args(["--resolve", &format!("secure.example.com:{port}:{GW_IP}")])
        .arg(format!("https://secure.example.com:{port}{path}"))
        .output()
        .map_err(|e| format!("curl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    } else {
        Err(format!(
            "curl exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_credential_goes_to_its_own_router_only() {
    let _serial = crate::SERIAL.lock().await;
    let web = backend::start("web", "127.0.0.1").await;
    let site = TestCa::new("site CA");
    let leaf = site.issue(&["secure.example.com"], None);
    let https_port = free_port();
    let mesh = Mesh::start(
        &gateway_config(https_port, web.addr.port(), &leaf.cert_pem, &leaf.key_pem),
        &[],
    )
    .await;
    let site_ca = mesh.dir.path().join("site-ca.pem");
    std::fs::write(&site_ca, &site.root_pem).unwrap();

    // Others first (no router of the gateway is connected yet): another namespace's
    // router, however it names the Secret, gets no key; a claim of the gateway's namespace
    // with that identity is denied; no credentials, unauthenticated.
    let other = mesh.issuer.istio_token("other", "ingress");
    let router = |ns: &str| format!("router~{GW_IP}~ingress-0.{ns}~{ns}.svc.cluster.local");
    for name in ["kubernetes://ingress-cert", "kubernetes://gw/ingress-cert"] {
        let got = ads_first_response(
            &mesh,
            &router("other"),
            "other",
            Some(&other),
            SECRET_TYPE,
            &[name],
            Duration::from_secs(5),
        )
        .await;
        match got {
            Ok(None) => {}
            Ok(Some(resp)) => assert!(
                resp.resources.is_empty(),
                "a router in `other` was sent {name}: {} resource(s)",
                resp.resources.len()
            ),
            Err(status) => assert!(
                matches!(
                    status.code(),
                    Code::PermissionDenied | Code::InvalidArgument | Code::NotFound
                ),
                "{name} for `other`: {status:?}"
            ),
        }
    }
    let spoof = ads_first_response(
        &mesh,
        &router(GW_NS),
        GW_NS,
        Some(&other),
        SECRET_TYPE,
        &["kubernetes://ingress-cert"],
        Duration::from_secs(5),
    )
    .await;
    expect_code(
        "a router claiming the gateway's namespace",
        spoof,
        Code::PermissionDenied,
    );
    let anonymous = ads_first_response(
        &mesh,
        &router(GW_NS),
        GW_NS,
        None,
        SECRET_TYPE,
        &["kubernetes://ingress-cert"],
        Duration::from_secs(5),
    )
    .await;
    expect_code("an anonymous router", anonymous, Code::Unauthenticated);

    // The gateway's own router, behind an agent with its identity, serves HTTPS with it.
    let agent = mesh.agent("ingress", GW_NS, "ingress", "1h");
    let admin = free_port();
    let envoy = Envoy::start(
        "ingress-envoy",
        &bootstrap(
            &Node {
                kind: "router",
                ip: GW_IP,
                namespace: GW_NS,
                pod: "ingress-0",
                service_account: "ingress",
                labels: "{istio: ingress}",
                api_type: "GRPC",
            },
            &agent,
            admin,
            None,
        ),
        admin,
        mesh.dir.path(),
    );
    mesh.eventually(
        "HTTPS through the gateway",
        Duration::from_secs(60),
        async || {
            let body = curl_https(https_port, &site_ca).map_err(|e| {
                format!(
                    "{e}\n--- agent ---\n{}\n--- envoy ---\n{}",
                    agent.proc.tail(20),
                    envoy.proc.tail(20)
                )
            })?;
            if body == "web" {
                Ok(())
            } else {
                Err(format!("answered {body:?}"))
            }
        },
    )
    .await;

    // An AuthorizationPolicy selecting the gateway: /admin refused there, / still served.
    std::fs::write(
        mesh.dir.path().join("config/gateway-policy.yaml"),
        format!(
            "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: no-admin, namespace: {GW_NS}}}\nspec:\n  selector: {{matchLabels: {{istio: ingress}}}}\n  action: DENY\n  rules: [{{to: [{{operation: {{paths: [\"/admin*\"]}}}}]}}]\n"
        ),
    )
    .unwrap();
    mesh.eventually(
        "the gateway enforces its AuthorizationPolicy",
        Duration::from_secs(60),
        async || {
            let admin = curl_https_path(https_port, &site_ca, "/admin")?;
            let root = curl_https_path(https_port, &site_ca, "/")?;
            if admin.contains("RBAC: access denied") && root == "web" {
                Ok(())
            } else {
                Err(format!("/admin answered {admin:?}, / answered {root:?}"))
            }
        },
    )
    .await;
}
