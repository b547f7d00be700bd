//! When signing material and the certificates made from it are replaced: pure decisions
//! over timestamps, made by the edge's sources on their timers.

use std::time::{Duration, SystemTime};

/// istiod re-issues its self-signed root once this share (percent) of its lifetime is
/// left (`CITADEL_SELF_SIGNED_ROOT_CERT_GRACE_PERIOD_PERCENTILE`).
pub const ROOT_GRACE_PERCENT: u32 = 20;
/// How often istiod's root rotator looks (`CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL`).
pub const ROOT_CHECK_INTERVAL: Duration = Duration::from_secs(3600);
/// How often plug-in CA files are re-read by default.
pub const DEFAULT_PLUGIN_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// True once the remaining lifetime is at most `percent` of the whole (or it expired).
pub fn within_last(
    percent: u32,
    not_before: SystemTime,
    not_after: SystemTime,
    now: SystemTime,
) -> bool {
    let Ok(lifetime) = not_after.duration_since(not_before) else {
        return true;
    };
    let Ok(left) = not_after.duration_since(now) else {
        return true;
    };
    left.as_secs_f64() <= lifetime.as_secs_f64() * f64::from(percent.min(100)) / 100.0
}

/// A self-signed root is re-issued within its last fifth of life, as istiod's rotator.
pub fn root_needs_rotation(not_before: SystemTime, not_after: SystemTime, now: SystemTime) -> bool {
    within_last(ROOT_GRACE_PERCENT, not_before, not_after, now)
}

/// A serving certificate is renewed at half its life (as Istio's agent renews its own).
pub fn serving_needs_renewal(
    not_before: SystemTime,
    not_after: SystemTime,
    now: SystemTime,
) -> bool {
    within_last(50, not_before, not_after, now)
}

/// Plug-in files are re-read every `interval` since the last read (or now, if never).
pub fn plugin_reread_due(
    last_read: Option<SystemTime>,
    interval: Duration,
    now: SystemTime,
) -> bool {
    match last_read {
        None => true,
        Some(t) => now.duration_since(t).map_or(true, |e| e >= interval),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_root_is_rotated_in_its_last_fifth() {
        let t0 = SystemTime::UNIX_EPOCH + 1000 * DAY;
        let end = t0 + 100 * DAY;
        assert!(!root_needs_rotation(t0, end, t0 + 79 * DAY));
        assert!(root_needs_rotation(t0, end, t0 + 80 * DAY));
        assert!(root_needs_rotation(t0, end, end + DAY), "expired");
    }

    #[test]
    fn a_serving_cert_is_renewed_at_half_life() {
        let t0 = SystemTime::UNIX_EPOCH + 1000 * DAY;
        assert!(!serving_needs_renewal(t0, t0 + DAY, t0 + DAY / 3));
        assert!(serving_needs_renewal(t0, t0 + DAY, t0 + DAY / 2));
        assert!(serving_needs_renewal(t0 + DAY, t0, t0), "inverted validity");
    }

    #[test]
    fn plugin_files_are_reread_every_interval() {
        let t0 = SystemTime::UNIX_EPOCH + DAY;
        let i = Duration::from_secs(10);
        assert!(plugin_reread_due(None, i, t0));
        assert!(!plugin_reread_due(Some(t0), i, t0 + Duration::from_secs(9)));
        assert!(plugin_reread_due(Some(t0), i, t0 + i));
        assert!(plugin_reread_due(Some(t0 + DAY), i, t0), "clock went back");
    }
}
