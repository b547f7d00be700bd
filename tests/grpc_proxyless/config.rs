//! The Kubernetes and Istio objects of the test, written as the cluster would hold them:
//! Service `echo` with a `grpc-` port, a ready Pod and an EndpointSlice per server (every
//! Pod has the loopback address, so servers differ by port only), and a DestinationRule
//! with a subset per version.

/// The namespace of the service and of the client.
pub const NS: &str = "grpc";

/// One server behind the service.
pub struct Backend {
    pub pod: &'static str,
    pub version: &'static str,
    pub port: u16,
}

/// The label by which a workload says it uses xDS credentials (Istio's auto mTLS label).
pub const TLS_MODE: (&str, &str) = ("security.istio.io/tlsMode", "istio");
/// The servers' service account.
pub const SERVER_ACCOUNT: &str = "echo";
/// The client's service account.
pub const CLIENT_ACCOUNT: &str = "client";

/// The SPIFFE ID of service account `sa` of [`NS`].
pub fn spiffe(sa: &str) -> String {
    format!("spiffe://cluster.local/ns/{NS}/sa/{sa}")
}

pub fn fqdn(name: &str) -> String {
    format!("{name}.{NS}.svc.cluster.local")
}

/// Namespace, Service `echo` on `port` (named `grpc-echo`) and its `backends`; with
/// `meshed`, the Pods are labelled [`TLS_MODE`] and run as [`SERVER_ACCOUNT`].
pub fn service(port: u16, backends: &[Backend], meshed: bool) -> String {
    let (tls_label, account) = if meshed {
        (
            format!(", {}: {}", TLS_MODE.0, TLS_MODE.1),
            format!("spec: {{serviceAccountName: {SERVER_ACCOUNT}}}\n"),
        )
    } else {
        (String::new(), String::new())
    };
    let mut docs = vec![
        format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {NS}\n"),
        format!(
            r#"apiVersion: v1
kind: Service
metadata:
  name: echo
  namespace: {NS}
spec:
  selector: {{app: echo}}
  ports:
  - name: grpc-echo
    port: {port}
    targetPort: 8080
"#
        ),
    ];
    for b in backends {
        docs.push(format!(
            r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
  namespace: {NS}
  labels: {{app: echo, version: {version}{tls_label}}}
{account}status:
  podIP: 127.0.0.1
  conditions: [{{type: Ready, status: "True"}}]
"#,
            pod = b.pod,
            version = b.version
        ));
        docs.push(format!(
            r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {pod}
  namespace: {NS}
  labels: {{kubernetes.io/service-name: echo}}
addressType: IPv4
ports:
- name: grpc-echo
  port: {port}
endpoints:
- addresses: [127.0.0.1]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: {pod}, namespace: {NS}}}
"#,
            pod = b.pod,
            port = b.port
        ));
    }
    docs.join("---\n")
}

pub fn destination_rule() -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: echo
  namespace: {NS}
spec:
  host: echo
  subsets:
  - {{name: v1, labels: {{version: v1}}}}
  - {{name: v2, labels: {{version: v2}}}}
"#
    )
}

/// The node ID of `pod`: a sidecar-typed node, as Istio's agent names proxyless
/// workloads.
pub fn node_id(pod: &str) -> String {
    format!("sidecar~127.0.0.1~{pod}.{NS}~{NS}.svc.cluster.local")
}

/// Where a workload's certificate, key and root are (Istio's agent writes them there
/// and names them in the bootstrap's `certificate_providers`).
pub struct CertFiles {
    pub cert_chain: String,
    pub key: String,
    pub root: String,
}

/// A workload's xDS bootstrap: Shoal's ADS address, and a node that Shoal serves as a
/// proxyless gRPC workload (`GENERATOR: grpc`) `pod` of [`NS`] with `labels`, as
/// Istio's agent writes it: the server listener name template, and, with `certs`, the
/// certificate provider `default` (a `file_watcher` over them).
pub fn grpc_bootstrap(
    xds_port: u16,
    pod: &str,
    labels: &[(&str, &str)],
    certs: Option<&CertFiles>,
) -> String {
    let labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let mut bootstrap = serde_json::json!({
        "xds_servers": [{
            "server_uri": format!("127.0.0.1:{xds_port}"),
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        "node": {
            "id": node_id(pod),
            "metadata": {"GENERATOR": "grpc", "LABELS": labels},
        },
        "server_listener_resource_name_template": "xds.istio.io/grpc/lds/inbound/%s",
    });
    if let Some(c) = certs {
        bootstrap["certificate_providers"] = serde_json::json!({
            "default": {
                "plugin_name": "file_watcher",
                "config": {
                    "certificate_file": c.cert_chain,
                    "private_key_file": c.key,
                    "ca_certificate_file": c.root,
                    "refresh_interval": "900s",
                },
            },
        });
    }
    bootstrap.to_string()
}
