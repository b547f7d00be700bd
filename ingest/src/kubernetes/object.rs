//! An object as the API server sends it, kept as its JSON text: `convert` parses that
//! text once, straight into Shoal's typed config. No untyped JSON tree is built (what a
//! `DynamicObject` holds until it is dropped), nor the full `ObjectMeta`: only what the
//! watch's bookkeeping reads (name, namespace, resourceVersion, labels).
//!
//! The text is written as the object is read (transcoded), so it does not depend on how
//! the client reads a response: a list's items come straight from the body, while a
//! watch event whose `object` precedes its `type` is buffered first.

use kube::core::{ApiResource, DynamicResourceScope, ObjectMeta, Resource};
use serde::de::Error as _;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// One object of a watched resource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApiObject {
    /// What the watch reads: name, namespace, resourceVersion and labels only.
    pub metadata: ObjectMeta,
    /// The whole object, compact JSON.
    pub json: String,
}

impl ApiObject {
    /// The object from its JSON text; an error when it is not a JSON object.
    pub fn from_json(json: String) -> Result<Self, serde_json::Error> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            metadata: Meta,
        }
        #[derive(Default, Deserialize)]
        #[serde(rename_all = "camelCase", default)]
        struct Meta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
            labels: Option<BTreeMap<String, String>>,
        }
        if !json.starts_with('{') {
            return Err(<serde_json::Error as de::Error>::custom(
                "not a JSON object",
            ));
        }
        let Head { metadata: meta } = serde_json::from_str(&json)?;
        Ok(Self {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                resource_version: meta.resource_version,
                labels: meta.labels,
                ..ObjectMeta::default()
            },
            json,
        })
    }
}

impl<'de> Deserialize<'de> for ApiObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut json = Vec::with_capacity(512);
        Transcode(&mut json).deserialize(deserializer)?;
        // Only valid UTF-8 was written: strings went through serde_json's writer.
        let json = String::from_utf8(json).map_err(D::Error::custom)?;
        Self::from_json(json).map_err(D::Error::custom)
    }
}

// Written back as read (kube's watcher never writes objects; tests and logs may).
impl Serialize for ApiObject {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value: serde_json::Value =
            serde_json::from_str(&self.json).map_err(<S::Error as serde::ser::Error>::custom)?;
        value.serialize(serializer)
    }
}

impl Resource for ApiObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Writes whatever it deserializes as compact JSON.
struct Transcode<'a>(&'a mut Vec<u8>);

impl Transcode<'_> {
    fn string<E: de::Error>(self, s: &str) -> Result<(), E> {
        serde_json::to_writer(&mut *self.0, s).map_err(E::custom)
    }
}

impl<'de> DeserializeSeed<'de> for Transcode<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Transcode<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.0.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        serde_json::to_writer(&mut *self.0, &v).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        serde_json::to_writer(&mut *self.0, &v).map_err(E::custom)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        // Not finite: JSON has no such number (serde_json writes null, as here).
        serde_json::to_writer(&mut *self.0, &v).map_err(E::custom)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.string(v)
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.extend_from_slice(b"null");
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push(b'[');
        let mut first = true;
        loop {
            let at = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if seq.next_element_seed(Transcode(&mut *self.0))?.is_none() {
                self.0.truncate(at);
                break;
            }
            first = false;
        }
        self.0.push(b']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.push(b'{');
        let mut first = true;
        loop {
            let at = self.0.len();
            if !first {
                self.0.push(b',');
            }
            if map.next_key_seed(Key(&mut *self.0))?.is_none() {
                self.0.truncate(at);
                break;
            }
            self.0.push(b':');
            map.next_value_seed(Transcode(&mut *self.0))?;
            first = false;
        }
        self.0.push(b'}');
        Ok(())
    }
}

/// Writes a map's key as a JSON string.
struct Key<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        Transcode(self.0).string(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_keeps_its_whole_text_and_the_metadata_a_watch_reads() {
        let value = json!({
            "metadata": {"name": "reviews", "namespace": "shop", "resourceVersion": "7",
                         "labels": {"app": "reviews"}, "uid": "u"},
            "spec": {"ports": [{"port": 9080, "weight": 1.5, "on": true, "none": null}],
                     "text": "quote \" and \u{e9}\n", "empty": {}, "list": []},
        });
        let object: ApiObject = serde_json::from_str(&value.to_string()).unwrap();
        assert_eq!(object.metadata.name.as_deref(), Some("reviews"));
        assert_eq!(object.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(object.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(object.metadata.labels.as_ref().unwrap()["app"], "reviews");
        assert_eq!(object.metadata.uid, None);
        let read: serde_json::Value = serde_json::from_str(&object.json).unwrap();
        assert_eq!(read, value);
        assert_eq!(serde_json::to_value(&object).unwrap(), value);
    }

    #[test]
    fn a_watch_event_reads_the_same_whatever_the_order_of_its_fields() {
        // `object` before `type`: the client buffers the object before reading it.
        for line in [
            r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"2"},"x":[1,{"y":"z"}]}}"#,
            r#"{"object":{"metadata":{"name":"a","resourceVersion":"2"},"x":[1,{"y":"z"}]},"type":"ADDED"}"#,
        ] {
            let event: kube::core::WatchEvent<ApiObject> = serde_json::from_str(line).unwrap();
            let kube::core::WatchEvent::Added(object) = event else {
                panic!("{line}");
            };
            assert_eq!(
                object.json,
                r#"{"metadata":{"name":"a","resourceVersion":"2"},"x":[1,{"y":"z"}]}"#
            );
            assert_eq!(object.metadata.resource_version.as_deref(), Some("2"));
        }
    }

    #[test]
    fn what_is_not_an_object_is_an_error() {
        assert!(serde_json::from_str::<ApiObject>("[1]").is_err());
        assert!(serde_json::from_str::<ApiObject>("[]").is_err());
        assert!(serde_json::from_str::<ApiObject>(r#"{"metadata": 1}"#).is_err());
    }
}
