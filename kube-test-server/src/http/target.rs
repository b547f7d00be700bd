//! Which resource (and object) a request path names.

use crate::resource::{Registry, ResourceType};

/// A parsed API path: `/api/v1/...` (core) or `/apis/{group}/{version}/...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
}

impl Target {
    pub fn parse(path: &str) -> Option<Self> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => ("", *version, rest),
            ["apis", group, version, rest @ ..] => (*group, *version, rest),
            _ => return None,
        };
        let (namespace, plural, name) = match rest {
            ["namespaces", namespace, plural] => (Some(*namespace), *plural, None),
            ["namespaces", namespace, plural, name] => (Some(*namespace), *plural, Some(*name)),
            [plural] => (None, *plural, None),
            [plural, name] => (None, *plural, Some(*name)),
            _ => return None,
        };
        let named = [version, plural].into_iter().chain(namespace).chain(name);
        if named.into_iter().any(str::is_empty) || (segments[0] == "apis" && group.is_empty()) {
            return None;
        }
        Some(Self {
            group: group.to_owned(),
            version: version.to_owned(),
            namespace: namespace.map(str::to_owned),
            plural: plural.to_owned(),
            name: name.map(str::to_owned),
        })
    }

    /// The served resource type, if the path names one; a namespace in the path of a
    /// cluster-scoped resource names none.
    pub fn resource_type(&self, registry: &Registry) -> Option<ResourceType> {
        registry
            .served(&self.group, &self.version, &self.plural)
            .filter(|resource| resource.namespaced || self.namespace.is_none())
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(
        group: &str,
        version: &str,
        ns: Option<&str>,
        plural: &str,
        name: Option<&str>,
    ) -> Target {
        Target {
            group: group.into(),
            version: version.into(),
            namespace: ns.map(Into::into),
            plural: plural.into(),
            name: name.map(Into::into),
        }
    }

    #[test]
    fn core_and_group_paths() {
        let parse = |path| Target::parse(path).unwrap();
        assert_eq!(
            parse("/api/v1/services"),
            target("", "v1", None, "services", None)
        );
        assert_eq!(
            parse("/api/v1/namespaces/a/pods"),
            target("", "v1", Some("a"), "pods", None)
        );
        assert_eq!(
            parse("/api/v1/namespaces/a/pods/p"),
            target("", "v1", Some("a"), "pods", Some("p"))
        );
        assert_eq!(
            parse("/api/v1/nodes/n1"),
            target("", "v1", None, "nodes", Some("n1"))
        );
        // `namespaces/{name}` is a get of one Namespace.
        assert_eq!(
            parse("/api/v1/namespaces/a"),
            target("", "v1", None, "namespaces", Some("a"))
        );
        assert_eq!(
            parse("/apis/networking.istio.io/v1beta1/namespaces/a/virtualservices/vs"),
            target(
                "networking.istio.io",
                "v1beta1",
                Some("a"),
                "virtualservices",
                Some("vs")
            )
        );
        assert_eq!(
            parse("/apis/discovery.k8s.io/v1/endpointslices"),
            target("discovery.k8s.io", "v1", None, "endpointslices", None)
        );
    }

    #[test]
    fn other_paths_name_nothing() {
        for path in [
            "/api",
            "/api/v1",
            "/apis/g",
            "/apis/g/v1",
            "/api/v1/a/b/c",
            "/api/v1/namespaces//pods",
        ] {
            assert_eq!(Target::parse(path), None, "{path}");
        }
    }
}
