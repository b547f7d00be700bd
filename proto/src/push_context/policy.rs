//! The DestinationRule traffic policy that applies to one cluster, merged as Istio merges
//! it (`MergeSubsetTrafficPolicy`): a port-level setting replaces the top-level policy for
//! that port wholesale (omitted fields fall back to defaults, they are not inherited); a
//! subset's policy then overrides the parts it sets, and its own port-level setting
//! replaces every part.

use crate::config::istio::{
    ClientTlsSettings, ConnectionPoolSettings, ConsistentHashLb, DestinationRule,
    LoadBalancerSettings, OutlierDetection, Subset, TrafficPolicy,
};

/// The effective policy components for one (host, port, subset).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Policy<'a> {
    pub connection_pool: Option<&'a ConnectionPoolSettings>,
    pub load_balancer: Option<&'a LoadBalancerSettings>,
    pub outlier_detection: Option<&'a OutlierDetection>,
    pub tls: Option<&'a ClientTlsSettings>,
}

impl<'a> Policy<'a> {
    pub fn consistent_hash(&self) -> Option<&'a ConsistentHashLb> {
        self.load_balancer
            .and_then(|lb| lb.consistent_hash.as_deref())
    }
}

/// The policy for `port`, and whether a port-level setting supplied it.
fn for_port(policy: &TrafficPolicy, port: u32) -> (Policy<'_>, bool) {
    let port_level = policy
        .port_level_settings
        .iter()
        .find(|p| p.port.as_ref().is_some_and(|s| s.number == port));
    match port_level {
        Some(p) => (
            Policy {
                connection_pool: p.connection_pool.as_ref(),
                load_balancer: p.load_balancer.as_ref(),
                outlier_detection: p.outlier_detection.as_ref(),
                tls: p.tls.as_deref(),
            },
            true,
        ),
        None => (
            Policy {
                connection_pool: policy.connection_pool.as_ref(),
                load_balancer: policy.load_balancer.as_ref(),
                outlier_detection: policy.outlier_detection.as_ref(),
                tls: policy.tls.as_deref(),
            },
            false,
        ),
    }
}

/// The policy for traffic to `port` of the DestinationRule's host, in `subset` if given.
pub fn effective<'a>(
    rule: Option<&'a DestinationRule>,
    subset: Option<&'a Subset>,
    port: u32,
) -> Policy<'a> {
    let top = rule
        .and_then(|r| r.traffic_policy.as_ref())
        .map(|tp| for_port(tp, port).0);
    let Some(subset_policy) = subset.and_then(|s| s.traffic_policy.as_ref()) else {
        return top.unwrap_or_default();
    };
    let (sub, port_level) = for_port(subset_policy, port);
    let Some(mut merged) = top else {
        return sub;
    };
    if sub.connection_pool.is_some() || port_level {
        merged.connection_pool = sub.connection_pool;
    }
    if sub.outlier_detection.is_some() || port_level {
        merged.outlier_detection = sub.outlier_detection;
    }
    if sub.load_balancer.is_some() || port_level {
        merged.load_balancer = sub.load_balancer;
    }
    if sub.tls.is_some() || port_level {
        merged.tls = sub.tls;
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::istio::{PortSelector, PortTrafficPolicy};

    fn lb(simple: &str) -> Option<LoadBalancerSettings> {
        Some(LoadBalancerSettings {
            simple: Some(simple.into()),
            ..Default::default()
        })
    }

    #[test]
    fn port_level_replaces_and_subset_overrides() {
        let rule = DestinationRule {
            traffic_policy: Some(TrafficPolicy {
                load_balancer: lb("RANDOM"),
                outlier_detection: Some(OutlierDetection::default()),
                port_level_settings: vec![PortTrafficPolicy {
                    port: Some(PortSelector { number: 9080 }),
                    load_balancer: lb("ROUND_ROBIN"),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            subsets: vec![Subset {
                name: "v2".into(),
                traffic_policy: Some(TrafficPolicy {
                    load_balancer: lb("LEAST_REQUEST"),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        };
        let simple = |p: Policy<'_>| p.load_balancer.and_then(|l| l.simple.clone());

        let top = effective(Some(&rule), None, 80);
        assert_eq!(simple(top).as_deref(), Some("RANDOM"));
        assert!(top.outlier_detection.is_some());

        // Port level: the outlier detection of the top level is not inherited.
        let port = effective(Some(&rule), None, 9080);
        assert_eq!(simple(port).as_deref(), Some("ROUND_ROBIN"));
        assert!(port.outlier_detection.is_none());

        // Subset: overrides the LB, keeps the rest of the top level.
        let sub = effective(Some(&rule), Some(&rule.subsets[0]), 80);
        assert_eq!(simple(sub).as_deref(), Some("LEAST_REQUEST"));
        assert!(sub.outlier_detection.is_some());

        assert_eq!(effective(None, None, 80), Policy::default());
    }
}
