use serde_json::Value;
use shoal_proto::config::selector;

use super::{Result, SelectorError};

/// A parsed `labelSelector` (the mesh's own [`selector::LabelSelector`]), matched against
/// an object's `metadata.labels`. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(selector::LabelSelector);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self> {
        selector::LabelSelector::parse(text)
            .map(Self)
            .map_err(|e| SelectorError::Malformed(e.requirement))
    }

    /// Whether the labels of `object` (its `metadata.labels`) satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        self.0
            .matches_with(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
    }
}
