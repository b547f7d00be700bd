//! Config KV keys: `<cluster>.<source>.<kind>.<namespace>.<name>`, each part escaped to
//! NATS key characters (`[-/_=.a-zA-Z0-9]`) so the `.` separator stays unambiguous. The
//! cluster and source own the key: a source reconciles (deletes) only its own.

use crate::config::{ConfigKey, Kind, Origin};

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

pub fn config_kv_key(origin: &Origin, key: &ConfigKey) -> String {
    format!(
        "{}.{}.{}.{}.{}",
        escape(&origin.cluster),
        escape(&origin.source),
        key.kind.as_str(),
        escape(&key.namespace),
        escape(&key.name)
    )
}

/// The cluster and source that own a config KV key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KvOwner {
    pub cluster: String,
    pub source: String,
}

impl KvOwner {
    /// Whether `origin` (an object's, or a source's own) owns keys of this owner.
    pub fn is(&self, origin: &Origin) -> bool {
        self.cluster == origin.cluster && self.source == origin.source
    }
}

/// Splits a KV key back into its owner and [`ConfigKey`].
pub fn parse_config_kv_key(kv_key: &str) -> Option<(KvOwner, ConfigKey)> {
    let mut parts = kv_key.split('.');
    let cluster = unescape(parts.next()?)?;
    let source = unescape(parts.next()?)?;
    let kind = Kind::parse(parts.next()?)?;
    let namespace = unescape(parts.next()?)?;
    let name = unescape(parts.next()?)?;
    if parts.next().is_some() {
        return None;
    }
    Some((
        KvOwner { cluster, source },
        ConfigKey::new(kind, namespace, name),
    ))
}

/// A key in the format before sources owned keys, `<cluster>.<kind>.<namespace>.<name>`:
/// its cluster and [`ConfigKey`]. Builders still read these (so they can be upgraded
/// first); an ingest deletes its own cluster's at start-up, as it now writes the same
/// objects under its source's keys.
pub fn parse_legacy_config_kv_key(kv_key: &str) -> Option<(String, ConfigKey)> {
    let parts: Vec<&str> = kv_key.split('.').collect();
    let [cluster, kind, namespace, name] = parts[..] else {
        return None;
    };
    Some((
        unescape(cluster)?,
        ConfigKey::new(Kind::parse(kind)?, unescape(namespace)?, unescape(name)?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(cluster: &str, source: &str) -> KvOwner {
        KvOwner {
            cluster: cluster.into(),
            source: source.into(),
        }
    }

    #[test]
    fn round_trips_dotted_names() {
        let key = ConfigKey::new(Kind::ServiceEntry, "ns-1", "api.example.com");
        let kv = config_kv_key(&Origin::new("cluster_a", "dir", "net-1"), &key);
        assert_eq!(kv, "cluster_5Fa.dir.ServiceEntry.ns-1.api_2Eexample_2Ecom");
        assert_eq!(
            parse_config_kv_key(&kv),
            Some((owner("cluster_a", "dir"), key))
        );
    }

    #[test]
    fn empty_namespace_round_trips() {
        let key = ConfigKey::new(Kind::Namespace, "", "prod");
        let kv = config_kv_key(&Origin::new("c", "kubernetes", ""), &key);
        assert_eq!(
            parse_config_kv_key(&kv),
            Some((owner("c", "kubernetes"), key))
        );
    }

    #[test]
    fn sources_of_one_cluster_own_different_keys() {
        let key = ConfigKey::new(Kind::Service, "ns", "web");
        let (dir, kube) = (
            Origin::new("c", "dir", ""),
            Origin::new("c", "kubernetes", ""),
        );
        assert_ne!(config_kv_key(&dir, &key), config_kv_key(&kube, &key));
        let (parsed, _) = parse_config_kv_key(&config_kv_key(&kube, &key)).expect("parses");
        assert!(parsed.is(&kube) && !parsed.is(&dir));
    }

    #[test]
    fn a_key_without_its_source_is_a_legacy_key() {
        assert_eq!(parse_config_kv_key("c_5F1.Service.ns.web"), None);
        assert_eq!(
            parse_legacy_config_kv_key("c_5F1.Service.ns.web"),
            Some(("c_1".into(), ConfigKey::new(Kind::Service, "ns", "web")))
        );
        let current = config_kv_key(
            &Origin::new("c", "dir", ""),
            &ConfigKey::new(Kind::Service, "ns", "web"),
        );
        assert_eq!(parse_legacy_config_kv_key(&current), None);
        assert_eq!(parse_legacy_config_kv_key("c.NotAKind.ns.web"), None);
    }
}
