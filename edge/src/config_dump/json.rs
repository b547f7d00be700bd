//! One xDS resource as Envoy's admin `/config_dump` writes it: proto3 JSON with the
//! `.proto` field names, every `Any` expanded with its `@type`, and fields Envoy marks
//! `udpa.annotations.sensitive` (private keys, passwords) replaced by [`REDACTED`].

use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use prost_reflect::{
    DescriptorPool, DynamicMessage, ExtensionDescriptor, MessageDescriptor, ReflectMessage,
    SerializeOptions, Value as Field,
};
use serde_json::Value;
use std::sync::OnceLock;

/// Envoy's descriptors, compiled by `build.rs` from the `.proto` files `envoy-types` was
/// generated from.
const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));

/// What Envoy writes in place of a sensitive field.
pub const REDACTED: &str = "[redacted]";

/// The option Envoy's API marks secrets with.
const SENSITIVE: &str = "udpa.annotations.sensitive";

/// Why a resource could not be written as JSON.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("Envoy's descriptors built into this edge do not load: {0}")]
    Descriptors(String),
    #[error("{0} is not a message type this edge's Envoy descriptors know")]
    UnknownType(String),
    #[error("{type_url} does not decode: {reason}")]
    Decode { type_url: String, reason: String },
}

struct Descriptors {
    pool: DescriptorPool,
    sensitive: Option<ExtensionDescriptor>,
}

/// Decoded once, on the first dump (~0.5 MB of descriptors; never on an edge nobody asks).
fn descriptors() -> Result<&'static Descriptors, JsonError> {
    static LOADED: OnceLock<Result<Descriptors, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let pool = DescriptorPool::decode(DESCRIPTORS).map_err(|e| e.to_string())?;
            let sensitive = pool.get_extension_by_name(SENSITIVE);
            Ok(Descriptors { pool, sensitive })
        })
        .as_ref()
        .map_err(|e| JsonError::Descriptors(e.clone()))
}

/// `resource` as Envoy's config dump shows it, `@type` first.
pub fn resource_json(resource: &Any) -> Result<Value, JsonError> {
    let d = descriptors()?;
    let mut message = decode(d, &resource.type_url, &resource.value)?;
    redact(d, &mut message, false);
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true);
    let mut json = message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| JsonError::Decode {
            type_url: resource.type_url.clone(),
            reason: e.to_string(),
        })?;
    if let Value::Object(fields) = &mut json {
        fields.insert("@type".into(), resource.type_url.clone().into());
    }
    Ok(json)
}

fn message_type(d: &Descriptors, type_url: &str) -> Result<MessageDescriptor, JsonError> {
    let name = type_url.rsplit('/').next().unwrap_or(type_url);
    d.pool
        .get_message_by_name(name)
        .ok_or_else(|| JsonError::UnknownType(type_url.to_string()))
}

fn decode(d: &Descriptors, type_url: &str, bytes: &[u8]) -> Result<DynamicMessage, JsonError> {
    DynamicMessage::decode(message_type(d, type_url)?, bytes).map_err(|e| JsonError::Decode {
        type_url: type_url.to_string(),
        reason: e.to_string(),
    })
}

/// Replaces the strings and bytes under every sensitive field with [`REDACTED`], as
/// Envoy's config dump does, looking into `Any`s (a TLS context inside a transport
/// socket's `typed_config` carries its key there). `inside` marks a sensitive ancestor.
fn redact(d: &Descriptors, message: &mut DynamicMessage, inside: bool) {
    if message.descriptor().full_name() == "google.protobuf.Any" {
        redact_any(d, message, inside);
        return;
    }
    for (field, value) in message.fields_mut() {
        let sensitive = inside || d.sensitive.as_ref().is_some_and(|ext| is_set(&field, ext));
        redact_value(d, value, sensitive);
    }
}

fn is_set(field: &prost_reflect::FieldDescriptor, ext: &ExtensionDescriptor) -> bool {
    let options = field.options();
    options.has_extension(ext) && matches!(*options.get_extension(ext), Field::Bool(true))
}

fn redact_value(d: &Descriptors, value: &mut Field, sensitive: bool) {
    match value {
        Field::Message(m) => redact(d, m, sensitive),
        Field::List(items) => items.iter_mut().for_each(|v| redact_value(d, v, sensitive)),
        Field::Map(entries) => entries
            .values_mut()
            .for_each(|v| redact_value(d, v, sensitive)),
        Field::String(s) if sensitive => *s = REDACTED.to_string(),
        Field::Bytes(b) if sensitive => *b = REDACTED.as_bytes().to_vec().into(),
        _ => {}
    }
}

/// An `Any`'s payload redacted in place (left as it is when its type is unknown: it is
/// then written as bytes, and no sensitive field of it can be named).
fn redact_any(d: &Descriptors, any: &mut DynamicMessage, inside: bool) {
    let Ok(held) = any.transcode_to::<Any>() else {
        return;
    };
    let Ok(mut inner) = decode(d, &held.type_url, &held.value) else {
        return;
    };
    redact(d, &mut inner, inside);
    let redacted = Any {
        type_url: held.type_url,
        value: inner.encode_to_vec(),
    };
    if let Ok(again) = DynamicMessage::decode(any.descriptor(), redacted.encode_to_vec().as_slice())
    {
        *any = again;
    }
}
