//! Kubernetes label selectors (`app=web`, `tier!=db`, `env in (prod,staging)`, `!legacy`):
//! parsed once, matched against any object's labels. Istio's discovery selectors and the
//! test API server's `labelSelector` both read them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// A parsed label selector: every requirement must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    text: String,
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

/// A selector that is not one: names it and the requirement at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label selector {selector:?}: malformed requirement {requirement:?}")]
pub struct SelectorError {
    pub selector: String,
    pub requirement: String,
}

impl LabelSelector {
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let requirements = split_requirements(selector)
            .into_iter()
            .map(|text| {
                parse_requirement(text).ok_or_else(|| SelectorError {
                    selector: selector.to_owned(),
                    requirement: text.to_owned(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            requirements,
            text: selector.to_owned(),
        })
    }

    /// Whether labels read through `label` (a key's value, if set) satisfy every
    /// requirement.
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
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

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|key| labels.get(key).map(String::as_str))
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, SelectorError> {
        Self::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Splits at the commas that separate requirements, not those inside `in (a,b)`.
pub fn split_requirements(selector: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0_i32;
    let mut start = 0;
    for (at, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&selector[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .collect()
}

fn parse_requirement(text: &str) -> Option<Requirement> {
    if let Some(key) = text.strip_prefix('!') {
        return Some(Requirement::NotExists(label_key(key.trim())?));
    }
    if let Some((key, value)) = text.split_once("!=") {
        return Some(Requirement::NotEquals(
            label_key(key)?,
            value.trim().to_owned(),
        ));
    }
    if let Some((key, value)) = text.split_once("==").or_else(|| text.split_once('=')) {
        return Some(Requirement::Equals(
            label_key(key)?,
            value.trim().to_owned(),
        ));
    }
    if let Some((key, set)) = text.split_once('(') {
        let values = set
            .strip_suffix(')')?
            .split(',')
            .map(|value| value.trim().to_owned())
            .collect();
        let mut words = key.split_whitespace();
        let (key, operator) = (words.next(), words.next());
        if words.next().is_some() {
            return None;
        }
        let key = label_key(key?)?;
        return match operator {
            Some("in") => Some(Requirement::In(key, values)),
            Some("notin") => Some(Requirement::NotIn(key, values)),
            _ => None,
        };
    }
    Some(Requirement::Exists(label_key(text)?))
}

/// A key is one word: no spaces, operators or parentheses.
fn label_key(key: &str) -> Option<String> {
    let key = key.trim();
    let valid =
        !key.is_empty() && !key.contains(|c: char| c.is_whitespace() || "!=(),".contains(c));
    valid.then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn requirements_match_as_kubernetes_reads_them() {
        let s =
            LabelSelector::parse("istio-discovery=enabled,env in (prod, staging),!legacy").unwrap();
        assert!(s.matches(&labels(&[("istio-discovery", "enabled"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[("istio-discovery", "enabled"), ("env", "dev")])));
        let legacy = labels(&[
            ("istio-discovery", "enabled"),
            ("env", "prod"),
            ("legacy", ""),
        ]);
        assert!(!s.matches(&legacy));
        let s = LabelSelector::parse("team!=payments,tier notin (batch),owner").unwrap();
        assert!(s.matches(&labels(&[("owner", "x")])));
        assert!(!s.matches(&labels(&[("owner", "x"), ("team", "payments")])));
        assert!(LabelSelector::parse("").unwrap().matches(&BTreeMap::new()));
        assert_eq!(s.to_string(), "team!=payments,tier notin (batch),owner");
    }

    #[test]
    fn malformed_selectors_name_the_requirement() {
        for bad in ["app in prod", "a b=c", "app in (x", "=x", "!", "app on (x)"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?} parsed");
        }
        let err = LabelSelector::parse("app=web,a b=c").unwrap_err();
        assert_eq!(err.requirement, "a b=c");
    }
}
