//! One pass over a response's top-level fields without decoding it: the strings a proxy
//! keeps (version, type, nonce) and a 128-bit hash of its resources, each resource's
//! encoded bytes as sent (an `Any` in state of the world, a `Resource` — name, version
//! and body — in Delta). Nothing is allocated, so a copy of a response already verified
//! costs this pass and a lookup ([`crate::client::verified`]).
//!
//! `DiscoveryResponse` and `DeltaDiscoveryResponse` share the field numbers read here:
//! 1 the (system) version, 2 the resources, 4 the type URL, 5 the nonce; Delta's 6
//! (`removed_resources`) is only noted. Anything unusual (a malformed varint, a group,
//! a string that is not UTF-8) gives `None`: the caller decodes the message in full,
//! which fails with the precise error.

use xxhash_rust::xxh3::Xxh3;

/// What a proxy reads of a response before deciding whether to decode it.
#[derive(Debug, PartialEq, Eq)]
pub struct Head<'a> {
    pub version: &'a str,
    pub type_url: &'a str,
    pub nonce: &'a str,
    /// XXH3-128 over every resource's length and bytes, in order.
    pub key: u128,
    /// The resources' bytes in all.
    pub bytes: u64,
    /// The response removes resources (Delta).
    pub removes: bool,
}

/// Scans `msg`, an encoded (Delta)DiscoveryResponse.
pub fn head(mut msg: &[u8]) -> Option<Head<'_>> {
    let mut h = Xxh3::new();
    let (mut version, mut type_url, mut nonce) = ("", "", "");
    let (mut bytes, mut removes) = (0, false);
    while !msg.is_empty() {
        let tag = varint(&mut msg)?;
        let (field, wire) = (tag >> 3, tag & 7);
        match wire {
            0 => {
                varint(&mut msg)?;
            }
            1 => msg = msg.get(8..)?,
            5 => msg = msg.get(4..)?,
            2 => {
                let len = usize::try_from(varint(&mut msg)?).ok()?;
                let value = msg.get(..len)?;
                msg = &msg[len..];
                match field {
                    1 => version = std::str::from_utf8(value).ok()?,
                    2 => {
                        // The length keeps resource boundaries in the key.
                        h.update(&(len as u64).to_le_bytes());
                        h.update(value);
                        bytes += len as u64;
                    }
                    4 => type_url = std::str::from_utf8(value).ok()?,
                    5 => nonce = std::str::from_utf8(value).ok()?,
                    6 => removes = true,
                    _ => {}
                }
            }
            _ => return None,
        }
    }
    Some(Head {
        version,
        type_url,
        nonce,
        key: h.digest128(),
        bytes,
        removes,
    })
}

/// A base-128 varint (at most 10 bytes).
fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::{
        DeltaDiscoveryResponse, DiscoveryResponse, Resource,
    };
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;

    fn any(v: &[u8]) -> Any {
        Any {
            type_url: "t".into(),
            value: v.to_vec(),
        }
    }

    fn sotw(nonce: &str, resources: Vec<Any>) -> Vec<u8> {
        DiscoveryResponse {
            version_info: "42".into(),
            resources,
            canary: true,
            type_url: "t".into(),
            nonce: nonce.into(),
            ..Default::default()
        }
        .encode_to_vec()
    }

    #[test]
    fn reads_the_strings_and_keys_the_resources() {
        let a = sotw("n1", vec![any(b"one"), any(b"two")]);
        let h = head(&a).unwrap();
        assert_eq!((h.version, h.type_url, h.nonce), ("42", "t", "n1"));
        assert!(!h.removes && h.bytes > 6);
        // Another nonce, the same resources: the same key.
        assert_eq!(
            head(&sotw("n2", vec![any(b"one"), any(b"two")]))
                .unwrap()
                .key,
            h.key
        );
        // Other bytes, another order, other boundaries: other keys.
        for other in [
            vec![any(b"one"), any(b"twO")],
            vec![any(b"two"), any(b"one")],
            vec![any(b"onetwo")],
            vec![any(b"one")],
        ] {
            assert_ne!(head(&sotw("n1", other)).unwrap().key, h.key);
        }
    }

    #[test]
    fn delta_resources_key_their_name_and_version() {
        let resp = |version: &str, removed: Vec<String>| {
            DeltaDiscoveryResponse {
                system_version_info: "7".into(),
                resources: vec![Resource {
                    name: "a".into(),
                    version: version.into(),
                    resource: Some(any(b"body")),
                    ..Default::default()
                }],
                type_url: "t".into(),
                nonce: "n".into(),
                removed_resources: removed,
                ..Default::default()
            }
            .encode_to_vec()
        };
        let (v1, v2) = (resp("1", vec![]), resp("2", vec![]));
        assert_ne!(head(&v1).unwrap().key, head(&v2).unwrap().key);
        assert_eq!(head(&v1).unwrap().version, "7");
        assert!(head(&resp("1", vec!["gone".into()])).unwrap().removes);
    }

    #[test]
    fn anything_unusual_is_left_to_the_full_decode() {
        let good = sotw("n", vec![any(b"x")]);
        assert!(head(&good[..good.len() - 1]).is_none(), "truncated");
        assert!(head(&[0x0b]).is_none(), "a group");
        assert!(head(&[0x80; 11]).is_none(), "a varint too long");
        assert!(
            head(&[0x2a, 0x01, 0xff]).is_none(),
            "a nonce that is not UTF-8"
        );
        assert_eq!(head(&[]).unwrap().type_url, "");
    }
}
