//! Istio `mirror`/`mirrors` → Envoy request mirror policies (Istio's
//! `translateRequestMirrorPolicy`): copies sent fire-and-forget, 100% unless a
//! percentage says otherwise.

use crate::xds::util::fractional_percent;
use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::config::route::v3::route_action::RequestMirrorPolicy;
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::{Destination, HttpRoute};

/// The mirrors of `http`, each as (destination, percentage).
pub fn mirrors(http: &HttpRoute) -> Vec<(&Destination, f64)> {
    if let Some(m) = &http.mirror {
        let share = http
            .mirror_percentage
            .map(|p| p.value)
            .or(http.mirror_percent.map(f64::from))
            .unwrap_or(100.0);
        return vec![(m, share)];
    }
    http.mirrors
        .iter()
        .map(|m| {
            let share = m.percentage.map(|p| p.value).unwrap_or(100.0);
            (&m.destination, share)
        })
        .collect()
}

pub fn mirror_policy(cluster: String, share: f64) -> RequestMirrorPolicy {
    RequestMirrorPolicy {
        cluster,
        runtime_fraction: Some(RuntimeFractionalPercent {
            default_value: Some(fractional_percent(share)),
            ..Default::default()
        }),
        // Istio does not let a mirror's sampling follow the trace's.
        trace_sampled: Some(BoolValue { value: false }),
        ..Default::default()
    }
}
