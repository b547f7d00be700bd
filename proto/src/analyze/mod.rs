//! `istioctl analyze` for Shoal: findings over a whole set of parsed objects.
//!
//! Validation ([`crate::config::validate`]) judges one object alone; analysis judges how
//! objects refer to one another (a route to a host no Service defines, a VirtualService
//! bound to a Gateway that does not exist, two VirtualServices for one mesh host) and
//! reports what Shoal ignores. Each finding is a [`Message`] with Istio's code where Istio
//! has one (`IST0101`...), else a Shoal code (`SHL0001`...); see [`codes`].
//!
//! ```text
//!  parse_documents (per file) ──► [Result<Parsed, ParseError>] ──► analyze ──► [Message]
//!                                      schema · destinations · gateways ·
//!                                      mesh_hosts · subsets · sidecars · policies
//! ```
//!
//! I/O-free: the caller reads the files (the directory registry's reader) and prints.

pub mod codes;
mod destinations;
mod gateways;
mod hosts;
mod inventory;
mod mesh_hosts;
mod policies;
mod schema;
mod sidecars;
mod subsets;

pub use codes::Code;

use crate::config::parse::{Location, ParseError, Parsed};
use inventory::Inventory;
use serde::Serialize;
use std::fmt;

/// How bad a finding is. `Error`s make `shoal analyze` exit non-zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Level {
    Error,
    Warning,
    Info,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Error => "Error",
            Level::Warning => "Warning",
            Level::Info => "Info",
        })
    }
}

/// What a finding is about: `Kind namespace/name` (or `document N` when a document's
/// header could not be read), and where it was written when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub object: String,
    pub location: Option<Location>,
}

/// One finding, printed as istioctl prints it:
/// `Error [IST0101] (VirtualService shop/reviews reviews.yaml:12) Referenced host not found: "x"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub code: Code,
    pub level: Level,
    pub origin: Origin,
    pub text: String,
}

impl Message {
    /// A finding at the code's own level.
    pub fn new(code: Code, origin: Origin, text: impl Into<String>) -> Self {
        Self {
            code,
            level: code.level,
            origin,
            text: text.into(),
        }
    }

    /// A finding about an accepted object.
    pub(crate) fn about(code: Code, parsed: &Parsed, text: impl Into<String>) -> Self {
        Self::new(code, origin_of(parsed), text)
    }

    pub(crate) fn at_level(mut self, level: Level) -> Self {
        self.level = level;
        self
    }

    pub fn is_error(&self) -> bool {
        self.level == Level::Error
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} [{}] ({}",
            self.level, self.code.id, self.origin.object
        )?;
        if let Some(location) = &self.origin.location {
            write!(f, " {location}")?;
        }
        write!(f, ") {}", self.text)
    }
}

/// The JSON form of `messages`, as `shoal analyze -o json` prints it: an array of
/// `{code, level, origin, message, file, line}` (`file` and `line` null when unknown).
pub fn to_json(messages: &[Message]) -> serde_json::Value {
    messages
        .iter()
        .map(|m| {
            let location = m.origin.location.as_ref();
            serde_json::json!({
                "code": m.code.id,
                "level": m.level,
                "origin": m.origin.object,
                "message": m.text,
                "file": location.map(|l| &l.source),
                "line": location.map(|l| l.line),
            })
        })
        .collect()
}

fn origin_of(parsed: &Parsed) -> Origin {
    let key = parsed.config.key();
    let object = if key.kind.is_cluster_scoped() {
        format!("{} {}", key.kind, key.name)
    } else {
        key.to_string()
    };
    Origin {
        object,
        location: Some(parsed.location.clone()),
    }
}

fn origin_of_error(error: &ParseError) -> Origin {
    Origin {
        object: error.object.clone(),
        location: Some(error.location.clone()),
    }
}

