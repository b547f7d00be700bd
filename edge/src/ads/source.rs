//! Where a stream's resources come from: the real [`Generator`] over one PushContext, or
//! a fake in tests.

use crate::proxy::Proxy;
use crate::xds::{GenerateError, Generator, XdsResource};
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
}

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
}

/// The resources a subscription currently covers: everything of `type_url` when
/// `wildcard`, else the named ones; with `hosts`, only those of these services' clusters.
/// Shared by the SotW and Delta state machines.
pub(crate) fn subscribed<'a>(
    src: &dyn ResourceSource,
    proxy: &Proxy,
    type_url: &str,
    wildcard: bool,
    names: impl IntoIterator<Item = &'a String>,
    hosts: Option<&std::collections::BTreeSet<String>>,
) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
    let mut resources = if wildcard {
        src.resources(type_url, proxy, &[])?
    } else {
        let names: Vec<String> = names
            .into_iter()
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
