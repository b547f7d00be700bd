//! [`ConnectedProxies`]: what CSDS reads the proxies from (the edge's registry of
//! streams, through `ads::XdsServer`), so that CSDS knows nothing of streams or locks.

use crate::ads::status::TypeStatus;
use shoal_proto::xds::Proxy;
use std::sync::Arc;

/// The proxies an edge serves, with their sync state.
pub trait ConnectedProxies: Send + Sync + 'static {
    /// Calls `visit` once for each proxy connected here (its newest stream, when a
    /// reconnected proxy's old stream is still ending), with the per-type sync state the
    /// stream last published. No lock of the registry is held while `visit` runs.
    fn visit(&self, visit: &mut dyn FnMut(&Proxy, &[Arc<TypeStatus>]));
}
