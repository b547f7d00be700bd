use serde_json::Value;

use super::{Result, SelectorError};
use shoal_proto::config::selector::split_requirements;

/// A parsed `fieldSelector` on `metadata.name` / `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    /// JSON pointer of the field: `/metadata/name` or `/metadata/namespace`.
    pointer: &'static str,
    value: String,
    equal: bool,
}

impl FieldSelector {
    pub fn parse(selector: &str) -> Result<Self> {
        let requirements = split_requirements(selector)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_>>()?;
        Ok(Self { requirements })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|requirement| {
            // An absent field reads as "" (a cluster-scoped object's namespace).
            let actual = object
                .pointer(requirement.pointer)
                .and_then(Value::as_str)
                .unwrap_or("");
            (actual == requirement.value) == requirement.equal
        })
    }
}

fn parse_requirement(text: &str) -> Result<Requirement> {
    let (field, value, equal) = if let Some((field, value)) = text.split_once("!=") {
        (field, value, false)
    } else if let Some((field, value)) = text.split_once("==").or_else(|| text.split_once('=')) {
        (field, value, true)
    } else {
        return Err(SelectorError::Malformed(text.to_owned()));
    };
    let pointer = match field.trim() {
        "metadata.name" => "/metadata/name",
        "metadata.namespace" => "/metadata/namespace",
        other => return Err(SelectorError::UnsupportedField(other.to_owned())),
    };
    Ok(Requirement {
        pointer,
        value: value.trim().to_owned(),
        equal,
    })
}
