//! One proxy's config in Envoy's own JSON, and how it differs from what the edge would
//! send it now: `/debug/config_dump?proxyID=` and `/debug/config_diff?proxyID=` on every
//! edge, read across the fleet by `shoal proxy-config` and `shoal proxy-status PROXY`.
//! Without I/O: the ADS server hands in what a stream's proxy holds and what the
//! generator makes of its subscription now.
//!
//! Imports run down this list:
//!
//! - [`dump`]: [`config_dump`], Envoy's `/config_dump` layout (`ClustersConfigDump`,
//!   `ListenersConfigDump`, …) of what the proxy acknowledged;
//! - [`diff`]: [`config_diff`], per type the resources only the proxy holds, only the edge
//!   would send, or that differ;
//! - [`json`]: one resource as Envoy writes it (proto3 JSON, field names as in the
//!   `.proto`, `Any` expanded with `@type`, sensitive fields redacted), from the
//!   descriptors `build.rs` compiles out of `envoy-types`' own `.proto` files.

mod diff;
mod dump;
mod json;

pub use diff::{ResourceDiff, TypeDiff, config_diff};
pub use dump::config_dump;
pub use json::{JsonError, REDACTED, resource_json};

use crate::xds::XdsResource;
use std::sync::Arc;

/// What a proxy holds of one type: the resources it last acknowledged, at `version`.
#[derive(Clone, Copy, Debug)]
pub struct Held<'a> {
    pub type_url: &'a str,
    /// The version the proxy acknowledged (empty: never acknowledged).
    pub version: &'a str,
    pub resources: &'a [Arc<XdsResource>],
}

#[cfg(test)]
mod tests;
