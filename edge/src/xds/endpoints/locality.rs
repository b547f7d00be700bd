//! Locality-aware load balancing of one assignment for one proxy's locality, as Istio
//! applies a DestinationRule's `localityLbSetting`:
//!
//! - **failover** (the default, once outlier detection is set, since only ejection makes
//!   Envoy leave a priority): priority 0 for the proxy's own `region/zone/subzone`, then
//!   its zone, its region, the `failover` target region, and every other region last;
//!   priorities are renumbered so that none is skipped.
//! - **distribute**: the first rule whose `from` matches the proxy's locality gives each
//!   `to` locality its share of the traffic; localities no rule names get none.

use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::LocalityLbEndpoints;
use shoal_proto::config::istio::{LocalityDistribute, LocalityFailover, LocalityLbSetting};
use std::collections::BTreeSet;

use crate::xds::util::u32_value;

/// What a cluster's locality load balancing does.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LocalityLb {
    /// Every locality at priority 0, weighted by its endpoints.
    #[default]
    Off,
    /// Priorities by closeness to the proxy, with the `failover` region pairs.
    Failover(Vec<LocalityFailover>),
    /// Weights from the proxy's locality to others.
    Distribute(Vec<LocalityDistribute>),
}

impl LocalityLb {
    /// The behaviour for a cluster with `setting` (mesh default: enabled) and, or not,
    /// outlier detection.
    pub fn new(setting: Option<&LocalityLbSetting>, outlier_detection: bool) -> LocalityLb {
        if setting.is_some_and(|s| s.enabled == Some(false)) {
            return LocalityLb::Off;
        }
        match setting {
            Some(s) if !s.distribute.is_empty() => LocalityLb::Distribute(s.distribute.clone()),
            _ if outlier_detection => {
                LocalityLb::Failover(setting.map(|s| s.failover.clone()).unwrap_or_default())
            }
            _ => LocalityLb::Off,
        }
    }

    /// Whether the assignment differs by the proxy's locality.
    pub fn is_on(&self) -> bool {
        !matches!(self, LocalityLb::Off)
    }

    /// Sets priorities or weights of `groups` (one per locality) for a proxy in
    /// `proxy` (`region/zone/subzone`; empty: unknown, and nothing is changed).
    pub fn apply(&self, proxy: &str, groups: &mut Vec<LocalityLbEndpoints>) {
        if proxy.is_empty() {
            return;
        }
        let proxy = super::parse_locality(proxy);
        match self {
            LocalityLb::Off => {}
            LocalityLb::Failover(failover) => apply_failover(&proxy, failover, groups),
            LocalityLb::Distribute(rules) => apply_distribute(&proxy, rules, groups),
        }
    }
}

/// Whether `locality` is in `pattern`: `region`, `region/zone` or `region/zone/subzone`,
/// any part of which may be `*` (matching everything from there on).
pub fn locality_matches(locality: &Locality, pattern: &str) -> bool {
    let parts = [&locality.region, &locality.zone, &locality.sub_zone];
    for (i, want) in pattern.split('/').enumerate() {
        if want == "*" {
            return true;
        }
        if parts.get(i).is_none_or(|have| have.as_str() != want) {
            return false;
        }
    }
    true
}

/// 0: same subzone, 1: same zone, 2: same region, 3: another region.
fn closeness(proxy: &Locality, endpoints: &Locality) -> u32 {
    match (
        proxy.region == endpoints.region,
        proxy.zone == endpoints.zone,
        proxy.sub_zone == endpoints.sub_zone,
    ) {
        (true, true, true) => 0,
        (true, true, false) => 1,
        (true, false, _) => 2,
        (false, _, _) => 3,
    }
}

fn apply_failover(
    proxy: &Locality,
    failover: &[LocalityFailover],
    groups: &mut [LocalityLbEndpoints],
) {
    let target = failover
        .iter()
        .find(|f| f.from == proxy.region)
        .map(|f| f.to.as_str());
    let default = Locality::default();
    for group in groups.iter_mut() {
        let locality = group.locality.as_ref().unwrap_or(&default);
        let mut priority = closeness(proxy, locality);
        // Another region: the failover target keeps 3, the rest go after it.
        if priority == 3 && target.is_some_and(|to| to != locality.region) {
            priority = 4;
        }
        group.priority = priority;
    }
    // Envoy wants priorities from 0 without gaps.
    let used: BTreeSet<u32> = groups.iter().map(|g| g.priority).collect();
    for group in groups.iter_mut() {
        let rank = used.iter().position(|p| *p == group.priority).unwrap_or(0);
        group.priority = u32::try_from(rank).unwrap_or(u32::MAX);
    }
}

