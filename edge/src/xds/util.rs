//! Small builders for the Envoy protos every generator uses, and Istio's well-known names.

use super::XdsResource;
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, SocketAddress, address,
    config_source, socket_address,
};
use envoy_types::pb::google::protobuf::{Any, Duration, UInt32Value};
use prost::{Message, Name};
use std::sync::Arc;

/// Catch-all for traffic to unknown destinations under `ALLOW_ANY`.
pub const PASSTHROUGH_CLUSTER: &str = "PassthroughCluster";
/// Drops traffic (`REGISTRY_ONLY`, unresolved destinations).
pub const BLACKHOLE_CLUSTER: &str = "BlackHoleCluster";
/// Forwards inbound traffic nothing else claimed to the original destination.
pub const INBOUND_PASSTHROUGH_CLUSTER: &str = "InboundPassthroughCluster";
pub const VIRTUAL_OUTBOUND: &str = "virtualOutbound";
pub const VIRTUAL_INBOUND: &str = "virtualInbound";
/// Where iptables redirects outbound and inbound traffic (Istio's defaults).
pub const VIRTUAL_OUTBOUND_PORT: u32 = 15001;
pub const VIRTUAL_INBOUND_PORT: u32 = 15006;
/// The source address of inbound passthrough connections, which iptables exempts from
/// redirection so they do not loop back into the proxy.
pub const INBOUND_PASSTHROUGH_BIND: &str = "127.0.0.6";
pub const WILDCARD_IP: &str = "0.0.0.0";
/// `virtualInbound`'s chain for connections to 15006 itself, which would otherwise loop.
pub const VIRTUAL_INBOUND_BLACKHOLE_CHAIN: &str = "virtualInbound-blackhole";
/// `virtualInbound`'s chain for sniffed HTTP to ports no service declares.
pub const VIRTUAL_INBOUND_CATCH_ALL_HTTP_CHAIN: &str = "virtualInbound-catchall-http";
/// The transport protocol Envoy reports when no inspector found TLS.
pub const RAW_BUFFER: &str = "raw_buffer";
/// A filter chain match on connections the TLS inspector found to be TLS.
pub const TLS_TRANSPORT: &str = "tls";
/// What the HTTP inspector reports for plaintext HTTP (Istio matches HTTP/1.0 only with
/// `PILOT_HTTP10`; left as TCP, such requests still pass).
pub const PLAINTEXT_HTTP_ALPNS: [&str; 2] = ["http/1.1", "h2c"];

/// Istio's outbound cluster name: `outbound|<port>|<subset>|<host>`.
pub fn cluster_name(port: u32, subset: &str, host: &str) -> String {
    format!("outbound|{port}|{subset}|{host}")
}

/// The SNI a sidecar's mTLS sends to a cluster's endpoints, and the name of the SNI-DNAT
/// cluster an east-west gateway (`AUTO_PASSTHROUGH`) forwards it to, as Istio builds both
/// (`BuildDNSSrvSubsetKey`): `outbound_.<port>_.<subset>_.<host>`, `_` for no subset
/// (`outbound_.9080_._.reviews.shop.svc.cluster.local`).
pub fn mesh_sni(port: u32, subset: &str, host: &str) -> String {
    format!("outbound_.{port}_.{subset}_.{host}")
}

/// Istio's inbound cluster (and inbound route configuration) name: `inbound|<port>||`,
/// after the workload port.
pub fn inbound_cluster_name(port: u32) -> String {
    format!("inbound|{port}||")
}

/// Istio's percentage (0–100, with fractions) as Envoy's fraction of a million.
pub fn fractional_percent(percent: f64) -> envoy_types::pb::envoy::r#type::v3::FractionalPercent {
    use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent};
    FractionalPercent {
        numerator: (percent.clamp(0.0, 100.0) * 10_000.0).round() as u32,
        denominator: fractional_percent::DenominatorType::Million as i32,
    }
}

/// Encodes `msg` once into a shareable resource.
pub fn resource<M: Message + Name>(name: impl Into<String>, msg: &M) -> Arc<XdsResource> {
    Arc::new(XdsResource::new(
        name.into(),
        &M::type_url(),
        msg.encode_to_vec(),
    ))
}

pub fn any<M: Message + Name>(msg: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: msg.encode_to_vec(),
    }
}

/// Resources come from the same ADS stream that asked for the referencing resource.
pub fn ads_config_source() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

pub fn socket_address(ip: &str, port: u32) -> SocketAddress {
    SocketAddress {
        address: ip.to_string(),
        port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
        ..Default::default()
    }
}

pub fn address(ip: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(socket_address(ip, port))),
    }
}

pub fn u32_value(value: u32) -> UInt32Value {
    UInt32Value { value }
}

pub fn duration(d: std::time::Duration) -> Duration {
    Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// An Istio duration string (`"5s"`, `"250ms"`), or `None` when absent or malformed.
/// Validation at ingest already rejected malformed values, so `None` here is only a guard.
pub fn parse_duration(s: Option<&str>) -> Option<Duration> {
    let s = s?;
    match shoal_proto::config::validate::parse_duration(s) {
        Ok(d) => Some(duration(d)),
        Err(e) => {
            tracing::warn!(value = s, error = e.0, "ignoring malformed duration");
            None
        }
    }
}

/// Sorts by name, moving each item once: Envoy protos are kilobytes each (a `Cluster` is
/// over 3 KB), so a plain sort of thousands of them spends its time in `memcpy`.
pub fn sort_by_name<T>(items: Vec<T>, name: impl Fn(&T) -> &str) -> Vec<T> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|a, b| name(&items[*a]).cmp(name(&items[*b])));
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Whether `addr` is a literal IP address (EDS endpoints must be; DNS names are not).
pub fn is_ip(addr: &str) -> bool {
    addr.parse::<std::net::IpAddr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_durations() {
        assert_eq!(
            cluster_name(80, "v1", "r.ns.svc.cluster.local"),
            "outbound|80|v1|r.ns.svc.cluster.local"
        );
        assert_eq!(inbound_cluster_name(8080), "inbound|8080||");
        assert_eq!(
            parse_duration(Some("1.5s")),
            Some(Duration {
                seconds: 1,
                nanos: 500_000_000
            })
        );
        assert_eq!(parse_duration(Some("bogus")), None);
        assert!(is_ip("10.0.0.1") && is_ip("::1") && !is_ip("example.com"));
        let sorted = sort_by_name(vec!["b", "c", "a"], |s| s);
        assert_eq!(sorted, ["a", "b", "c"]);
    }
}
