use std::collections::BTreeSet;

use serde_json::Value;

use super::{Result, SelectorError, split_requirements};

/// A parsed `labelSelector`: every requirement must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    /// Also holds when the label is absent, as in Kubernetes.
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, BTreeSet<String>),
    /// Also holds when the label is absent, as in Kubernetes.
    NotIn(String, BTreeSet<String>),
}

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self> {
        let requirements = split_requirements(selector)
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<_>>()?;
        Ok(Self { requirements })
    }

    /// Whether the labels of `object` (its `metadata.labels`) satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.requirements
            .iter()
            .all(|requirement| match requirement {
                Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
                Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
                Requirement::Exists(key) => label(key).is_some(),
                Requirement::NotExists(key) => label(key).is_none(),
                Requirement::In(key, values) => label(key).is_some_and(|v| values.contains(v)),
                Requirement::NotIn(key, values) => !label(key).is_some_and(|v| values.contains(v)),
            })
    }
}

fn parse_requirement(text: &str) -> Result<Requirement> {
    let malformed = || SelectorError::Malformed(text.to_owned());
    if let Some(key) = text.strip_prefix('!') {
        return Ok(Requirement::NotExists(
            label_key(key.trim()).ok_or_else(malformed)?,
        ));
    }
    if let Some((key, value)) = text.split_once("!=") {
        return Ok(Requirement::NotEquals(
            label_key(key).ok_or_else(malformed)?,
            value.trim().to_owned(),
        ));
    }
    if let Some((key, value)) = text.split_once("==").or_else(|| text.split_once('=')) {
        return Ok(Requirement::Equals(
            label_key(key).ok_or_else(malformed)?,
            value.trim().to_owned(),
        ));
    }
    if let Some((key, set)) = text.split_once('(') {
        let values = set
            .strip_suffix(')')
            .ok_or_else(malformed)?
            .split(',')
            .map(|value| value.trim().to_owned())
            .collect();
        let mut words = key.split_whitespace();
        let (key, operator) = (words.next(), words.next());
        if words.next().is_some() {
            return Err(malformed());
        }
        let key = key.and_then(label_key).ok_or_else(malformed)?;
        return match operator {
            Some("in") => Ok(Requirement::In(key, values)),
            Some("notin") => Ok(Requirement::NotIn(key, values)),
            _ => Err(malformed()),
        };
    }
    Ok(Requirement::Exists(label_key(text).ok_or_else(malformed)?))
}

/// A key is one word: no spaces, operators or parentheses.
fn label_key(key: &str) -> Option<String> {
    let key = key.trim();
    let valid =
        !key.is_empty() && !key.contains(|c: char| c.is_whitespace() || "!=(),".contains(c));
    valid.then(|| key.to_owned())
}
