//! Istio's discovery selectors: which namespaces' objects the mesh reads, chosen by label
//! selectors on the Namespace (a namespace any selector matches is selected; none given:
//! all are). Objects of a namespace that is not selected are held back ("parked") rather
//! than dropped, so relabelling a namespace in or out of the mesh moves its objects at
//! once, without a relist, as Istio's informer caches do.

use shoal_proto::config::{Config, ConfigKey};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// A Kubernetes label selector: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`,
/// `k notin (a,b)`, comma-separated, all of which must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    text: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        }
    }
}

impl LabelSelector {
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a selector could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("label selector {selector:?}: {reason}")]
pub struct SelectorError {
    selector: String,
    reason: String,
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, SelectorError> {
        let fail = |reason: &str| SelectorError {
            selector: text.to_string(),
            reason: reason.to_string(),
        };
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                return Err(fail("an empty requirement"));
            }
            let set = |rest: &str| -> Option<Vec<String>> {
                let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
                Some(inner.split(',').map(|v| v.trim().to_string()).collect())
            };
            let requirement = if let Some((k, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(
                    k.trim().into(),
                    set(rest).ok_or_else(|| fail("notin needs (values)"))?,
                )
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Requirement::In(
                    k.trim().into(),
                    set(rest).ok_or_else(|| fail("in needs (values)"))?,
                )
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().into())
            } else {
                Requirement::Exists(part.into())
            };
            let key = match &requirement {
                Requirement::Equals(k, _)
                | Requirement::NotEquals(k, _)
                | Requirement::Exists(k)
                | Requirement::NotExists(k)
                | Requirement::In(k, _)
                | Requirement::NotIn(k, _) => k,
            };
            if key.is_empty() || key.contains(char::is_whitespace) {
                return Err(fail("a requirement without a label key"));
            }
            requirements.push(requirement);
        }
        Ok(LabelSelector {
            requirements,
            text: text.to_string(),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Which namespaces are selected, and the objects parked in the others.
#[derive(Debug, Default)]
pub struct Discovery {
    selectors: Vec<LabelSelector>,
    selected: BTreeSet<String>,
    parked: BTreeMap<ConfigKey, Config>,
}

/// What a Namespace event changed.
#[derive(Debug, PartialEq, Eq)]
pub enum Selection {
    Unchanged,
    Selected,
    Unselected,
}

impl Discovery {
    pub fn new(selectors: Vec<LabelSelector>) -> Self {
        Self {
            selectors,
            ..Default::default()
        }
    }

    /// Whether objects of `namespace` are read now.
    pub fn is_selected(&self, namespace: &str) -> bool {
        self.selectors.is_empty() || self.selected.contains(namespace)
    }

    /// A Namespace with `labels` was seen (`None`: deleted).
    pub fn namespace(
        &mut self,
        name: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Selection {
        if self.selectors.is_empty() {
            return Selection::Unchanged;
        }
        let now = labels.is_some_and(|l| self.selectors.iter().any(|s| s.matches(l)));
        let before = self.selected.contains(name);
        match (before, now) {
            (false, true) => {
                self.selected.insert(name.to_string());
                Selection::Selected
            }
            (true, false) => {
                self.selected.remove(name);
                Selection::Unselected
            }
            _ => Selection::Unchanged,
        }
    }

    pub fn park(&mut self, config: Config) {
        self.parked.insert(config.key(), config);
    }

    pub fn unpark_key(&mut self, key: &ConfigKey) -> Option<Config> {
        self.parked.remove(key)
    }

    /// The objects parked in `namespace`, taken out.
    pub fn unpark(&mut self, namespace: &str) -> Vec<Config> {
        let keys: Vec<ConfigKey> = self
            .parked
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect();
        keys.iter().filter_map(|k| self.parked.remove(k)).collect()
    }
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
    fn selectors_parse_and_match_as_kubernetes_reads_them() {
        let s: LabelSelector = "istio-discovery=enabled,env in (prod, staging),!legacy"
            .parse()
            .unwrap();
        assert!(s.matches(&labels(&[("istio-discovery", "enabled"), ("env", "prod")])));
        assert!(!s.matches(&labels(&[("istio-discovery", "enabled"), ("env", "dev")])));
        assert!(!s.matches(&labels(&[
            ("istio-discovery", "enabled"),
            ("env", "prod"),
            ("legacy", "")
        ])));
        let s: LabelSelector = "team!=payments,tier notin (batch),owner".parse().unwrap();
        assert!(s.matches(&labels(&[("owner", "x")])));
        assert!(!s.matches(&labels(&[("owner", "x"), ("team", "payments")])));
        assert!("a=b,,c".parse::<LabelSelector>().is_err());
        assert!("k in a,b".parse::<LabelSelector>().is_err());
    }

    #[test]
    fn namespaces_move_in_and_out_of_the_selection() {
        let mut d = Discovery::new(vec!["mesh=on".parse().unwrap()]);
        assert!(!d.is_selected("shop"));
        assert_eq!(
            d.namespace("shop", Some(&labels(&[("mesh", "on")]))),
            Selection::Selected
        );
        assert!(d.is_selected("shop"));
        assert_eq!(
            d.namespace("shop", Some(&labels(&[("mesh", "on")]))),
            Selection::Unchanged
        );
        assert_eq!(
            d.namespace("shop", Some(&labels(&[]))),
            Selection::Unselected
        );
        assert_eq!(d.namespace("shop", None), Selection::Unchanged);
        // No selectors: every namespace.
        assert!(Discovery::new(vec![]).is_selected("any"));
    }
}
