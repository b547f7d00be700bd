//! The resource types the server serves: which URL paths exist and what a list is called.
//!
//! A resource is stored once per [`GroupResource`] and served under every version its
//! [`ResourceType`] lists, like a CRD with several served versions: a client of
//! `networking.istio.io/v1beta1` sees the same objects as one of `networking.istio.io/v1`.

mod builtin;

use std::collections::BTreeMap;
use std::fmt;

pub use builtin::shoal_resources;

/// What the storage of one resource is keyed by: its API group (`""` for core) and plural.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    pub group: String,
    pub plural: String,
}

impl GroupResource {
    pub fn new(group: impl Into<String>, plural: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            plural: plural.into(),
        }
    }
}

/// Parses kubectl's spelling: `services` (core) or `virtualservices.networking.istio.io`.
impl From<&str> for GroupResource {
    fn from(spelled: &str) -> Self {
        match spelled.split_once('.') {
            Some((plural, group)) => Self::new(group, plural),
            None => Self::new("", spelled),
        }
    }
}

impl From<&GroupResource> for GroupResource {
    fn from(resource: &GroupResource) -> Self {
        resource.clone()
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.plural)
        } else {
            write!(f, "{}.{}", self.plural, self.group)
        }
    }
}

/// One served resource type: (group, versions, plural, kind, namespaced).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceType {
    pub group: String,
    /// Every version it is served under; objects are shared between them.
    pub versions: Vec<String>,
    pub plural: String,
    pub kind: String,
    pub namespaced: bool,
    /// A kind compiled into the API server (core, `discovery.k8s.io`…), as opposed to
    /// a custom resource: the real server writes the items of its lists without
    /// `apiVersion` and `kind` (kubernetes/kubernetes#3030), a CRD's items with them.
    pub built_in: bool,
}

impl ResourceType {
    /// A core (`/api/v1`) resource type.
    pub fn core(plural: &str, kind: &str, namespaced: bool) -> Self {
        Self::built_in("", "v1", plural, kind, namespaced)
    }

    /// A kind of a named group compiled into the API server (`discovery.k8s.io`
    /// EndpointSlice…), served under one version.
    pub fn built_in(
        group: &str,
        version: &str,
        plural: &str,
        kind: &str,
        namespaced: bool,
    ) -> Self {
        Self {
            built_in: true,
            ..Self::grouped(group, &[version], plural, kind, namespaced)
        }
    }

    /// A custom resource (a CRD) of a named group, served under each of `versions`.
    pub fn grouped(
        group: &str,
        versions: &[&str],
        plural: &str,
        kind: &str,
        namespaced: bool,
    ) -> Self {
        Self {
            group: group.to_owned(),
            versions: versions.iter().map(|v| (*v).to_owned()).collect(),
            plural: plural.to_owned(),
            kind: kind.to_owned(),
            namespaced,
            built_in: false,
        }
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    /// `v1` for core, `group/version` otherwise: what `apiVersion` says.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_owned()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The version objects written through the Rust API are stamped with.
    pub fn preferred_version(&self) -> &str {
        self.versions.first().map_or("v1", String::as_str)
    }

    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v == version)
    }
}

/// The resource types a server knows, by [`GroupResource`].
#[derive(Clone, Debug, Default)]
pub struct Registry {
    types: BTreeMap<GroupResource, ResourceType>,
}

impl Registry {
    /// Adds a resource type, replacing any with the same group and plural.
    pub fn register(&mut self, resource: ResourceType) {
        self.types.insert(resource.group_resource(), resource);
    }

    pub fn get(&self, resource: &GroupResource) -> Option<&ResourceType> {
        self.types.get(resource)
    }

    /// The type served at `/api[s]/{group}/{version}/{plural}`, if that version is served.
    pub fn served(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.get(&GroupResource::new(group, plural))
            .filter(|resource| resource.serves(version))
    }
}

#[cfg(test)]
mod tests;
