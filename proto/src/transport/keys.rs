//! Config KV keys: `<cluster>.<kind>.<namespace>.<name>`, each part escaped to NATS key
//! characters (`[-/_=.a-zA-Z0-9]`) so the `.` separator stays unambiguous.

use crate::config::{ConfigKey, Kind};

/// `.`, `_`, `=` and anything outside `[-/a-zA-Z0-9]` become `_XX` (hex), so parts never
/// contain the separator and the encoding is reversible.
fn escape(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for b in part.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'/' {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("_00");
    }
    out
}

fn unescape(part: &str) -> Option<String> {
    if part == "_00" {
        return Some(String::new());
    }
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'_' {
            let hex = part.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

pub fn config_kv_key(cluster: &str, key: &ConfigKey) -> String {
    format!(
        "{}.{}.{}.{}",
        escape(cluster),
        key.kind.as_str(),
        escape(&key.namespace),
        escape(&key.name)
    )
}

/// Splits a KV key back into its cluster and [`ConfigKey`].
pub fn parse_config_kv_key(kv_key: &str) -> Option<(String, ConfigKey)> {
    let mut parts = kv_key.split('.');
    let cluster = unescape(parts.next()?)?;
    let kind = Kind::parse(parts.next()?)?;
    let namespace = unescape(parts.next()?)?;
    let name = unescape(parts.next()?)?;
    if parts.next().is_some() {
        return None;
    }
    Some((cluster, ConfigKey::new(kind, namespace, name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_dotted_names() {
        let key = ConfigKey::new(Kind::ServiceEntry, "ns-1", "api.example.com");
        let kv = config_kv_key("cluster_a", &key);
        assert_eq!(kv, "cluster_5Fa.ServiceEntry.ns-1.api_2Eexample_2Ecom");
        assert_eq!(parse_config_kv_key(&kv), Some(("cluster_a".into(), key)));
    }

    #[test]
    fn empty_namespace_round_trips() {
        let key = ConfigKey::new(Kind::Namespace, "", "prod");
        let kv = config_kv_key("c", &key);
        assert_eq!(parse_config_kv_key(&kv), Some(("c".into(), key)));
    }
}
