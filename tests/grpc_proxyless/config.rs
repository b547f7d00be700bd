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

pub fn fqdn(name: &str) -> String {
    format!("{name}.{NS}.svc.cluster.local")
}

/// Namespace, Service `echo` on `port` (named `grpc-echo`) and its `backends`.
pub fn service(port: u16, backends: &[Backend]) -> String {
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
  labels: {{app: echo, version: {version}}}
status:
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

/// The client's node ID: a sidecar-typed node, as Istio's agent names proxyless clients.
pub fn node_id() -> String {
    format!("sidecar~127.0.0.1~client.{NS}~{NS}.svc.cluster.local")
}

/// The client's xDS bootstrap: Shoal's ADS address, and a node that Shoal serves as a
/// proxyless gRPC client (`GENERATOR: grpc`) in [`NS`].
pub fn grpc_bootstrap(xds_port: u16) -> String {
    serde_json::json!({
        "xds_servers": [{
            "server_uri": format!("127.0.0.1:{xds_port}"),
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        "node": {
            "id": node_id(),
            "metadata": {"GENERATOR": "grpc"},
        },
    })
    .to_string()
}
