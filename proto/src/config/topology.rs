//! Node localities: each Pod's `region/zone/subzone`, read from its Node's topology
//! labels as Istio's Kubernetes controller does.
//!
//! Nodes are not mesh config and never reach the KV: each registry (the Kubernetes API's
//! and the directory's, alike) keeps their localities here and writes each onto the
//! Pods of that node ([`PodSpec::node_locality`]). A Node whose locality changes
//! rewrites its Pods, so their endpoints move with it.

use super::{Config, ConfigKey, Spec, k8s::PodSpec};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const SUBZONE_LABEL: &str = "topology.istio.io/subzone";

/// `region/zone/subzone` from a Node's labels, with trailing empty parts left out.
pub fn locality_of(labels: &BTreeMap<String, String>) -> String {
    let part = |label| labels.get(label).map_or("", String::as_str);
    let mut parts = [part(REGION_LABEL), part(ZONE_LABEL), part(SUBZONE_LABEL)].to_vec();
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts.join("/")
}

/// The localities of the Nodes listed so far, and which Pods run on each.
#[derive(Debug, Default)]
pub struct NodeLocalities {
    locality: HashMap<String, String>,
    pods_on: HashMap<String, BTreeSet<ConfigKey>>,
    node_of: HashMap<ConfigKey, String>,
}

impl NodeLocalities {
    /// Writes its Node's locality onto a Pod and remembers which node it runs on; other
    /// kinds pass through.
    pub fn stamp(&mut self, config: &mut Config) {
        if !matches!(config.spec, Spec::Pod(_)) {
            return;
        }
        let key = config.key();
        let Spec::Pod(pod) = &mut config.spec else {
            return;
        };
        self.forget_pod(&key);
        if pod.node_name.is_empty() {
            return;
        }
        pod.node_locality = self
            .locality
            .get(&pod.node_name)
            .cloned()
            .unwrap_or_default();
        self.pods_on
            .entry(pod.node_name.clone())
            .or_default()
            .insert(key.clone());
        self.node_of.insert(key, pod.node_name.clone());
    }

    /// The Pod is gone.
    pub fn forget_pod(&mut self, key: &ConfigKey) {
        if let Some(node) = self.node_of.remove(key)
            && let Some(pods) = self.pods_on.get_mut(&node)
        {
            pods.remove(key);
            if pods.is_empty() {
                self.pods_on.remove(&node);
            }
        }
    }

    /// A Node was added or changed: the Pods to rewrite when its locality moved.
    pub fn set_node(&mut self, name: &str, labels: &BTreeMap<String, String>) -> Vec<ConfigKey> {
        let locality = locality_of(labels);
        if self.locality.get(name) == Some(&locality) {
            return Vec::new();
        }
        self.locality.insert(name.to_string(), locality);
        self.pods_on
            .get(name)
            .map(|pods| pods.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// A Node was deleted. Its Pods keep the locality they have: they are deleted with it.
    pub fn remove_node(&mut self, name: &str) {
        self.locality.remove(name);
    }

    /// The Nodes known, for a relist to find those deleted while the watch was down.
    pub fn nodes(&self) -> Vec<String> {
        self.locality.keys().cloned().collect()
    }

    /// A copy of a Pod with its Node's locality now; `None` for other kinds.
    pub fn restamped(&self, config: &Config) -> Option<Config> {
        let Spec::Pod(PodSpec { node_name, .. }) = &config.spec else {
            return None;
        };
        let locality = self.locality.get(node_name).cloned().unwrap_or_default();
        let mut config = config.clone();
        if let Spec::Pod(pod) = &mut config.spec {
            pod.node_locality = locality;
        }
        Some(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigMeta, Kind};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    fn pod(name: &str, node: &str) -> Config {
        Config {
            meta: ConfigMeta {
                name: name.into(),
                namespace: "shop".into(),
                ..Default::default()
            },
            spec: Spec::Pod(PodSpec {
                node_name: node.into(),
                ..Default::default()
            }),
        }
    }

    fn locality(config: &Config) -> &str {
        match &config.spec {
            Spec::Pod(p) => &p.node_locality,
            _ => panic!("not a pod"),
        }
    }

    #[test]
    fn locality_reads_region_zone_and_subzone() {
        let l = labels(&[(REGION_LABEL, "us-east1"), (ZONE_LABEL, "us-east1-b")]);
        assert_eq!(locality_of(&l), "us-east1/us-east1-b");
        let l = labels(&[(REGION_LABEL, "r"), (ZONE_LABEL, "z"), (SUBZONE_LABEL, "s")]);
        assert_eq!(locality_of(&l), "r/z/s");
        assert_eq!(locality_of(&labels(&[(ZONE_LABEL, "z")])), "/z");
        assert_eq!(locality_of(&BTreeMap::new()), "");
    }

    #[test]
    fn a_pod_gets_its_node_locality_and_moves_with_it() {
        let mut nodes = NodeLocalities::default();
        nodes.set_node("n1", &labels(&[(REGION_LABEL, "r1"), (ZONE_LABEL, "z1")]));
        let mut p = pod("web-1", "n1");
        nodes.stamp(&mut p);
        assert_eq!(locality(&p), "r1/z1");

        // A pod listed before its node gets the locality once the node arrives.
        let mut early = pod("web-2", "n2");
        nodes.stamp(&mut early);
        assert_eq!(locality(&early), "");
        let moved = nodes.set_node("n2", &labels(&[(REGION_LABEL, "r2")]));
        assert_eq!(moved, vec![ConfigKey::new(Kind::Pod, "shop", "web-2")]);
        assert_eq!(locality(&nodes.restamped(&early).unwrap()), "r2");

        // Unchanged labels rewrite nothing; a deleted pod is not rewritten.
        assert!(
            nodes
                .set_node("n2", &labels(&[(REGION_LABEL, "r2")]))
                .is_empty()
        );
        nodes.forget_pod(&early.key());
        assert!(
            nodes
                .set_node("n2", &labels(&[(REGION_LABEL, "r3")]))
                .is_empty()
        );
    }
}
