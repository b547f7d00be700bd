//! A DestinationRule's traffic policy applied to a cluster, as Istio's
//! `cluster_traffic_policy.go` applies it: connection pool, outlier detection, load
//! balancer (TLS is in [`super::tls`]).

use super::discovery;
use crate::xds::util::{any, parse_duration, u32_value};
use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, OutlierDetection as EnvoyOutlier, circuit_breakers::Thresholds,
    cluster,
};
use envoy_types::pb::envoy::config::core::v3::{
    Http1ProtocolOptions, Http2ProtocolOptions, HttpProtocolOptions as CommonHttpOptions,
    UpstreamHttpProtocolOptions,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options,
};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt64Value;
use prost::Name;
use shoal_proto::config::istio::ConsistentHashLb;
use shoal_proto::model::Protocol;
use shoal_proto::push_context::policy::Policy;

/// Istio's default thresholds: effectively unlimited (Envoy's own defaults, e.g. 3
/// parallel retries, cause 503s during rollouts).
pub(super) fn default_thresholds() -> Thresholds {
    Thresholds {
        max_connections: Some(u32_value(u32::MAX)),
        max_pending_requests: Some(u32_value(u32::MAX)),
        max_requests: Some(u32_value(u32::MAX)),
        max_retries: Some(u32_value(u32::MAX)),
        track_remaining: true,
        ..Default::default()
    }
}

fn positive(v: Option<i32>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok()).filter(|v| *v > 0)
}

/// Connection pool → circuit breakers, connect timeout, and HTTP protocol options (idle
/// timeout, requests per connection, HTTP/2 for HTTP/2 and gRPC ports, and `upstream`:
/// the SNI and SAN checks TLS origination takes from each request).
pub(crate) fn apply_connection_pool(
    c: &mut Cluster,
    policy: Policy<'_>,
    protocol: Protocol,
    upstream: Option<UpstreamHttpProtocolOptions>,
) {
    let mut t = default_thresholds();
    let mut idle_timeout = None;
    let mut max_requests_per_connection = None;
    if let Some(pool) = policy.connection_pool {
        if let Some(http) = &pool.http {
            if let Some(v) = positive(http.http2_max_requests) {
                t.max_requests = Some(u32_value(v));
            }
            if let Some(v) = positive(http.http1_max_pending_requests) {
                t.max_pending_requests = Some(u32_value(v));
            }
            if let Some(v) = positive(http.max_retries) {
                t.max_retries = Some(u32_value(v));
            }
            idle_timeout = parse_duration(http.idle_timeout.as_deref());
            max_requests_per_connection = positive(http.max_requests_per_connection);
        }
        if let Some(tcp) = &pool.tcp {
            if let Some(v) = positive(tcp.max_connections) {
                t.max_connections = Some(u32_value(v));
            }
            if let Some(d) = parse_duration(tcp.connect_timeout.as_deref()) {
                c.connect_timeout = Some(d);
            }
        }
    }
    c.circuit_breakers = Some(CircuitBreakers {
        thresholds: vec![t],
        ..Default::default()
    });

    let h2 = matches!(protocol, Protocol::Http2 | Protocol::Grpc);
    if !h2 && idle_timeout.is_none() && max_requests_per_connection.is_none() && upstream.is_none()
    {
        return;
    }
    let common = (idle_timeout.is_some() || max_requests_per_connection.is_some()).then(|| {
        CommonHttpOptions {
            idle_timeout,
            max_requests_per_connection: max_requests_per_connection.map(u32_value),
            ..Default::default()
        }
    });
    // The upstream protocol is required once the options exist: HTTP/2 for HTTP/2 and
    // gRPC ports, HTTP/1.1 otherwise.
    let protocol_config = if h2 {
        http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
            Http2ProtocolOptions::default(),
        )
    } else {
        http_protocol_options::explicit_http_config::ProtocolConfig::HttpProtocolOptions(
            Http1ProtocolOptions::default(),
        )
    };
    let options = HttpProtocolOptions {
        common_http_protocol_options: common,
        upstream_http_protocol_options: upstream,
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(protocol_config),
                },
            ),
        ),
        ..Default::default()
    };
    c.typed_extension_protocol_options
        .insert(HttpProtocolOptions::full_name(), any(&options));
}