fn apply_distribute(
    proxy: &Locality,
    rules: &[LocalityDistribute],
    groups: &mut Vec<LocalityLbEndpoints>,
) {
    let Some(rule) = rules.iter().find(|r| locality_matches(proxy, &r.from)) else {
        return;
    };
    let default = Locality::default();
    let weight_of = |g: &LocalityLbEndpoints| g.load_balancing_weight.map_or(1, |w| w.value);
    let mut assigned = vec![None; groups.len()];
    for (pattern, share) in &rule.to {
        // Localities a `to` matches share its percentage by their own weights.
        let matched: Vec<usize> = (0..groups.len())
            .filter(|i| assigned[*i].is_none())
            .filter(|i| locality_matches(groups[*i].locality.as_ref().unwrap_or(&default), pattern))
            .collect();
        let total: u64 = matched
            .iter()
            .map(|i| u64::from(weight_of(&groups[*i])))
            .sum();
        for i in matched {
            let weight =
                (u64::from(weight_of(&groups[i])) * u64::from(*share)).div_ceil(total.max(1));
            assigned[i] = Some(u32::try_from(weight).unwrap_or(u32::MAX));
        }
    }
    let mut assigned = assigned.into_iter();
    groups.retain_mut(|group| match assigned.next().flatten() {
        Some(weight) if weight > 0 => {
            group.load_balancing_weight = Some(u32_value(weight));
            true
        }
        _ => false,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xds::endpoints::parse_locality;

    fn groups(localities: &[(&str, u32)]) -> Vec<LocalityLbEndpoints> {
        localities
            .iter()
            .map(|(l, w)| LocalityLbEndpoints {
                locality: Some(parse_locality(l)),
                load_balancing_weight: Some(u32_value(*w)),
                ..Default::default()
            })
            .collect()
    }

    fn priorities(groups: &[LocalityLbEndpoints]) -> Vec<u32> {
        groups.iter().map(|g| g.priority).collect()
    }

    #[test]
    fn failover_needs_outlier_detection_and_can_be_disabled() {
        assert_eq!(LocalityLb::new(None, false), LocalityLb::Off);
        assert_eq!(LocalityLb::new(None, true), LocalityLb::Failover(vec![]));
        let off = LocalityLbSetting {
            enabled: Some(false),
            ..Default::default()
        };
        assert_eq!(LocalityLb::new(Some(&off), true), LocalityLb::Off);
    }

    #[test]
    fn failover_orders_by_closeness_without_gaps() {
        let mut g = groups(&[("r1/z1/s1", 1), ("r1/z1/s2", 1), ("r1/z2", 1), ("r2/z1", 1)]);
        LocalityLb::Failover(vec![]).apply("r1/z1/s1", &mut g);
        assert_eq!(priorities(&g), [0, 1, 2, 3]);
        // Nothing in the proxy's own zone: its region comes first.
        let mut g = groups(&[("r1/z2", 1), ("r2/z1", 1)]);
        LocalityLb::Failover(vec![]).apply("r1/z1", &mut g);
        assert_eq!(priorities(&g), [0, 1]);
    }

    #[test]
    fn failover_target_region_comes_before_other_regions() {
        let failover = vec![LocalityFailover {
            from: "us-east".into(),
            to: "eu-west".into(),
        }];
        let mut g = groups(&[("ap-south/a", 1), ("eu-west/a", 1), ("us-east/b", 1)]);
        LocalityLb::Failover(failover).apply("us-east/a", &mut g);
        assert_eq!(priorities(&g), [2, 1, 0]);
    }

    #[test]
    fn distribute_shares_traffic_and_drops_unnamed_localities() {
        let rule = LocalityDistribute {
            from: "us-east/*".into(),
            to: [("us-east/a".to_string(), 80), ("us-west/*".to_string(), 20)].into(),
        };
        let mut g = groups(&[
            ("ap/x", 5),
            ("us-east/a", 3),
            ("us-west/a", 1),
            ("us-west/b", 3),
        ]);
        LocalityLb::Distribute(vec![rule.clone()]).apply("us-east/a", &mut g);
        let weights: Vec<(String, u32)> = g
            .iter()
            .map(|g| {
                let l = g.locality.as_ref().unwrap();
                (
                    format!("{}/{}", l.region, l.zone),
                    g.load_balancing_weight.unwrap().value,
                )
            })
            .collect();
        // us-west's 20% split by its localities' weights, 1:3.
        assert_eq!(
            weights,
            [
                ("us-east/a".into(), 80),
                ("us-west/a".into(), 5),
                ("us-west/b".into(), 15)
            ]
        );
        // A proxy no rule is from keeps every locality.
        let mut g = groups(&[("ap/x", 5), ("us-east/a", 3)]);
        LocalityLb::Distribute(vec![rule]).apply("ap/x", &mut g);
        assert_eq!(g.len(), 2);
    }

    #[test]
    fn patterns_match_prefixes_and_wildcards() {
        let l = parse_locality("r/z/s");
        assert!(locality_matches(&l, "r"));
        assert!(locality_matches(&l, "r/z"));
        assert!(locality_matches(&l, "r/*"));
        assert!(locality_matches(&l, "*"));
        assert!(!locality_matches(&l, "r/y"));
        assert!(!locality_matches(&l, "q/*"));
    }
}
