use super::*;
use crate::model::Endpoint;
use std::collections::BTreeMap;

fn endpoints(addr: &str) -> Chunk {
    Chunk::Endpoints(ServiceEndpoints {
        service: ServiceKey {
            hostname: "a.ns.svc.cluster.local".into(),
            namespace: "ns".into(),
        },
        endpoints: vec![Endpoint {
            address: addr.into(),
            port: 8080,
            service_port: 80,
            labels: BTreeMap::from([("version".into(), "v1".into())]),
            cluster: "c1".into(),
            network: String::new(),
            locality: String::new(),
            weight: 1,
            healthy: true,
            service_account: String::new(),
        }],
    })
}

#[test]
fn chunk_round_trip_and_content_addressing() {
    let (h1, b1) = endpoints("10.0.0.1").encode().unwrap();
    let (h2, _) = endpoints("10.0.0.1").encode().unwrap();
    let (h3, _) = endpoints("10.0.0.2").encode().unwrap();
    assert_eq!(h1, h2);
    assert_ne!(h1, h3);
    assert_eq!(b1[0], FORMAT_VERSION);
    assert_eq!(Chunk::decode(&h1, &b1).unwrap(), endpoints("10.0.0.1"));
    assert!(matches!(
        Chunk::decode(&h3, &b1),
        Err(SnapshotError::Corrupt(_))
    ));
}

#[test]
fn chunk_hash_is_lowercase_hex_of_the_first_128_bits_of_blake3() {
    // BLAKE3("") = af1349b9f5f9a1a6a0404dea36dcc949 9bcb25c9adc112b7cc9a93cae41f3262
    assert_eq!(
        ChunkHash::of(b"").to_string(),
        "af1349b9f5f9a1a6a0404dea36dcc949"
    );
}

#[test]
fn chunk_hash_is_encoded_as_its_sixteen_bytes_and_shown_as_hex() {
    let hash = ChunkHash::of(b"");
    // A page's refs and the root's carry the bytes, not the 33 of a hex string.
    let encoded = postcard::to_stdvec(&hash).unwrap();
    assert_eq!(encoded.len(), 16);
    assert_eq!(postcard::from_bytes::<ChunkHash>(&encoded).unwrap(), hash);
    // A person reads, and searches the store for, the hex digits.
    let json = serde_json::to_string(&hash).unwrap();
    assert_eq!(json, "\"af1349b9f5f9a1a6a0404dea36dcc949\"");
    assert_eq!(serde_json::from_str::<ChunkHash>(&json).unwrap(), hash);
    assert_eq!(
        format!("{hash:?}"),
        "ChunkHash(af1349b9f5f9a1a6a0404dea36dcc949)"
    );
    assert_eq!(hash.to_string().parse::<ChunkHash>().unwrap(), hash);
    // Ordered as their hex digits are: a sorted list reads the same either way.
    let (a, b) = (ChunkHash::of(b"a"), ChunkHash::of(b"b"));
    assert_eq!(a.cmp(&b), a.to_string().cmp(&b.to_string()));
}

#[test]
fn a_content_address_not_of_32_lowercase_hex_digits_is_refused_naming_it() {
    for bad in [
        "",
        "af13",
        "AF1349B9F5F9A1A6A0404DEA36DCC949",
        "zz1349b9f5f9a1a6a0404dea36dcc949",
    ] {
        let err = bad.parse::<ChunkHash>().unwrap_err();
        assert!(err.contains(&format!("{bad:?}")), "{err}");
    }
    let err = serde_json::from_str::<ChunkHash>("\"af13\"").unwrap_err();
    assert!(err.to_string().contains("32 hex digits"), "{err}");
}

#[test]
fn manifest_round_trip_and_format_check() {
    let m = Manifest {
        version: 7,
        built_unix_nanos: 1,
        depth: 1,
        pages: vec![
            PageRef {
                index: 0,
                hash: ChunkHash::of(b"x"),
            },
            PageRef {
                index: 3,
                hash: ChunkHash::of(b"y"),
            },
        ],
    };
    let mut bytes = m.encode().unwrap();
    assert_eq!(bytes[0], FORMAT_VERSION);
    assert_eq!(Manifest::decode(&bytes).unwrap(), m);
    bytes[0] = 99;
    assert!(matches!(
        Manifest::decode(&bytes),
        Err(SnapshotError::Format(99))
    ));
    assert!(matches!(
        Manifest::decode(&[]),
        Err(SnapshotError::Decode(_))
    ));
}

/// A manifest of format 1 (every chunk listed in the manifest itself) is refused with a
/// message naming both formats, not read as a root with odd pages.
#[test]
fn a_format_1_flat_manifest_is_refused_clearly() {
    #[derive(Serialize)]
    struct FlatManifest {
        version: u64,
        built_unix_nanos: u64,
        chunks: Vec<ChunkRef>,
    }
    let flat = FlatManifest {
        version: 7,
        built_unix_nanos: 1,
        chunks: vec![ChunkRef {
            key: ChunkKey::Namespace("ns".into()),
            hash: ChunkHash::of(b"x"),
        }],
    };
    let mut bytes = vec![1];
    bytes.extend(postcard::to_stdvec(&flat).unwrap());
    let err = Manifest::decode(&bytes).unwrap_err();
    assert!(matches!(err, SnapshotError::Format(1)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("snapshot format 1 is older")
            && message.contains(&format!("reads format {FORMAT_VERSION};")),
        "{message}"
    );
    let (hash, chunk) = endpoints("10.0.0.1").encode().unwrap();
    let mut old_chunk = chunk.clone();
    old_chunk[0] = 1;
    assert!(matches!(
        Chunk::decode(&ChunkHash::of(&old_chunk), &old_chunk),
        Err(SnapshotError::Format(1))
    ));
    assert_ne!(hash, ChunkHash::of(&old_chunk));
}

/// A root of the format before the page tree (8: the root listed every leaf page) is
/// refused, and a newer format is told apart from an older one.
#[test]
fn another_format_is_refused_saying_which_side_is_older() {
    let mut bytes = Manifest {
        version: 7,
        built_unix_nanos: 1,
        depth: 0,
        pages: Vec::new(),
    }
    .encode()
    .unwrap();
    bytes[0] = 8;
    let older = Manifest::decode(&bytes).unwrap_err().to_string();
    assert!(
        older.contains("snapshot format 8 is older") && older.contains("upgrade them"),
        "{older}"
    );
    bytes[0] = FORMAT_VERSION + 1;
    let newer = Manifest::decode(&bytes).unwrap_err().to_string();
    assert!(
        newer.contains(&format!("snapshot format {} is newer", FORMAT_VERSION + 1))
            && newer.contains("upgrade this one"),
        "{newer}"
    );
}
