//! Rejected objects: what the operator sees in logs, metrics and `/debug/rejections`.

use shoal_proto::config::parse::ParseError;
use shoal_proto::config::{ConfigKey, Kind};
use std::fmt;
use std::sync::{Arc, RwLock};

/// What a rejection is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// An object of a kind Shoal reads: its earlier valid version is kept.
    Object(ConfigKey),
    /// An object of a kind Shoal does not read (e.g. an EnvoyFilter).
    OtherKind,
    /// Nothing could be identified: every object the file had is kept.
    Unknown,
}

impl Target {
    /// Reads the `object` of a [`ParseError`]: `Kind namespace/name`, `Kind name` for
    /// cluster-scoped kinds, or `document N` when the header was unreadable.
    fn of(object: &str) -> Target {
        let Some((kind, rest)) = object.split_once(' ') else {
            return Target::Unknown;
        };
        if kind == "document" {
            return Target::Unknown;
        }
        let Some(kind) = Kind::parse(kind) else {
            return Target::OtherKind;
        };
        let (namespace, name) = match rest.split_once('/') {
            Some((ns, name)) => (ns, name),
            None if kind.is_cluster_scoped() => ("", rest),
            None => return Target::Unknown,
        };
        Target::Object(ConfigKey::new(kind, namespace, name))
    }

    /// The `kind` label of `shoal_ingest_config_rejected_total`.
    pub fn kind_label(&self) -> &'static str {
        match self {
            Target::Object(key) => key.kind.as_str(),
            Target::OtherKind => "other",
            Target::Unknown => "unknown",
        }
    }
}

/// One rejected object (or unreadable file).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Rejection {
    pub file: String,
    pub line: usize,
    /// The object's kind, `other` for kinds Shoal does not read, `unknown` when the
    /// document's header could not be read.
    pub kind: &'static str,
    /// `Kind namespace/name`, `document N`, or `file`.
    pub object: String,
    pub reason: String,
    #[serde(skip)]
    pub(crate) target: Target,
}

impl Rejection {
    pub(crate) fn from_parse(error: &ParseError) -> Self {
        let target = Target::of(&error.object);
        Self {
            file: error.location.source.clone(),
            line: error.location.line,
            kind: target.kind_label(),
            object: error.object.clone(),
            reason: error.reason.clone(),
            target,
        }
    }

    pub(crate) fn unreadable(file: &str, reason: String) -> Self {
        Self {
            file: file.to_string(),
            line: 1,
            kind: Target::Unknown.kind_label(),
            object: "file".into(),
            reason: format!("unreadable, keeping every object it had: {reason}"),
            target: Target::Unknown,
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.object, self.reason
        )
    }
}

/// The current rejections, shared with the admin server's `/debug/rejections`.
#[derive(Clone, Debug, Default)]
pub struct Rejections(Arc<RwLock<Vec<Rejection>>>);

impl Rejections {
    /// Every object currently rejected, by file and line.
    pub fn list(&self) -> Vec<Rejection> {
        self.0.read().expect("rejections poisoned").clone()
    }

    /// The list as JSON, for `/debug/rejections`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.list()).unwrap_or_default()
    }

    pub(crate) fn set(&self, list: Vec<Rejection>) {
        *self.0.write().expect("rejections poisoned") = list;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_from_parse_error_objects() {
        assert_eq!(
            Target::of("VirtualService shop/reviews"),
            Target::Object(ConfigKey::new(Kind::VirtualService, "shop", "reviews"))
        );
        assert_eq!(
            Target::of("Namespace shop"),
            Target::Object(ConfigKey::new(Kind::Namespace, "", "shop"))
        );
        assert_eq!(Target::of("document 3"), Target::Unknown);
        assert_eq!(Target::of("EnvoyFilter shop/ef"), Target::OtherKind);
        assert_eq!(Target::of("Service noslash"), Target::Unknown);
    }

    #[test]
    fn parse_errors_name_their_objects() {
        // The object strings come from shoal_proto's parser: keep the two in step.
        use shoal_proto::config::parse::parse_documents;
        let yaml = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: r\n  namespace: shop\nspec:\n  http: []\n---\nkind: [\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns\n  labels: 5\n";
        let targets: Vec<_> = parse_documents("f.yaml", yaml)
            .into_iter()
            .map(|r| Rejection::from_parse(&r.unwrap_err()).target)
            .collect();
        assert_eq!(
            targets,
            [
                Target::Object(ConfigKey::new(Kind::VirtualService, "shop", "r")),
                Target::Unknown,
                Target::Unknown,
            ]
        );
    }
}
