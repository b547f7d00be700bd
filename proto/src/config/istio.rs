//! `networking.istio.io` specs, as users write them (camelCase YAML).
//!
//! Only the fields Shoal acts on are modelled; others are accepted and ignored, as an
//! older istiod ignores fields it does not know. A field of the wrong type is an error.
//! Oneofs are structs of options (not untagged enums) so the types stay encodable by
//! non-self-describing codecs in snapshots.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualService {
    pub hosts: Vec<String>,
    pub gateways: Vec<String>,
    pub http: Vec<HttpRoute>,
    pub tls: Vec<TlsRoute>,
    pub tcp: Vec<TcpRoute>,
    pub export_to: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRoute {
    pub name: String,
    #[serde(rename = "match")]
    pub matches: Vec<HttpMatchRequest>,
    pub route: Vec<HttpRouteDestination>,
    pub redirect: Option<HttpRedirect>,
    pub direct_response: Option<HttpDirectResponse>,
    /// Routes of another VirtualService (one without hosts) take this route's place.
    pub delegate: Option<Delegate>,
    pub rewrite: Option<HttpRewrite>,
    /// Istio duration string, e.g. `"5s"`, `"250ms"`.
    pub timeout: Option<String>,
    pub retries: Option<HttpRetry>,
    pub fault: Option<HttpFaultInjection>,
    pub mirror: Option<Destination>,
    /// Deprecated integer form of `mirror_percentage`.
    pub mirror_percent: Option<u32>,
    pub mirror_percentage: Option<Percent>,
    pub mirrors: Vec<HttpMirrorPolicy>,
    pub cors_policy: Option<CorsPolicy>,
    pub headers: Option<Headers>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpDirectResponse {
    pub status: u32,
    pub body: Option<HttpBody>,
}

/// One of `string` or `bytes` (base64).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpBody {
    pub string: Option<String>,
    pub bytes: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Delegate {
    pub name: String,
    /// Empty: the delegating VirtualService's namespace.
    pub namespace: String,
}

/// A percentage in [0, 100], with fractions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Percent {
    pub value: f64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpFaultInjection {
    pub delay: Option<FaultDelay>,
    pub abort: Option<FaultAbort>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultDelay {
    pub fixed_delay: Option<String>,
    pub percentage: Option<Percent>,
    /// Deprecated integer form of `percentage`.
    pub percent: Option<u32>,
}

/// One of `http_status` or `grpc_status` (a gRPC code name, e.g. `UNAVAILABLE`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FaultAbort {
    pub http_status: Option<u32>,
    pub grpc_status: Option<String>,
    pub percentage: Option<Percent>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMirrorPolicy {
    pub destination: Destination,
    pub percentage: Option<Percent>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CorsPolicy {
    pub allow_origins: Vec<StringMatch>,
    /// Deprecated exact origins.
    pub allow_origin: Vec<String>,
    pub allow_methods: Vec<String>,
    pub allow_headers: Vec<String>,
    pub expose_headers: Vec<String>,
    pub max_age: Option<String>,
    pub allow_credentials: Option<bool>,
    /// `FORWARD` or `IGNORE`; unset forwards.
    pub unmatched_preflights: Option<String>,
}

/// Header manipulation, on requests and responses.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Headers {
    pub request: Option<HeaderOperations>,
    pub response: Option<HeaderOperations>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeaderOperations {
    pub set: BTreeMap<String, String>,
    pub add: BTreeMap<String, String>,
    pub remove: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpMatchRequest {
    pub name: String,
    pub uri: Option<StringMatch>,
    pub scheme: Option<StringMatch>,
    pub method: Option<StringMatch>,
    pub authority: Option<StringMatch>,
    pub headers: BTreeMap<String, StringMatch>,
    pub query_params: BTreeMap<String, StringMatch>,
    pub without_headers: BTreeMap<String, StringMatch>,
    pub port: Option<u32>,
    pub source_labels: BTreeMap<String, String>,
    pub source_namespace: String,
    pub gateways: Vec<String>,
    pub ignore_uri_case: bool,
}

/// Istio's `StringMatch` oneof: exactly one of the three is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StringMatch {
    pub exact: Option<String>,
    pub prefix: Option<String>,
    pub regex: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRouteDestination {
    pub destination: Destination,
    pub weight: i32,
    pub headers: Option<Headers>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Destination {
    pub host: String,
    pub subset: String,
    pub port: Option<PortSelector>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortSelector {
    pub number: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRedirect {
    pub uri: String,
    pub authority: String,
    pub port: Option<u32>,
    pub scheme: String,
    pub redirect_code: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRewrite {
    pub uri: String,
    pub authority: String,
    pub uri_regex_rewrite: Option<RegexRewrite>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegexRewrite {
    #[serde(rename = "match")]
    pub pattern: String,
    pub rewrite: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpRetry {
    pub attempts: i32,
    pub per_try_timeout: Option<String>,
    pub retry_on: String,
    pub retry_remote_localities: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsRoute {
    #[serde(rename = "match")]
    pub matches: Vec<TlsMatchAttributes>,
    pub route: Vec<RouteDestination>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TlsMatchAttributes {
    pub sni_hosts: Vec<String>,
    pub destination_subnets: Vec<String>,
    pub port: Option<u32>,
    pub source_labels: BTreeMap<String, String>,
    pub gateways: Vec<String>,
    pub source_namespace: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpRoute {
    #[serde(rename = "match")]
    pub matches: Vec<L4MatchAttributes>,
    pub route: Vec<RouteDestination>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct L4MatchAttributes {
    pub destination_subnets: Vec<String>,
    pub port: Option<u32>,
    pub source_labels: BTreeMap<String, String>,
    /// Narrows the VirtualService's `gateways` for this match.
    pub gateways: Vec<String>,
    pub source_namespace: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteDestination {
    pub destination: Destination,
    pub weight: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DestinationRule {
    pub host: String,
    pub traffic_policy: Option<TrafficPolicy>,
    pub subsets: Vec<Subset>,
    pub export_to: Vec<String>,
    pub workload_selector: Option<WorkloadSelector>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Subset {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub traffic_policy: Option<TrafficPolicy>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficPolicy {
    pub load_balancer: Option<LoadBalancerSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub outlier_detection: Option<OutlierDetection>,
    // Boxed: rarely set, and large.
    pub tls: Option<Box<ClientTlsSettings>>,
    pub port_level_settings: Vec<PortTrafficPolicy>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortTrafficPolicy {
    pub port: Option<PortSelector>,
    pub load_balancer: Option<LoadBalancerSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub outlier_detection: Option<OutlierDetection>,
    pub tls: Option<Box<ClientTlsSettings>>,
}

/// TLS the sidecar originates to the destination (Istio's `ClientTLSSettings`). The
/// certificate paths are files on the proxy's host, as in Istio.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientTlsSettings {
    /// `DISABLE`, `SIMPLE`, `MUTUAL` or `ISTIO_MUTUAL`; unset is `DISABLE`.
    pub mode: Option<String>,
    pub client_certificate: String,
    pub private_key: String,
    /// Empty: the system's trusted roots.
    pub ca_certificates: String,
    pub ca_crl: String,
    /// A Secret holding the certificates: gateways only (reported on sidecars).
    pub credential_name: String,
    pub subject_alt_names: Vec<String>,
    pub sni: String,
    pub insecure_skip_verify: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancerSettings {
    /// `ROUND_ROBIN`, `LEAST_CONN`, `LEAST_REQUEST`, `RANDOM` or `PASSTHROUGH`.
    pub simple: Option<String>,
    // Boxed, as the locality setting: every DestinationRule would carry its size.
    pub consistent_hash: Option<Box<ConsistentHashLb>>,
    // Boxed: rarely set, and it would double the size of every DestinationRule.
    pub locality_lb_setting: Option<Box<LocalityLbSetting>>,
    /// Slow start for new endpoints: validated as Istio does, not implemented (reported).
    pub warmup: Option<Box<Warmup>>,
}

/// Istio's `WarmupConfiguration`: traffic to a new endpoint ramps up over `duration`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Warmup {
    /// Required.
    pub duration: Option<String>,
    /// The share of traffic a new endpoint starts with, in [0, 100].
    pub minimum_percent: Option<f64>,
    /// How fast traffic grows; must be above 0.
    pub aggression: Option<f64>,
}

/// Locality-aware load balancing: either `distribute` traffic by weight from the
/// client's locality, or `failover` (priorities: same locality first, then outward;
/// applied only with outlier detection, which is what lets Envoy fail over).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityLbSetting {
    pub distribute: Vec<LocalityDistribute>,
    pub failover: Vec<LocalityFailover>,
    /// Label-based failover ordering: not implemented (reported when set).
    pub failover_priority: Vec<String>,
    /// Unset means enabled, as in Istio's mesh default.
    pub enabled: Option<bool>,
}

/// From clients in `from` (`region/zone/subzone`, `*` ending a prefix), send to the
/// localities of `to` by percentage (summing to 100).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityDistribute {
    pub from: String,
    pub to: BTreeMap<String, u32>,
}

/// Clients in region `from` fail over to region `to` before any other region.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityFailover {
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsistentHashLb {
    // The hash key: one of these four.
    pub http_header_name: Option<String>,
    pub http_cookie: Option<HttpCookie>,
    pub use_source_ip: Option<bool>,
    pub http_query_parameter_name: Option<String>,
    // The algorithm: one of these two, else a ring hash of `minimum_ring_size`.
    pub ring_hash: Option<RingHash>,
    pub maglev: Option<Maglev>,
    /// Deprecated: `ring_hash.minimum_ring_size`.
    pub minimum_ring_size: Option<u64>,
}

/// Hash on a cookie; with a `ttl`, Envoy sets the cookie when the request has none.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpCookie {
    pub name: String,
    pub path: String,
    pub ttl: Option<String>,
    pub attributes: Vec<CookieAttribute>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CookieAttribute {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RingHash {
    pub minimum_ring_size: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Maglev {
    pub table_size: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionPoolSettings {
    pub tcp: Option<TcpSettings>,
    pub http: Option<HttpSettings>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpSettings {
    pub max_connections: Option<i32>,
    pub connect_timeout: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpSettings {
    pub http1_max_pending_requests: Option<i32>,
    pub http2_max_requests: Option<i32>,
    pub max_requests_per_connection: Option<i32>,
    pub max_retries: Option<i32>,
    pub idle_timeout: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutlierDetection {
    pub consecutive_5xx_errors: Option<u32>,
    pub consecutive_gateway_errors: Option<u32>,
    pub interval: Option<String>,
    pub base_ejection_time: Option<String>,
    pub max_ejection_percent: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadSelector {
    #[serde(alias = "matchLabels")]
    pub labels: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceEntry {
    pub hosts: Vec<String>,
    pub addresses: Vec<String>,
    pub ports: Vec<ServiceEntryPort>,
    /// `MESH_EXTERNAL` (default) or `MESH_INTERNAL`.
    pub location: Option<String>,
    /// `NONE` (default), `STATIC`, `DNS` or `DNS_ROUND_ROBIN`.
    pub resolution: Option<String>,
    pub endpoints: Vec<WorkloadEntry>,
    pub workload_selector: Option<WorkloadSelector>,
    pub export_to: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceEntryPort {
    pub number: u32,
    pub protocol: String,
    pub name: String,
    pub target_port: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadEntry {
    pub address: String,
    pub ports: BTreeMap<String, u32>,
    pub labels: BTreeMap<String, String>,
    pub network: String,
    pub locality: String,
    pub weight: u32,
    pub service_account: String,
}

/// A template for the WorkloadEntries of one group of VMs (Istio's `WorkloadGroup`).
/// Istio creates entries from it when VMs register; Shoal has no auto-registration, so
/// it serves as the template that entries naming the group inherit from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadGroup {
    pub metadata: Option<WorkloadGroupMetadata>,
    /// Required; its `address` is left empty (each entry has its own).
    pub template: Option<WorkloadEntry>,
    /// Read and validated; health checking is not done by Shoal.
    pub probe: Option<ReadinessProbe>,
}

/// Labels and annotations a WorkloadGroup's entries get.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadGroupMetadata {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// How a group's workloads are checked for readiness: exactly one method is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReadinessProbe {
    pub initial_delay_seconds: i32,
    pub timeout_seconds: i32,
    pub period_seconds: i32,
    pub success_threshold: i32,
    pub failure_threshold: i32,
    pub http_get: Option<HttpHealthCheck>,
    pub tcp_socket: Option<TcpHealthCheck>,
    pub exec: Option<ExecHealthCheck>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHealthCheck {
    pub path: String,
    pub port: u32,
    pub host: String,
    /// `HTTP` or `HTTPS` (empty is `HTTP`).
    pub scheme: String,
    pub http_headers: Vec<ProbeHeader>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProbeHeader {
    pub name: String,
    pub value: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TcpHealthCheck {
    pub host: String,
    pub port: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecHealthCheck {
    pub command: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sidecar {
    pub workload_selector: Option<WorkloadSelector>,
    /// Listeners for the workload's inbound traffic; when present they replace those the
    /// workload's services would give it.
    pub ingress: Vec<IngressListener>,
    pub egress: Vec<EgressListener>,
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
}

/// One Sidecar `ingress` listener: a port of the workload and where its traffic goes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressListener {
    pub port: Option<SidecarPort>,
    /// The address a NONE-capture listener binds (the proxy's IP when empty).
    pub bind: String,
    /// `DEFAULT`, `IPTABLES` or `NONE` (empty is `DEFAULT`).
    pub capture_mode: String,
    /// `127.0.0.1:PORT`, `0.0.0.0:PORT` (the workload's IP), `[::1]:PORT`, `[::]:PORT` or
    /// `unix:///path`; empty forwards to the original destination.
    pub default_endpoint: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EgressListener {
    pub port: Option<SidecarPort>,
    pub bind: String,
    pub capture_mode: String,
    /// `namespace/dnsName` entries: `./*`, `istio-system/*`, `*/foo.example.com`, `~/*`.
    pub hosts: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SidecarPort {
    pub number: u32,
    pub protocol: String,
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutboundTrafficPolicy {
    /// `ALLOW_ANY` (default) or `REGISTRY_ONLY`.
    pub mode: String,
    /// With `ALLOW_ANY`: where traffic to unknown hosts goes instead of passing through
    /// (a host with a port, and optionally a subset).
    pub egress_proxy: Option<Destination>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gateway {
    pub selector: BTreeMap<String, String>,
    pub servers: Vec<GatewayServer>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayServer {
    pub port: Option<GatewayPort>,
    /// `host` or `namespace/host`: which VirtualServices may bind to this server.
    pub hosts: Vec<String>,
    pub tls: Option<ServerTlsSettings>,
    pub bind: String,
    pub name: String,
    pub default_endpoint: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayPort {
    pub number: u32,
    /// `HTTP`, `HTTPS`, `GRPC`, `HTTP2`, `MONGO`, `TCP` or `TLS`.
    pub protocol: String,
    pub name: String,
    /// Deprecated in Istio: the port the gateway pod listens on.
    pub target_port: Option<u32>,
}

/// A Gateway server's TLS settings (Istio's `ServerTLSSettings`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerTlsSettings {
    /// Redirects plain HTTP requests to HTTPS (301).
    pub https_redirect: bool,
    /// `PASSTHROUGH`, `SIMPLE`, `MUTUAL`, `AUTO_PASSTHROUGH`, `ISTIO_MUTUAL` or
    /// `OPTIONAL_MUTUAL`; unset is `PASSTHROUGH`.
    pub mode: String,
    /// A Secret in the gateway's namespace, served over SDS.
    pub credential_name: String,
    /// File paths on the gateway, where no `credentialName` is given.
    pub server_certificate: String,
    pub private_key: String,
    pub ca_certificates: String,
    pub subject_alt_names: Vec<String>,
    pub verify_certificate_spki: Vec<String>,
    pub verify_certificate_hash: Vec<String>,
    /// `TLS_AUTO`, `TLSV1_0` ... `TLSV1_3`.
    pub min_protocol_version: String,
    pub max_protocol_version: String,
    pub cipher_suites: Vec<String>,
}
