//! The JSON shapes of the Kubernetes API: lists, `Status` errors, watch event lines.

use bytes::Bytes;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Value, json};

use crate::resource::ResourceType;
use crate::store::ListPage;
use crate::watch::EventType;

/// An object as served under `version`: the same object, `apiVersion` rewritten, as a
/// CRD with several served versions (and no schema change between them) is served.
pub fn served_as(object: &Value, resource: &ResourceType, version: &str) -> Value {
    let mut served = object.clone();
    if let Some(fields) = served.as_object_mut() {
        fields.insert("apiVersion".into(), resource.api_version(version).into());
        fields.insert("kind".into(), resource.kind.clone().into());
    }
    served
}

/// `{"kind": "<Kind>List", ...}` for one page, as kube-apiserver writes it: the items
/// of a built-in kind without `apiVersion` and `kind` (the list says them once;
/// kubernetes/kubernetes#3030, #63676: only kubectl adds them back), a custom resource's
/// items with them. An empty page's items are `null` when `null_empty` says so.
pub fn list<'a>(
    resource: &'a ResourceType,
    version: &str,
    page: &'a ListPage,
    null_empty: bool,
) -> List<'a> {
    let api_version = resource.api_version(version);
    let items: Vec<Item<'a>> = page
        .items
        .iter()
        .map(|object| Item {
            object,
            typed: (!resource.built_in).then(|| (api_version.clone(), resource.kind.as_str())),
        })
        .collect();
    let mut metadata = json!({"resourceVersion": page.revision.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = token.clone().into();
    }
    List {
        kind: format!("{}List", resource.kind),
        api_version,
        metadata,
        items: (!items.is_empty() || !null_empty).then_some(items),
    }
}

/// One page of a list, written as it is serialized (no copy of its objects).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct List<'a> {
    kind: String,
    api_version: String,
    metadata: Value,
    items: Option<Vec<Item<'a>>>,
}

/// A listed object: with the `apiVersion` and `kind` it is served as, or with neither.
pub struct Item<'a> {
    object: &'a Value,
    typed: Option<(String, &'a str)>,
}

impl Serialize for Item<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(fields) = self.object.as_object() else {
            return self.object.serialize(serializer);
        };
        let mut map = serializer.serialize_map(None)?;
        if let Some((api_version, kind)) = &self.typed {
            map.serialize_entry("apiVersion", api_version)?;
            map.serialize_entry("kind", kind)?;
        }
        for (key, value) in fields {
            if key != "apiVersion" && key != "kind" {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// A failure `Status`, the body of every error response and of watch ERROR events.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    })
}

/// A BOOKMARK's object: only kind, apiVersion and the resourceVersion the watch reached.
pub fn bookmark(resource: &ResourceType, version: &str, revision: u64, initial_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({
        "kind": resource.kind,
        "apiVersion": resource.api_version(version),
        "metadata": metadata,
    })
}

/// One watch event: a JSON document on a line of its own, `type` first and then
/// `object`, in the order kube-apiserver writes them (Go encodes a struct's fields in
/// their declared order).
pub fn event_line(event_type: EventType, object: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct WatchEvent<'a> {
        #[serde(rename = "type")]
        event_type: &'a str,
        object: &'a Value,
    }
    let event = WatchEvent {
        event_type: event_type.as_str(),
        object,
    };
    let mut line = serde_json::to_vec(&event).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::shoal_resources;
    use crate::store::ListPage;
    use std::sync::Arc;

    fn listed(resource: &str, null_empty: bool, items: Vec<Value>) -> Value {
        let registry = shoal_resources();
        let resource = registry
            .get(&crate::resource::GroupResource::from(resource))
            .unwrap();
        let page = ListPage {
            revision: 7,
            items: items.into_iter().map(Arc::new).collect(),
            continue_token: Some("7/a/b".into()),
        };
        let version = resource.preferred_version().to_owned();
        serde_json::to_value(list(resource, &version, &page, null_empty)).unwrap()
    }

    #[test]
    fn a_built_in_kinds_items_say_neither_api_version_nor_kind_a_custom_resources_do() {
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}});
        assert_eq!(
            listed("services", false, vec![service]),
            json!({"kind": "ServiceList", "apiVersion": "v1",
                   "metadata": {"resourceVersion": "7", "continue": "7/a/b"},
                   "items": [{"metadata": {"name": "a"}}]})
        );
        let vs = json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "VirtualService",
                        "metadata": {"name": "a"}, "spec": {}});
        let listed = listed("virtualservices.networking.istio.io", false, vec![vs]);
        assert_eq!(listed["items"][0]["apiVersion"], listed["apiVersion"]);
        assert_eq!(listed["items"][0]["kind"], "VirtualService");
        assert_eq!(listed["items"][0]["spec"], json!({}));
    }

    #[test]
    fn empty_lists_say_null_when_told_to() {
        assert_eq!(listed("services", true, vec![])["items"], Value::Null);
        assert_eq!(listed("services", false, vec![])["items"], json!([]));
    }

    #[test]
    fn a_watch_event_says_its_type_before_its_object_as_kube_apiserver_does() {
        let object = json!({"metadata": {"name": "a"}, "apiVersion": "v1"});
        let line = event_line(EventType::Added, &object);
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"}}}\n"
        );
    }
}
