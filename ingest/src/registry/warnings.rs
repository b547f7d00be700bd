//! Accepted objects' warnings (fields Shoal ignores, validation warnings): what the
//! operator sees in logs, `shoal_ingest_config_warnings` and `/debug/warnings`.

use shoal_proto::config::ConfigKey;
use shoal_proto::config::parse::{Ignored, Parsed};
use std::fmt;
use std::sync::{Arc, RwLock};

/// One warning about an accepted (and served) object.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Warning {
    /// The file (or `kubernetes/<cluster>`) and line the object was read from.
    pub file: String,
    pub line: usize,
    pub kind: &'static str,
    /// `Kind namespace/name`.
    pub object: String,
    pub warning: String,
    /// The object it is about; `None` for a document of a kind Shoal does not read.
    #[serde(skip)]
    pub(crate) key: Option<ConfigKey>,
}

impl Warning {
    pub(crate) fn new(file: &str, line: usize, key: &ConfigKey, warning: &str) -> Self {
        Self {
            file: file.to_string(),
            line,
            kind: key.kind.as_str(),
            object: key.to_string(),
            warning: warning.to_string(),
            key: Some(key.clone()),
        }
    }

    /// A document of a kind Shoal does not read (`kind` label `other`).
    pub(crate) fn ignored(ignored: &Ignored) -> Self {
        Self {
            file: ignored.location.source.clone(),
            line: ignored.location.line,
            kind: "other",
            object: ignored.object.clone(),
            warning: ignored.reason.clone(),
            key: None,
        }
    }

    /// Every warning of one parsed object.
    pub(crate) fn of(parsed: &Parsed) -> Vec<Warning> {
        let key = parsed.config.key();
        let location = &parsed.location;
        parsed
            .warnings
            .iter()
            .map(|w| Warning::new(&location.source, location.line, &key, w))
            .collect()
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}: {}",
            self.file, self.line, self.object, self.warning
        )
    }
}

/// The current warnings, shared with the admin server's `/debug/warnings`. Bounded by
/// the objects held: each accepted object contributes its own few.
#[derive(Clone, Debug, Default)]
pub struct Warnings(Arc<RwLock<Vec<Warning>>>);

impl Warnings {
    /// Every warning in force, by file and line.
    pub fn list(&self) -> Vec<Warning> {
        self.0.read().expect("warnings poisoned").clone()
    }

    /// The list as JSON, for `/debug/warnings`: `[{file, line, kind, object, warning}]`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.list()).unwrap_or_default()
    }

    pub(crate) fn set(&self, list: Vec<Warning>) {
        *self.0.write().expect("warnings poisoned") = list;
    }
}
