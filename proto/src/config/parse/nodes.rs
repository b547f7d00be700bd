//! Node objects in files: not mesh config, but their topology labels are the localities
//! of the Pods on them ([`crate::config::topology`]), as in the Kubernetes registry.

use super::{Location, list};
use serde::Deserialize;
use std::collections::BTreeMap;

/// A Node's name and labels, and where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLabels {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub location: Location,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNode {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: RawMeta,
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct RawMeta {
    name: String,
    labels: BTreeMap<String, String>,
}

/// Every `v1` Node of `text` (lists' items too) with a name. Documents that are not
/// Nodes, or do not parse, are [`super::parse_documents`]'s to report.
pub fn parse_nodes(source: &str, text: &str) -> Vec<NodeLabels> {
    let mut nodes = Vec::new();
    for (line, doc) in list::objects(text) {
        if !doc.contains("Node") {
            continue;
        }
        let Ok(node) = serde_norway::from_str::<RawNode>(&doc) else {
            continue;
        };
        if node.api_version == "v1" && node.kind == "Node" && !node.metadata.name.is_empty() {
            nodes.push(NodeLabels {
                name: node.metadata.name,
                labels: node.metadata.labels,
                location: Location {
                    source: source.to_string(),
                    line,
                },
            });
        }
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_and_listed_nodes_are_read_with_their_labels() {
        let text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels: {topology.kubernetes.io/region: r1}\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: n2}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n";
        let nodes = parse_nodes("n.yaml", text);
        let names: Vec<(&str, usize)> = nodes
            .iter()
            .map(|n| (n.name.as_str(), n.location.line))
            .collect();
        assert_eq!(names, [("n1", 1), ("n2", 10)]);
        assert_eq!(nodes[0].labels["topology.kubernetes.io/region"], "r1");
    }
}