/// Every finding over `documents` (all the documents of a directory, in any order),
/// sorted by file, line, object and code.
pub fn analyze(documents: &[Result<Parsed, ParseError>]) -> Vec<Message> {
    let mut out = Vec::new();
    schema::analyze(documents, &mut out);
    // Objects only validation rejected are still checked for their references, as
    // istioctl does: a Gateway without servers still selects (or misses) a workload.
    let rejected: Vec<Parsed> = documents
        .iter()
        .filter_map(|d| d.as_ref().err())
        .filter_map(|e| {
            e.rejected.as_ref().map(|r| Parsed {
                config: (*r.0).clone(),
                location: e.location.clone(),
                warnings: Vec::new(),
            })
        })
        .collect();
    let accepted = documents.iter().filter_map(|d| d.as_ref().ok());
    let inventory = Inventory::new(accepted.chain(&rejected));
    destinations::analyze(&inventory, &mut out);
    gateways::analyze(&inventory, &mut out);
    mesh_hosts::analyze(&inventory, &mut out);
    subsets::analyze(&inventory, &mut out);
    sidecars::analyze(&inventory, &mut out);
    policies::analyze(&inventory, inventory.root_namespace(), &mut out);
    out.sort_by(|a, b| {
        let place = |m: &Message| {
            m.origin
                .location
                .as_ref()
                .map(|l| (l.source.clone(), l.line))
        };
        (place(a), &a.origin.object, a.code.id, &a.text).cmp(&(
            place(b),
            &b.origin.object,
            b.code.id,
            &b.text,
        ))
    });
    out.dedup();
    out
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::config::parse::parse_documents;

    /// The findings over one YAML stream, as `CODE Level object: text` lines.
    pub fn findings(yaml: &str) -> Vec<String> {
        analyze(&parse_documents("t.yaml", yaml))
            .iter()
            .map(|m| format!("{} {} {}: {}", m.code.id, m.level, m.origin.object, m.text))
            .collect()
    }

    /// Only the findings with `code`.
    pub fn findings_with(code: Code, yaml: &str) -> Vec<String> {
        findings(yaml)
            .into_iter()
            .filter(|f| f.starts_with(code.id))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse::parse_documents;

    #[test]
    fn messages_print_as_istioctl_does() {
        let yaml = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: ratings}
";
        let messages = analyze(&parse_documents(
            "reviews.yaml",
            &format!("# c\n---\n{yaml}"),
        ));
        assert_eq!(
            messages.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "Error [IST0101] (VirtualService shop/reviews reviews.yaml:3) Referenced host not found: \"ratings.shop.svc.cluster.local\""
            ]
        );
        assert!(messages[0].is_error());
        assert_eq!(
            to_json(&messages),
            serde_json::json!([{
                "code": "IST0101",
                "level": "Error",
                "origin": "VirtualService shop/reviews",
                "message": "Referenced host not found: \"ratings.shop.svc.cluster.local\"",
                "file": "reviews.yaml",
                "line": 3,
            }])
        );
    }

    #[test]
    fn an_invalid_object_is_still_analyzed_for_its_references() {
        let yaml = "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: empty, namespace: edge}
spec:
  selector: {istio: missing}
---
apiVersion: v1
kind: Pod
metadata: {name: gw, namespace: edge, labels: {istio: ingressgateway}}
status: {podIP: 10.0.0.9}
";
        let got = testing::findings(yaml);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert_eq!(
            got,
            [
                "IST0101 Error Gateway edge/empty: Referenced selector not found: \"istio=missing\"",
                "IST0106 Error Gateway edge/empty: Schema validation error: gateway must have at least one server",
            ]
        );
    }

    #[test]
    fn a_consistent_set_has_no_findings() {
        let yaml = "apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Pod
metadata: {name: reviews-v1, namespace: shop, labels: {app: reviews, version: v1}}
status: {podIP: 10.0.0.1}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews
  subsets: [{name: v1, labels: {version: v1}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1}
";
        assert_eq!(testing::findings(yaml), Vec::<String>::new());
    }
}