/// Istio's outlier detection: success-rate ejection off, 5xx and gateway-error ejection
/// enforced fully when configured, and the panic threshold disabled (few pods per
/// service make Envoy's 50% default send traffic to ejected hosts).
pub(crate) fn apply_outlier_detection(c: &mut Cluster, policy: Policy<'_>) {
    let Some(o) = policy.outlier_detection else {
        return;
    };
    let enforce = |v: u32| u32_value(if v > 0 { 100 } else { 0 });
    c.outlier_detection = Some(EnvoyOutlier {
        enforcing_success_rate: Some(u32_value(0)),
        consecutive_5xx: o.consecutive_5xx_errors.map(u32_value),
        enforcing_consecutive_5xx: o.consecutive_5xx_errors.map(enforce),
        consecutive_gateway_failure: o.consecutive_gateway_errors.map(u32_value),
        enforcing_consecutive_gateway_failure: o.consecutive_gateway_errors.map(enforce),
        interval: parse_duration(o.interval.as_deref()),
        base_ejection_time: parse_duration(o.base_ejection_time.as_deref()),
        max_ejection_percent: positive(o.max_ejection_percent).map(u32_value),
        ..Default::default()
    });
    c.common_lb_config
        .get_or_insert_with(Default::default)
        .healthy_panic_threshold = Some(Percent { value: 0.0 });
}

/// The LB policy. Istio's default is LEAST_REQUEST; ORIGINAL_DST clusters must use the
/// cluster-provided one. Returns true when a PASSTHROUGH policy turned the cluster into
/// ORIGINAL_DST.
pub(crate) fn apply_load_balancer(c: &mut Cluster, policy: Policy<'_>) -> bool {
    use cluster::LbPolicy;
    let original_dst =
        |c: &Cluster| c.cluster_discovery_type == discovery(cluster::DiscoveryType::OriginalDst);
    if original_dst(c) {
        c.lb_policy = LbPolicy::ClusterProvided as i32;
        return false;
    }
    let lb = policy.load_balancer;
    if let Some(hash) = lb.and_then(|l| l.consistent_hash.as_deref()) {
        apply_consistent_hash(c, hash);
        return false;
    }
    let simple = lb.and_then(|l| l.simple.as_deref()).unwrap_or("");
    c.lb_policy = match simple {
        "ROUND_ROBIN" => LbPolicy::RoundRobin,
        "RANDOM" => LbPolicy::Random,
        "PASSTHROUGH" => {
            c.cluster_discovery_type = discovery(cluster::DiscoveryType::OriginalDst);
            c.eds_cluster_config = None;
            c.load_assignment = None;
            c.lb_policy = LbPolicy::ClusterProvided as i32;
            return true;
        }
        // LEAST_CONN is LEAST_REQUEST's old name; unset means Istio's default.
        _ => LbPolicy::LeastRequest,
    } as i32;
    false
}

