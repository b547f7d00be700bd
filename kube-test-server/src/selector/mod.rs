//! `labelSelector` and `fieldSelector` query parameters: parsing and matching, without I/O.
//!
//! Label selectors take the apiserver's grammar: `k=v`, `k==v`, `k!=v`, `k`, `!k`,
//! `k in (a,b)` and `k notin (a,b)`, joined by commas (all must hold). Field selectors take
//! `metadata.name` and `metadata.namespace` with `=`, `==` or `!=`: the fields every
//! resource supports, which is all a watcher of Shoal's kinds needs.

use serde_json::Value;

mod field;
mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;

/// Why a selector was refused (the server answers 400 Bad Request with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0:?}")]
    Malformed(String),
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

pub type Result<T, E = SelectorError> = std::result::Result<T, E>;

/// Which objects of one resource a list or watch asks for: a namespace (or all) and the
/// two selectors.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `None` for the all-namespaces path (and for cluster-scoped resources).
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selection {
    /// Parses the `labelSelector` and `fieldSelector` query parameters.
    pub fn parse(
        namespace: Option<String>,
        labels: Option<&str>,
        fields: Option<&str>,
    ) -> Result<Self> {
        Ok(Self {
            namespace,
            labels: LabelSelector::parse(labels.unwrap_or(""))?,
            fields: FieldSelector::parse(fields.unwrap_or(""))?,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        let in_namespace = self.namespace.as_deref().is_none_or(|namespace| {
            object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                == Some(namespace)
        });
        in_namespace && self.labels.matches(object) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests;
