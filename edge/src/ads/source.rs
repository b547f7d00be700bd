//! Where a stream's resources come from: the real [`Generator`] over one PushContext, or
//! a fake in tests.

use super::transport::{DeltaResource, delta_resources, sotw_resources};
use crate::proxy::Proxy;
use crate::xds::{GenerateError, Generator, XdsResource};
use bytes::Bytes;
use shoal_proto::push_context::PushContext;
use std::sync::Arc;

/// The resources of one type for one proxy at one snapshot version.
pub trait ResourceSource {
    /// The snapshot version the resources reflect (the prefix of versions and nonces).
    fn version(&self) -> u64;

    /// `names` empty means all (wildcard); otherwise only those of `names` that exist.
    fn resources(
        &self,
        type_url: &str,
        proxy: &Proxy,
        names: &[String],
    ) -> Result<Vec<Arc<XdsResource>>, GenerateError>;

    /// `resources` as a SotW response's resource fields, shared with every stream that
    /// sends the same ones; `None`: each response encodes its own.
    fn sotw_resources(&self, _resources: &[Arc<XdsResource>]) -> Option<Bytes> {
        None
    }

    /// `resources` as a Delta response's resource fields, at the snapshot of
    /// [`Self::version`] (their versions name it), shared as [`Self::sotw_resources`].
    fn delta_resources(&self, _resources: &[Arc<XdsResource>]) -> Option<Bytes> {
        None
    }
}

/// Tells the generator's shared encodings apart: SotW, and Delta per snapshot (the
/// versions in a Delta response name it).
const SOTW_RESOURCES: u64 = u64::MAX;

/// The production source: `generator` over `push`.
pub struct GeneratorSource<'a> {
    pub generator: &'a Generator,
    pub push: &'a PushContext,
}

impl ResourceSource for GeneratorSource<'_> {
    fn version(&self) -> u64 {
        self.push.version()
    }

    fn resources(
        &self,
        type_url: &str,
        proxy: &Proxy,
        names: &[String],
    ) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
        self.generator.generate(type_url, proxy, self.push, names)
    }

    fn sotw_resources(&self, resources: &[Arc<XdsResource>]) -> Option<Bytes> {
        Some(
            self.generator
                .encoded(SOTW_RESOURCES, resources, sotw_resources),
        )
    }

    fn delta_resources(&self, resources: &[Arc<XdsResource>]) -> Option<Bytes> {
        let snapshot = self.version();
        Some(self.generator.encoded(snapshot, resources, |rs| {
            let versioned: Vec<DeltaResource> = rs
                .iter()
                .map(|r| DeltaResource {
                    resource: Arc::clone(r),
                    version: super::delta::version_of(r, snapshot),
                })
                .collect();
            delta_resources(&versioned)
        }))
    }
}

/// The resources a subscription currently covers: everything of `type_url` when
/// `wildcard`, else the named ones; with `hosts`, only those of these services' clusters.
/// Shared by the SotW and Delta state machines.
pub(crate) fn subscribed(
    src: &dyn ResourceSource,
    proxy: &Proxy,
    type_url: &str,
    wildcard: bool,
    names: &[String],
    hosts: Option<&std::collections::BTreeSet<String>>,
) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
    let mut resources = if wildcard {
        src.resources(type_url, proxy, &[])?
    } else if hosts.is_none() {
        // The stream's own list, as it is: every response of a sync comes this way.
        if names.is_empty() {
            return Ok(Vec::new());
        }
        src.resources(type_url, proxy, names)?
    } else {
        let names: Vec<String> = names
            .iter()
            .filter(|n| super::scope::host_selected(hosts, n))
            .cloned()
            .collect();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        src.resources(type_url, proxy, &names)?
    };
    if hosts.is_some() {
        resources.retain(|r| super::scope::host_selected(hosts, &r.name));
    }
    Ok(resources)
}
