//! A real Envoy, bootstrapped to an ADS server as an Istio sidecar (or router) with
//! `INTERCEPTION_MODE: NONE`.

use super::process::Proc;
use super::tool;
use std::path::Path;
use std::time::Duration;

pub struct Envoy {
    pub proc: Proc,
    pub admin_port: u16,
}

/// How Envoy speaks ADS: `api_type` in its bootstrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdsApi {
    /// State of the world (`GRPC`).
    Sotw,
    /// Incremental (`DELTA_GRPC`).
    Delta,
}

impl XdsApi {
    fn api_type(self) -> &'static str {
        match self {
            XdsApi::Sotw => "GRPC",
            XdsApi::Delta => "DELTA_GRPC",
        }
    }
}

/// The bootstrap of a sidecar in `namespace` whose ADS cluster lists every port of
/// `xds_ports` (edges behind a Service: Envoy picks one, and another when it fails).
pub fn bootstrap(
    api: XdsApi,
    node_ip: &str,
    namespace: &str,
    pod: &str,
    xds_ports: &[u16],
    admin_port: u16,
) -> String {
    let node = Node {
        kind: "sidecar",
        ip: node_ip,
        namespace,
        pod,
        labels: &format!("{{app: {pod}}}"),
    };
    bootstrap_node(api, &node, xds_ports, admin_port)
}

/// Who an Envoy is to Shoal: its node type (`sidecar` or `router`), address, pod and
/// labels (a YAML flow map).
pub struct Node<'a> {
    pub kind: &'a str,
    pub ip: &'a str,
    pub namespace: &'a str,
    pub pod: &'a str,
    pub labels: &'a str,
}

/// [`bootstrap`] for any [`Node`].
pub fn bootstrap_node(api: XdsApi, node: &Node<'_>, xds_ports: &[u16], admin_port: u16) -> String {
    let Node {
        kind,
        ip: node_ip,
        namespace,
        pod,
        labels,
    } = *node;
    let api_type = api.api_type();
    let endpoints: String = xds_ports
        .iter()
        .map(|port| {
            format!(
                "        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}\n"
            )
        })
        .collect();
    format!(
        r#"node:
  id: {kind}~{node_ip}~{pod}.{namespace}~{namespace}.svc.cluster.local
  cluster: {pod}.{namespace}
  metadata:
    NAMESPACE: {namespace}
    INTERCEPTION_MODE: NONE
    LABELS: {labels}
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {admin_port}}}}}
dynamic_resources:
  ads_config:
    api_type: {api_type}
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services: [{{envoy_grpc: {{cluster_name: xds-grpc}}}}]
  cds_config: {{ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 1s}}
  lds_config: {{ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 1s}}
static_resources:
  clusters:
  - name: xds-grpc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: xds-grpc
      endpoints:
      - lb_endpoints:
{endpoints}"#
    )
}

impl Envoy {
    pub fn start(name: &str, bootstrap_yaml: &str, admin_port: u16, dir: &Path) -> Envoy {
        let config = dir.join(format!("{name}-bootstrap.yaml"));
        std::fs::write(&config, bootstrap_yaml).expect("write bootstrap");
        let proc = Proc::spawn(
            name,
            &tool("envoy", "SHOAL_ENVOY"),
            &[
                "-c".into(),
                config.display().to_string(),
                // Envoy picks a base ID no other Envoy holds: one derived from a free port
                // collided when two Envoys of a test drew the same port (CI saw b fail to
                // bind its domain socket, errno 98).
                "--use-dynamic-base-id".into(),
                "--concurrency".into(),
                "1".into(),
                "--log-level".into(),
                "warn".into(),
                "--drain-time-s".into(),
                "1".into(),
            ],
            &[],
            dir,
        );
        Envoy { proc, admin_port }
    }

    pub fn admin(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.admin_port)
    }

    /// A counter from Envoy's `/stats`, 0 when absent.
    pub async fn stat(&self, name: &str) -> u64 {
        let text = reqwest::get(self.admin(&format!("/stats?filter=^{}$", regex_escape(name))))
            .await
            .ok();
        let Some(resp) = text else { return 0 };
        let body = resp.text().await.unwrap_or_default();
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// The port of the ADS server Envoy's stream is on: the `xds-grpc` host with an
    /// active connection (`/clusters`).
    pub async fn xds_port(&self) -> Option<u16> {
        let body = reqwest::get(self.admin("/clusters"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        body.lines().find_map(|line| {
            let rest = line.strip_prefix("xds-grpc::127.0.0.1:")?;
            let (port, stat) = rest.split_once("::")?;
            let active: u64 = stat.strip_prefix("cx_active::")?.trim().parse().ok()?;
            (active > 0).then(|| port.parse().ok()).flatten()
        })
    }

    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        super::process::wait_http_ok(&self.admin("/ready"), timeout).await
    }
}

fn regex_escape(s: &str) -> String {
    s.replace('.', "\\.")
}
