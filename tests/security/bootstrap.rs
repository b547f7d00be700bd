//! Envoy bootstraps as pilot-agent writes them for a sidecar (or router): ADS through the
//! agent's Unix socket `etc/istio/proxy/XDS` (cluster `xds-grpc`), SDS from the agent's
//! `workload-spiffe-uds/socket` (cluster `sds-grpc`). Shoal generates no mesh mTLS yet
//! (ISTIO_MUTUAL), so the workload certificate is put to use by two static listeners
//! the test adds: `mtls-in` (mTLS with `default`, peers checked against `ROOTCA` and their
//! SPIFFE ID, to the local app) and `to-peer` (plain in, mTLS to the peer's `mtls-in`).

use crate::mesh::Agent;

pub struct Node<'a> {
    pub kind: &'a str,
    pub ip: &'a str,
    pub namespace: &'a str,
    pub pod: &'a str,
    pub service_account: &'a str,
    pub labels: &'a str,
    /// `GRPC` (state of the world) or `DELTA_GRPC`: the agent proxies both.
    pub api_type: &'a str,
}

/// The mTLS pair of static listeners; absent for a router.
pub struct Mtls<'a> {
    pub in_port: u16,
    pub app_port: u16,
    /// The peer's SPIFFE ID (both ways: the test's two workloads call each other).
    pub peer_spiffe: &'a str,
    pub to_peer_port: u16,
    pub peer_in_port: u16,
}

fn sds(name: &str) -> String {
    format!(
        "{{name: {name}, sds_config: {{resource_api_version: V3, api_config_source: {{api_type: GRPC, \
         transport_api_version: V3, grpc_services: [{{envoy_grpc: {{cluster_name: sds-grpc}}}}]}}}}}}"
    )
}

fn tls_context(peer_spiffe: &str) -> String {
    format!(
        "common_tls_context:\n          tls_certificate_sds_secret_configs: [{}]\n          \
         combined_validation_context:\n            default_validation_context: \
         {{match_typed_subject_alt_names: [{{san_type: URI, matcher: {{exact: \"{peer_spiffe}\"}}}}]}}\n            \
         validation_context_sds_secret_config: {}",
        sds("default"),
        sds("ROOTCA")
    )
}

fn hcm(prefix: &str, cluster: &str) -> String {
    format!(
        r#"      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {prefix}
          route_config: {{virtual_hosts: [{{name: all, domains: ["*"], routes: [{{match: {{prefix: "/"}}, route: {{cluster: {cluster}}}}}]}}]}}
          http_filters: [{{name: envoy.filters.http.router, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}}}]
"#
    )
}

fn uds_cluster(name: &str, path: &std::path::Path) -> String {
    format!(
        r#"  - name: {name}
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: {name}
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{pipe: {{path: "{}"}}}}}}}}]}}]
"#,
        path.display()
    )
}

fn tcp_cluster(name: &str, port: u16, tls: Option<&str>) -> String {
    let socket = tls.map_or(String::new(), |peer| {
        format!(
            "    transport_socket:\n      name: envoy.transport_sockets.tls\n      typed_config:\n        \
             \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\n        {}\n",
            tls_context(peer)
        )
    });
    format!(
        r#"  - name: {name}
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: {name}
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}}}]}}]
{socket}"#
    )
}

pub fn bootstrap(
    node: &Node<'_>,
    agent: &Agent,
    admin_port: u16,
    mtls: Option<&Mtls<'_>>,
) -> String {
    let Node {
        kind,
        ip,
        namespace,
        pod,
        service_account,
        labels,
        api_type,
    } = *node;
    let mut clusters = uds_cluster("xds-grpc", &agent.xds_socket());
    clusters.push_str(&uds_cluster("sds-grpc", &agent.sds_socket()));
    let mut listeners = String::new();
    if let Some(m) = mtls {
        clusters.push_str(&tcp_cluster("local-app", m.app_port, None));
        clusters.push_str(&tcp_cluster(
            "peer-mtls",
            m.peer_in_port,
            Some(m.peer_spiffe),
        ));
        listeners = format!(
            r#"  listeners:
  - name: mtls-in
    address: {{socket_address: {{address: 127.0.0.1, port_value: {in_port}}}}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          require_client_certificate: true
          {ctx}
      filters:
{hcm_in}  - name: to-peer
    address: {{socket_address: {{address: 127.0.0.1, port_value: {to_peer}}}}}
    filter_chains:
    - filters:
{hcm_out}"#,
            in_port = m.in_port,
            to_peer = m.to_peer_port,
            ctx = tls_context(m.peer_spiffe).replace("\n        ", "\n          "),
            hcm_in = hcm("mtls_in", "local-app"),
            hcm_out = hcm("to_peer", "peer-mtls"),
        );
    }
    format!(
        r#"node:
  id: {kind}~{ip}~{pod}.{namespace}~{namespace}.svc.cluster.local
  cluster: {pod}.{namespace}
  metadata:
    NAMESPACE: {namespace}
    SERVICE_ACCOUNT: {service_account}
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
{clusters}{listeners}"#
    )
}
