//! Documents of kinds that are not mesh config (a Deployment, a ServiceAccount in a
//! `kubectl get -o yaml` dump): [`super::parse_documents`] skips them, and this names
//! each one, so that nothing read is dropped without a word.

use super::doc::Doc;
use super::{Header, Location, list, unsupported};
use crate::config::Kind;

/// One document read and not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    pub location: Location,
    /// `apiVersion Kind namespace/name`.
    pub object: String,
    pub reason: String,
}

/// What [`super::parse_documents`] skips in `text` for its kind: every document (and
/// list item) whose kind is neither one Shoal reads, nor one it reports as unsupported,
/// nor a Node (whose labels are Pods' localities).
pub fn parse_ignored(source: &str, text: &str) -> Vec<Ignored> {
    let mut ignored = Vec::new();
    for (line, doc) in list::objects(text) {
        let Ok(header) = serde_norway::from_str::<Header>(&doc) else {
            continue;
        };
        let (api_version, kind) = (header.api_version.as_str(), header.kind.as_str());
        if api_version.is_empty()
            || kind.is_empty()
            || Kind::from_api(api_version, kind).is_some()
            || unsupported::unsupported_kind(api_version, kind, Doc::Yaml(&doc)).is_some()
            || (api_version == "v1" && kind == "Node")
        {
            continue;
        }
        let name = match header.metadata.namespace.as_str() {
            "" => header.metadata.name,
            ns => format!("{ns}/{}", header.metadata.name),
        };
        ignored.push(Ignored {
            location: Location {
                source: source.to_string(),
                line,
            },
            object: format!("{api_version} {kind} {name}"),
            reason: "not mesh config: Shoal does not read this kind; ignored".into(),
        });
    }
    ignored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_shoal_does_not_read_are_named_with_their_line() {
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: a}\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceAccount\n  metadata: {name: sa, namespace: shop}\n";
        let ignored = parse_ignored("d.yaml", text);
        let found: Vec<(String, usize)> = ignored
            .iter()
            .map(|i| (i.object.clone(), i.location.line))
            .collect();
        assert_eq!(
            found,
            [
                ("apps/v1 Deployment shop/web".to_string(), 1),
                ("v1 ServiceAccount shop/sa".to_string(), 20),
            ]
        );
    }
}
