//! Istio `HTTPRetry` → Envoy `RetryPolicy` (Istio's `retry.ConvertPolicy`).

use crate::xds::util::{any, parse_duration, u32_value};
use envoy_types::pb::envoy::config::route::v3::{RetryPolicy, retry_policy as retry};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::extensions::retry::priority::previous_priorities::v3::PreviousPrioritiesConfig;
use shoal_proto::config::istio::HttpRetry;

/// Istio's default `retryOn` for outbound routes.
pub const DEFAULT_RETRY_ON: &str =
    "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes";
const DEFAULT_ATTEMPTS: u32 = 2;
/// What `retriable-status-codes` means in Istio's default policy: 503.
const DEFAULT_RETRIABLE_STATUS_CODES: [u32; 1] = [503];

/// No policy: 2 attempts on connection-level failures, trying
/// another host each time (unless hashing, where the host is the point). `attempts: 0`
/// disables retries.
pub fn retry_policy(r: Option<&HttpRetry>, consistent_hash: bool) -> Option<RetryPolicy> {
    let mut out = RetryPolicy {
        retry_on: DEFAULT_RETRY_ON.into(),
        num_retries: Some(u32_value(DEFAULT_ATTEMPTS)),
        retriable_status_codes: DEFAULT_RETRIABLE_STATUS_CODES.to_vec(),
        host_selection_retry_max_attempts: 5,
        ..Default::default()
    };
    if !consistent_hash {
        out.retry_host_predicate.push(retry::RetryHostPredicate {
            name: "envoy.retry_host_predicates.previous_hosts".into(),
            config_type: Some(retry::retry_host_predicate::ConfigType::TypedConfig(any(
                &PreviousHostsPredicate::default(),
            ))),
        });
    }
    let Some(r) = r else { return Some(out) };
    let attempts = u32::try_from(r.attempts).ok().filter(|a| *a > 0)?;
    out.num_retries = Some(u32_value(attempts));
    if !r.retry_on.is_empty() {
        let (on, codes) = parse_retry_on(&r.retry_on);
        out.retry_on = on;
        out.retriable_status_codes = codes;
    }
    out.per_try_timeout = parse_duration(r.per_try_timeout.as_deref());
    if r.retry_remote_localities == Some(true) {
        // Each retry after the first avoids the priorities (localities) already tried.
        out.retry_priority = Some(retry::RetryPriority {
            name: "envoy.retry_priorities.previous_priorities".into(),
            config_type: Some(retry::retry_priority::ConfigType::TypedConfig(any(
                &PreviousPrioritiesConfig {
                    update_frequency: i32::try_from(attempts).unwrap_or(i32::MAX - 1) + 1,
                },
            ))),
        });
    }
    Some(out)
}

/// Splits Istio's `retryOn`: numbers are status codes, which need Envoy's
/// `retriable-status-codes` condition.
fn parse_retry_on(s: &str) -> (String, Vec<u32>) {
    let mut on = Vec::new();
    let mut codes = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<u32>() {
            Ok(code) => codes.push(code),
            Err(_) => on.push(part.to_string()),
        }
    }
    if !codes.is_empty() && !on.iter().any(|p| p == "retriable-status-codes") {
        on.push("retriable-status-codes".into());
    }
    (on.join(","), codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_on_splits_status_codes() {
        assert_eq!(
            parse_retry_on("5xx, 503,gateway-error"),
            (
                "5xx,gateway-error,retriable-status-codes".to_string(),
                vec![503]
            )
        );
        assert_eq!(parse_retry_on("reset"), ("reset".to_string(), vec![]));
    }

    #[test]
    fn retry_defaults_and_disable() {
        let d = retry_policy(None, false).unwrap();
        assert_eq!(d.retry_on, DEFAULT_RETRY_ON);
        assert_eq!(d.retriable_status_codes, [503]);
        assert_eq!(d.num_retries.unwrap().value, 2);
        assert_eq!(d.retry_host_predicate.len(), 1);
        assert!(
            retry_policy(None, true)
                .unwrap()
                .retry_host_predicate
                .is_empty()
        );
        let off = HttpRetry::default();
        assert_eq!(retry_policy(Some(&off), false), None);

        // Attempts alone keep the default conditions; `retryOn` replaces them.
        let three = HttpRetry {
            attempts: 3,
            retry_remote_localities: Some(true),
            ..Default::default()
        };
        let p = retry_policy(Some(&three), false).unwrap();
        assert_eq!(
            (p.retry_on.as_str(), p.retriable_status_codes.as_slice()),
            (DEFAULT_RETRY_ON, &[503][..])
        );
        assert_eq!(
            p.retry_priority.unwrap().name,
            "envoy.retry_priorities.previous_priorities"
        );
        let reset = HttpRetry {
            attempts: 3,
            retry_on: "reset".into(),
            ..Default::default()
        };
        assert!(
            retry_policy(Some(&reset), false)
                .unwrap()
                .retriable_status_codes
                .is_empty()
        );
    }
}
