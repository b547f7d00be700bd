//! One object's text and the decoder that reads it: the directory's YAML, or the JSON
//! the Kubernetes API serves. Every reader of an object (header, spec, status, unknown
//! fields) decodes through [`Doc`], so both formats go through the same types and the
//! same validation.

use serde::de::DeserializeOwned;
use std::fmt;

/// An object's text, in the format it was written in.
#[derive(Clone, Copy, Debug)]
pub enum Doc<'a> {
    /// A YAML document (flow scalars with a `:` already quoted: see `flow`).
    Yaml(&'a str),
    /// One JSON object, as the Kubernetes API serves it.
    Json(&'a str),
}

/// Why an object did not decode, and the line of its text where, when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub reason: String,
    /// 1-based, within the object's text.
    pub line: Option<usize>,
}

impl DecodeError {
    /// A reason found after decoding (a value that is not base64, not PEM…).
    pub fn custom(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            line: None,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl From<serde_norway::Error> for DecodeError {
    fn from(e: serde_norway::Error) -> Self {
        // The location is reported separately, as file:line.
        let text = e.to_string();
        let reason = match text.find(" at line ") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        Self {
            reason,
            line: e.location().map(|l| l.line()),
        }
    }
}

impl From<serde_json::Error> for DecodeError {
    fn from(e: serde_json::Error) -> Self {
        let text = e.to_string();
        let reason = match text.rfind(" at line ") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        Self {
            reason,
            line: (e.line() > 0).then_some(e.line()),
        }
    }
}

impl Doc<'_> {
    /// Decodes the whole object as `T` (fields `T` does not name are skipped).
    pub fn decode<T: DeserializeOwned>(self) -> Result<T, DecodeError> {
        Ok(match self {
            Doc::Yaml(text) => serde_norway::from_str(text)?,
            Doc::Json(text) => serde_json::from_str(text)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Meta {
        metadata: BTreeMap<String, String>,
    }

    #[test]
    fn both_formats_decode_alike_and_locate_errors_by_line() {
        let yaml: Meta = Doc::Yaml("metadata:\n  name: a\n").decode().unwrap();
        let json: Meta = Doc::Json(r#"{"metadata": {"name": "a"}}"#)
            .decode()
            .unwrap();
        assert_eq!(yaml, json);

        let e = Doc::Yaml("metadata:\n  name: [a]\n")
            .decode::<Meta>()
            .unwrap_err();
        assert_eq!((e.line, e.reason.contains(" at line ")), (Some(2), false));
        let e = Doc::Json("{\"metadata\":\n {\"name\": [\"a\"]}}")
            .decode::<Meta>()
            .unwrap_err();
        assert_eq!((e.line, e.reason.contains(" at line ")), (Some(2), false));
        assert!(e.reason.starts_with("invalid type: sequence"), "{e}");
    }
}
