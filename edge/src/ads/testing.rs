//! Test support: a fake resource source and a proxy.

use super::source::ResourceSource;
use crate::proxy::Proxy;
use crate::xds::{GenerateError, XdsResource};
use envoy_types::pb::envoy::config::core::v3::Node;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Resources by type, in name order; records every call.
#[derive(Default)]
pub(crate) struct FakeSource {
    pub version: u64,
    by_type: HashMap<String, BTreeMap<String, Arc<XdsResource>>>,
    pub calls: RefCell<Vec<(String, Vec<String>)>>,
    /// Types whose generation fails.
    failing: Vec<String>,
}

impl FakeSource {
    pub fn new(version: u64) -> Self {
        FakeSource {
            version,
            ..Default::default()
        }
    }

    pub fn with(mut self, type_url: &str, name: &str, content: &str) -> Self {
        self.set(type_url, name, content);
        self
    }

    pub fn set(&mut self, type_url: &str, name: &str, content: &str) {
        self.by_type
            .entry(type_url.to_string())
            .or_default()
            .insert(
                name.to_string(),
                Arc::new(XdsResource::new(
                    name.to_string(),
                    type_url,
                    content.as_bytes().to_vec(),
                )),
            );
    }

    /// Makes generating `type_url` fail.
    pub fn fail(&mut self, type_url: &str) {
        self.failing.push(type_url.to_string());
    }

    pub fn remove(&mut self, type_url: &str, name: &str) {
        if let Some(m) = self.by_type.get_mut(type_url) {
            m.remove(name);
        }
    }
}

impl ResourceSource for FakeSource {
    fn version(&self) -> u64 {
        self.version
    }

    fn resources(
        &self,
        type_url: &str,
        _proxy: &Proxy,
        names: &[String],
    ) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
        self.calls
            .borrow_mut()
            .push((type_url.to_string(), names.to_vec()));
        if self.failing.iter().any(|t| t == type_url) {
            return Err(GenerateError::Invalid {
                resource: type_url.to_string(),
                reason: "failing on purpose".to_string(),
            });
        }
        let Some(all) = self.by_type.get(type_url) else {
            return Err(GenerateError::UnsupportedType(type_url.to_string()));
        };
        Ok(if names.is_empty() {
            all.values().cloned().collect()
        } else {
            names.iter().filter_map(|n| all.get(n).cloned()).collect()
        })
    }
}

pub(crate) fn node(id: &str) -> Node {
    Node {
        id: id.to_string(),
        ..Default::default()
    }
}

pub(crate) fn proxy() -> Proxy {
    crate::proxy::from_node(
        Some(&node("sidecar~10.0.0.1~web-1.shop~shop.svc.cluster.local")),
        Default::default(),
    )
    .unwrap()
}
