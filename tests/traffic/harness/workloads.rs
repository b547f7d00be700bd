//! The Kubernetes side of a test mesh, written as the cluster would hold it: a
//! Namespace, a Service, and for each backend a ready Pod (labels `app` and `version`,
//! which DestinationRule subsets select) and an EndpointSlice naming its port. Every
//! Pod has the loopback address, so backends of one service differ by port only.

/// The Namespace the test client (the sidecar) runs in.
pub const CLIENT_NS: &str = "traffic";

/// One backend, as the Pod behind a service.
#[derive(Clone, Debug)]
pub struct Workload {
    pub pod: String,
    pub version: String,
    pub port: u16,
}

impl Workload {
    pub fn new(pod: &str, version: &str, port: u16) -> Workload {
        Workload {
            pod: pod.to_string(),
            version: version.to_string(),
            port,
        }
    }
}

/// `name.namespace.svc.cluster.local`: the host clients send and Envoy routes on.
pub fn fqdn(name: &str, namespace: &str) -> String {
    format!("{name}.{namespace}.svc.cluster.local")
}

pub fn namespace(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
}

/// Service `name` in `namespace` on `port` (named `port_name`, whose prefix is its
/// protocol: `http`, `tcp-...`), selecting `app: name`, with `workloads` behind it.
pub fn service(
    namespace: &str,
    name: &str,
    port_name: &str,
    port: u16,
    workloads: &[Workload],
) -> String {
    let mut docs = vec![format!(
        r#"apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {namespace}
spec:
  selector:
    app: {name}
  ports:
  - name: {port_name}
    port: {port}
    targetPort: 8080
"#
    )];
    for w in workloads {
        docs.push(pod(namespace, name, w));
        docs.push(endpoint_slice(namespace, name, port_name, w));
    }
    docs.join("---\n")
}

fn pod(namespace: &str, app: &str, w: &Workload) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {pod}
  namespace: {namespace}
  labels: {{app: {app}, version: {version}}}
status:
  podIP: 127.0.0.1
  conditions: [{{type: Ready, status: "True"}}]
"#,
        pod = w.pod,
        version = w.version,
    )
}

/// One slice per backend: a slice's ports apply to all its endpoints, and each backend
/// has its own port.
fn endpoint_slice(namespace: &str, service: &str, port_name: &str, w: &Workload) -> String {
    format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {pod}
  namespace: {namespace}
  labels:
    kubernetes.io/service-name: {service}
addressType: IPv4
ports:
- name: {port_name}
  port: {port}
endpoints:
- addresses: [127.0.0.1]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: {pod}, namespace: {namespace}}}
"#,
        pod = w.pod,
        port = w.port,
    )
}
