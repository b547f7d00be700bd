//! What a stream agrees to keep state for, shared by the SotW and Delta state machines:
//! only the types this server generates, and a bounded number of subscribed names.

use super::error::AdsError;
use crate::xds::types::PUSH_ORDER;

/// Names one stream may subscribe to, over all its types, unless configured otherwise
/// (`--max-names-per-stream`). A gateway or a sidecar without a Sidecar scope in a large
/// mesh subscribes to one EDS name per cluster and one SDS name per credential: tens of
/// thousands at most; this leaves room for that and still bounds what a client that
/// invents names can make an edge hold.
pub const DEFAULT_MAX_NAMES: usize = 100_000;

/// The served type URL equal to `type_url`, if this server generates it. A request for
/// any other type is ignored before the stream keeps anything for it.
///
/// Ignored rather than refused with a status: Istio answers a type it has no generator
/// for with nothing (no response, no NACK, the stream goes on), and Envoy can be made to
/// ask for types an ADS server need not serve (RTDS, ECDS, VHDS through a bootstrap or an
/// EnvoyFilter); closing the stream would cut such a proxy off from all its config, and
/// its reconnects would be refused again, for ever. Ignoring keeps nothing, so it costs
/// nothing however many types a client invents.
pub(crate) fn served(type_url: &str) -> Option<&'static str> {
    PUSH_ORDER.into_iter().find(|t| *t == type_url)
}

/// Refuses a subscription that would make the stream hold more than `max` names: `total`
/// is what it would hold with the request applied.
pub(crate) fn check_names(total: usize, max: usize, type_url: &str) -> Result<(), AdsError> {
    if total > max {
        return Err(AdsError::TooManyNames {
            total,
            max,
            type_url: type_url.to_string(),
        });
    }
    Ok(())
}
