//! `kind: List` (what `kubectl get -o yaml` writes) and `<Kind>List` documents: each
//! item is an object of its own, with its own line for errors.
//!
//! A block-style list (kubectl's) is cut into its items' text, so an error in an item
//! points at the item's line; a flow-style (JSON) one is split through a parsed value
//! and its items keep the list's line. An item without `apiVersion`/`kind` (a
//! `ServiceList` as the API server writes it) takes them from the list.

use serde::Deserialize;

/// One item: its first line, counted from the document's first line (0-based), and its
/// text as a document of its own.
#[derive(Debug, PartialEq, Eq)]
pub struct Item {
    pub line_offset: usize,
    pub text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListHeader {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    items: serde_norway::Value,
}

/// Every object of `text`: each document, or each item of a document that is a list,
/// with its first line (1-based).
pub fn objects(text: &str) -> Vec<(usize, String)> {
    let mut objects = Vec::new();
    for (line, doc) in super::split_documents(text) {
        match items(doc) {
            Some(items) => {
                objects.extend(items.into_iter().map(|i| (line + i.line_offset, i.text)));
            }
            None => objects.push((line, doc.to_string())),
        }
    }
    objects
}

/// The items of `doc` when it is a list; `None` for any other document (or one whose
/// header does not parse: the caller reports that as for any document).
pub fn items(doc: &str) -> Option<Vec<Item>> {
    // Every list's kind ends in `List`: most documents are not parsed a second time.
    if !doc.contains("List") {
        return None;
    }
    let header: ListHeader = serde_norway::from_str(doc).ok()?;
    let item_kind = match header.kind.as_str() {
        "List" => None,
        kind => Some(kind.strip_suffix("List").filter(|k| !k.is_empty())?),
    };
    let values = match header.items {
        serde_norway::Value::Sequence(values) => values,
        serde_norway::Value::Null => Vec::new(),
        _ => return None,
    };
    let typed = |text: String, value: Option<&serde_norway::Value>| {
        let Some(kind) = item_kind else {
            return text;
        };
        let has = |key: &str| value.is_none_or(|v| v.get(key).is_some());
        let mut text = text;
        if !text.ends_with('\n') {
            text.push('\n');
        }
        // Appended, so the item's lines keep their numbers.
        if !has("apiVersion") {
            text.push_str(&format!("apiVersion: {}\n", header.api_version));
        }
        if !has("kind") {
            text.push_str(&format!("kind: {kind}\n"));
        }
        text
    };
    let block = block_items(doc).filter(|found| found.len() == values.len());
    Some(match block {
        Some(found) => found
            .into_iter()
            .zip(&values)
            .map(|(item, value)| Item {
                text: typed(item.text, Some(value)),
                ..item
            })
            .collect(),
        None => values
            .iter()
            .map(|value| Item {
                line_offset: 0,
                text: typed(
                    serde_norway::to_string(value).unwrap_or_default(),
                    Some(value),
                ),
            })
            .collect(),
    })
}

/// The items of a top-level block sequence under `items:`, dedented; `None` when the
/// list is not written that way.
fn block_items(doc: &str) -> Option<Vec<Item>> {
    let lines: Vec<&str> = doc.lines().collect();
    let start = lines.iter().position(|l| l.trim_end() == "items:")?;
    let mut items: Vec<Item> = Vec::new();
    let mut dash_indent = None;
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        let content = line.trim_start();
        let indent = line.len() - content.len();
        if content.is_empty() || content.starts_with('#') {
            if let Some(item) = items.last_mut() {
                item.text.push('\n');
            }
            continue;
        }
        let is_dash = content == "-" || content.starts_with("- ");
        let dash = *dash_indent.get_or_insert(indent);
        if is_dash && indent == dash {
            items.push(Item {
                line_offset: i,
                text: String::new(),
            });
        } else if indent <= dash {
            // The next top-level key (`kind: List`, `metadata:`): the sequence ended.
            break;
        }
        let item = items.last_mut()?;
        // The item's lines without the sequence's indentation and its `- `.
        let cut = (dash + 2).min(line.len());
        if !line.is_char_boundary(cut) || !line[..cut].chars().all(|c| c == ' ' || c == '-') {
            return None;
        }
        item.text.push_str(&line[cut..]);
        item.text.push('\n');
    }
    Some(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectls_list_is_cut_into_items_with_their_lines() {
        let doc = "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: a\n\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: b\nkind: List\nmetadata:\n  resourceVersion: \"\"\n";
        let items = items(doc).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].line_offset, 2);
        assert_eq!(
            items[0].text,
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n\n"
        );
        assert_eq!(items[1].line_offset, 7);
    }

    #[test]
    fn a_kind_list_types_items_that_say_nothing() {
        let doc = "apiVersion: v1\nkind: ServiceList\nitems:\n  - metadata:\n      name: a\n";
        let items = items(doc).unwrap();
        assert_eq!(items[0].line_offset, 3);
        assert_eq!(
            items[0].text,
            "metadata:\n  name: a\napiVersion: v1\nkind: Service\n"
        );
    }

    #[test]
    fn flow_lists_and_other_documents() {
        let doc = r#"{"apiVersion": "v1", "kind": "List", "items": [{"kind": "Service", "apiVersion": "v1", "metadata": {"name": "a"}}]}"#;
        let items = items(doc).unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].line_offset, 0);
        assert!(items[0].text.contains("name: a"), "{items:?}");
        assert_eq!(
            super::items("apiVersion: v1\nkind: List\nitems: null\n"),
            Some(vec![])
        );
        assert_eq!(
            super::items("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n"),
            None
        );
        assert_eq!(
            super::items("apiVersion: v1\nkind: Service\nitems: []\n"),
            None
        );
    }
}
