//! An object from the API server → a Shoal [`Config`], through the same parser and
//! validation as a file in the directory (JSON is YAML), so both registries accept and
//! reject exactly the same objects.

use crate::registry::Rejection;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use shoal_proto::config::parse::parse_documents;
use shoal_proto::config::{Config, ConfigKey, Kind};

/// What became of one object.
#[derive(Debug)]
pub enum Converted {
    /// Accepted (with what is worth an operator's look).
    Config(Box<Config>, Vec<String>),
    /// Rejected: the earlier valid version, if any, stays served.
    Rejected(Rejection),
    /// Not a kind Shoal reads.
    Skipped,
}

/// Parses `object`; `origin` names where it came from in rejections (`kubernetes/<cluster>`).
pub fn convert(object: &DynamicObject, origin: &str) -> Converted {
    let text = match serde_json::to_string(object) {
        Ok(text) => text,
        Err(e) => {
            return Converted::Rejected(Rejection::unreadable(origin, e.to_string()));
        }
    };
    match parse_documents(origin, &text).into_iter().next() {
        Some(Ok(parsed)) => Converted::Config(Box::new(parsed.config), parsed.warnings),
        Some(Err(error)) => Converted::Rejected(Rejection::from_parse(&error)),
        None => Converted::Skipped,
    }
}

/// The `apiVersion` and `kind` of what a watch of `resource` lists.
pub fn types_of(resource: &ApiResource) -> TypeMeta {
    TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    }
}

/// Types `object` as the resource it was listed or watched from: kube-apiserver writes
/// the items of a built-in kind's list without `apiVersion` and `kind`
/// (kubernetes/kubernetes#3030), so an item never says what it is; the watch does.
pub fn typed(object: &mut DynamicObject, types: &TypeMeta) {
    object.types = Some(types.clone());
}

/// The key of an object of `kind` (for a delete, whose last state may not parse).
pub fn key_of(kind: Kind, object: &DynamicObject) -> Option<ConfigKey> {
    let name = object.metadata.name.clone()?;
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    Some(ConfigKey::new(kind, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_api_object_parses_as_a_file_would() {
        let vs = object(json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": "reviews", "namespace": "shop", "resourceVersion": "7",
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews"}}]}]},
            "status": {"conditions": []},
        }));
        let Converted::Config(config, _) = convert(&vs, "kubernetes/c1") else {
            panic!("rejected");
        };
        assert_eq!(config.key().to_string(), "VirtualService shop/reviews");
    }

    #[test]
    fn an_invalid_object_is_rejected_by_name_with_its_reason() {
        let vs = object(json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": "broken", "namespace": "shop"},
            "spec": {"hosts": ["reviews"], "http": [{"route": [
                {"destination": {"host": "reviews", "subset": "v1"}, "weight": 0},
                {"destination": {"host": "reviews", "subset": "v2"}, "weight": 0},
            ]}]},
        }));
        let Converted::Rejected(rejection) = convert(&vs, "kubernetes/c1") else {
            panic!("accepted");
        };
        assert_eq!(rejection.object, "VirtualService shop/broken");
        assert_eq!(rejection.file, "kubernetes/c1");
        assert!(rejection.reason.contains("weight"), "{rejection:?}");
    }

    #[test]
    fn a_listed_item_without_api_version_or_kind_is_typed_by_its_watch() {
        // A Service as it is an item of kube-apiserver's ServiceList.
        let mut item = object(json!({
            "metadata": {"name": "reviews", "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": 9080}]},
        }));
        assert!(matches!(
            convert(&item, "kubernetes/c1"),
            Converted::Rejected(_)
        ));
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&());
        typed(&mut item, &types_of(&resource));
        let Converted::Config(config, _) = convert(&item, "kubernetes/c1") else {
            panic!("rejected");
        };
        assert_eq!(config.key().to_string(), "Service shop/reviews");
    }

    #[test]
    fn kinds_shoal_does_not_read_are_skipped() {
        let cm = object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "shop"},
        }));
        assert!(matches!(convert(&cm, "kubernetes/c1"), Converted::Skipped));
    }
}