/// Consistent hashing: Maglev or a ring hash as asked, else a ring hash of the deprecated
/// `minimumRingSize` (Envoy's 1024 when unset), as Istio does. The hash key itself is
/// a route's hash policy.
fn apply_consistent_hash(c: &mut Cluster, hash: &ConsistentHashLb) {
    use cluster::LbPolicy;
    let size = |v: u64| (v > 0).then_some(UInt64Value { value: v });
    if let Some(maglev) = &hash.maglev {
        c.lb_policy = LbPolicy::Maglev as i32;
        c.lb_config = size(maglev.table_size).map(|table_size| {
            cluster::LbConfig::MaglevLbConfig(cluster::MaglevLbConfig {
                table_size: Some(table_size),
            })
        });
        return;
    }
    c.lb_policy = LbPolicy::RingHash as i32;
    let minimum_ring_size = match &hash.ring_hash {
        Some(ring) => size(ring.minimum_ring_size),
        None => Some(UInt64Value {
            value: hash.minimum_ring_size.filter(|v| *v > 0).unwrap_or(1024),
        }),
    };
    c.lb_config = minimum_ring_size.map(|minimum_ring_size| {
        cluster::LbConfig::RingHashLbConfig(cluster::RingHashLbConfig {
            minimum_ring_size: Some(minimum_ring_size),
            ..Default::default()
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;
    use shoal_proto::config::istio::{LoadBalancerSettings, Maglev, RingHash};

    fn balanced(hash: ConsistentHashLb) -> Cluster {
        let lb = LoadBalancerSettings {
            consistent_hash: Some(Box::new(hash)),
            ..Default::default()
        };
        let mut c = Cluster::default();
        apply_load_balancer(
            &mut c,
            Policy {
                load_balancer: Some(&lb),
                ..Default::default()
            },
        );
        c
    }

    #[test]
    fn maglev_ring_hash_and_the_deprecated_ring_size() {
        let maglev = balanced(ConsistentHashLb {
            maglev: Some(Maglev { table_size: 65537 }),
            ..Default::default()
        });
        assert_eq!(maglev.lb_policy, cluster::LbPolicy::Maglev as i32);
        assert!(matches!(
            maglev.lb_config,
            Some(cluster::LbConfig::MaglevLbConfig(cluster::MaglevLbConfig { table_size: Some(t) }))
                if t.value == 65537
        ));
        let ring_size = |c: &Cluster| match &c.lb_config {
            Some(cluster::LbConfig::RingHashLbConfig(r)) => r.minimum_ring_size.map(|v| v.value),
            other => panic!("not a ring hash: {other:?}"),
        };
        let ring = balanced(ConsistentHashLb {
            ring_hash: Some(RingHash {
                minimum_ring_size: 4096,
            }),
            ..Default::default()
        });
        assert_eq!(ring.lb_policy, cluster::LbPolicy::RingHash as i32);
        assert_eq!(ring_size(&ring), Some(4096));
        let deprecated = balanced(ConsistentHashLb {
            minimum_ring_size: Some(2048),
            ..Default::default()
        });
        assert_eq!(ring_size(&deprecated), Some(2048));
        assert_eq!(
            ring_size(&balanced(ConsistentHashLb::default())),
            Some(1024)
        );
        // Envoy's defaults when the algorithm is named without a size.
        let unsized_ring = balanced(ConsistentHashLb {
            ring_hash: Some(RingHash::default()),
            ..Default::default()
        });
        assert_eq!(unsized_ring.lb_policy, cluster::LbPolicy::RingHash as i32);
        assert_eq!(unsized_ring.lb_config, None);
    }

    /// Auto SNI needs HTTP protocol options even on a plain HTTP/1.1 cluster, and they
    /// then need an upstream protocol.
    #[test]
    fn auto_sni_makes_http_protocol_options() {
        let mut c = Cluster::default();
        let auto = UpstreamHttpProtocolOptions {
            auto_sni: true,
            auto_san_validation: true,
            ..Default::default()
        };
        apply_connection_pool(
            &mut c,
            Policy::default(),
            Protocol::Http,
            Some(auto.clone()),
        );
        let any: &Any = &c.typed_extension_protocol_options[&HttpProtocolOptions::full_name()];
        let options = HttpProtocolOptions::decode(any.value.as_slice()).unwrap();
        assert_eq!(options.upstream_http_protocol_options, Some(auto));
        assert!(options.upstream_protocol_options.is_some());

        let mut plain = Cluster::default();
        apply_connection_pool(&mut plain, Policy::default(), Protocol::Http, None);
        assert!(plain.typed_extension_protocol_options.is_empty());
    }
}
