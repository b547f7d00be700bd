//! The edge tier: holds proxies' ADS streams, pulls snapshots, runs the push queue and
//! generates xDS.

pub mod proxy;
pub mod snapshot;
pub mod xds;
