//! Istio's discovery selectors: which namespaces' objects the mesh reads, chosen by label
//! selectors on the Namespace (a namespace any selector matches is selected; none given:
//! all are). Objects of a namespace that is not selected are held back ("parked") rather
//! than dropped, so relabelling a namespace in or out of the mesh moves its objects at
//! once, without a relist, as Istio's informer caches do.

use shoal_proto::config::{Config, ConfigKey};
use std::collections::{BTreeMap, BTreeSet};

pub use shoal_proto::config::selector::LabelSelector;

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
    use crate::testing::labels;

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
