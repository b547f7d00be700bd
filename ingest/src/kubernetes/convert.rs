//! An object from the API server → a Shoal [`Config`], through the same typed decoding
//! and validation as a file in the directory (its JSON read with serde_json, and an
//! object that does not pass read again as YAML, as a file is), so both registries
//! accept and reject exactly the same objects.

use super::object::ApiObject;
use crate::registry::Rejection;
use kube::api::{ApiResource, TypeMeta};
use shoal_proto::config::parse::parse_api_object;
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

/// Parses `object`, listed or watched as `types`; `origin` names where it came from in
/// rejections (`kubernetes/<cluster>`).
///
/// kube-apiserver writes the items of a built-in kind's list without `apiVersion` and
/// `kind` (kubernetes/kubernetes#3030), so an item never says what it is; the watch does.
pub fn convert(object: &ApiObject, types: &TypeMeta, origin: &str) -> Converted {
    let types = (types.api_version.as_str(), types.kind.as_str());
    match parse_api_object(origin, types, &object.json) {
        Ok(Some(parsed)) => Converted::Config(Box::new(parsed.config), parsed.warnings),
        Ok(None) => Converted::Skipped,
        Err(error) => Converted::Rejected(Rejection::from_parse(&error)),
    }
}

/// The `apiVersion` and `kind` of what a watch of `resource` lists.
pub fn types_of(resource: &ApiResource) -> TypeMeta {
    TypeMeta {
        api_version: resource.api_version.clone(),
        kind: resource.kind.clone(),
    }
}

/// The key of an object of `kind` (for a delete, whose last state may not parse).
pub fn key_of(kind: Kind, object: &ApiObject) -> Option<ConfigKey> {
    let name = object.metadata.name.clone()?;
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    Some(ConfigKey::new(kind, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: serde_json::Value) -> ApiObject {
        serde_json::from_value(value).unwrap()
    }

    fn types(api_version: &str, kind: &str) -> TypeMeta {
        TypeMeta {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }

    fn vs_types() -> TypeMeta {
        types("networking.istio.io/v1", "VirtualService")
    }

    #[test]
    fn an_api_object_parses_as_a_file_would() {
        let value = json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": "reviews", "namespace": "shop", "resourceVersion": "7",
                         "labels": {"app": "reviews"},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews"}}]}],
                     "mirrorPolicy": {}},
            "status": {"conditions": []},
        });
        let Converted::Config(config, warnings) =
            convert(&object(value.clone()), &vs_types(), "kubernetes/c1")
        else {
            panic!("rejected");
        };
        assert_eq!(config.key().to_string(), "VirtualService shop/reviews");
        // The same object as a file of the directory.
        let file = serde_json::to_string(&value).unwrap();
        let mut parsed = shoal_proto::config::parse::parse_documents("f.yaml", &file);
        assert_eq!(parsed.len(), 1);
        let parsed = parsed.remove(0).expect("the file is accepted");
        assert_eq!(*config, parsed.config);
        assert_eq!(warnings, parsed.warnings);
        assert!(warnings[0].contains("spec.mirrorPolicy"), "{warnings:?}");
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
        let Converted::Rejected(rejection) = convert(&vs, &vs_types(), "kubernetes/c1") else {
            panic!("accepted");
        };
        assert_eq!(rejection.object, "VirtualService shop/broken");
        assert_eq!(rejection.file, "kubernetes/c1");
        assert!(rejection.reason.contains("weight"), "{rejection:?}");
    }

    #[test]
    fn an_object_that_does_not_decode_is_rejected_by_name_as_a_file_is() {
        // A port that is not a number: the reason is the directory's, word for word.
        let value = json!({
            "metadata": {"name": "reviews", "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": "eighty"}]},
        });
        let service = types("v1", "Service");
        let Converted::Rejected(rejection) =
            convert(&object(value.clone()), &service, "kubernetes/c1")
        else {
            panic!("accepted");
        };
        assert_eq!(
            (
                rejection.object.as_str(),
                rejection.file.as_str(),
                rejection.line
            ),
            ("Service shop/reviews", "kubernetes/c1", 1)
        );
        let mut file = value;
        file["apiVersion"] = "v1".into();
        file["kind"] = "Service".into();
        let file = serde_json::to_string(&file).unwrap();
        let mut parsed = shoal_proto::config::parse::parse_documents("f.yaml", &file);
        assert_eq!(parsed.len(), 1);
        let error = parsed.remove(0).expect_err("the file is rejected");
        assert_eq!(rejection.reason, error.reason);
    }

    #[test]
    fn a_listed_item_without_api_version_or_kind_is_typed_by_its_watch() {
        // A Service as it is an item of kube-apiserver's ServiceList.
        let item = object(json!({
            "metadata": {"name": "reviews", "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": 9080}]},
        }));
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&());
        let Converted::Config(config, _) = convert(&item, &types_of(&resource), "kubernetes/c1")
        else {
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
        assert!(matches!(
            convert(&cm, &types("v1", "ConfigMap"), "kubernetes/c1"),
            Converted::Skipped
        ));
    }
}
