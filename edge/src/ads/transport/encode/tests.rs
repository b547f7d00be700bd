use super::*;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryResponse, DiscoveryResponse, Resource,
};

fn resource(name: &str, size: usize) -> Arc<XdsResource> {
    let value = (0..size).map(|i| i as u8).collect();
    Arc::new(XdsResource::new(
        name.into(),
        "type.googleapis.com/t",
        value,
    ))
}

fn control_plane() -> Option<ControlPlane> {
    Some(ControlPlane {
        identifier: "shoal".into(),
    })
}

/// The message after its prefix, checking the prefix.
fn body(frame: &Bytes) -> &[u8] {
    assert_eq!(frame[0], 0, "uncompressed");
    let len = u32::from_be_bytes(frame[1..5].try_into().unwrap()) as usize;
    assert_eq!(len, frame.len() - PREFIX_LEN);
    &frame[PREFIX_LEN..]
}

#[test]
fn frame_is_the_prefix_and_the_message() {
    let msg = DiscoveryResponse {
        version_info: "1".into(),
        nonce: "1-1".into(),
        ..Default::default()
    };
    let f = frame(&msg);
    assert_eq!(body(&f), msg.encode_to_vec());
    assert_eq!(
        frame(&DiscoveryResponse::default()).as_ref(),
        [0, 0, 0, 0, 0]
    );
}

#[test]
fn sotw_bytes_equal_prost() {
    // Sizes around the varint boundaries of the length prefixes (127/128, 16383/16384).
    let cases = [
        SotwResponse::default(),
        SotwResponse {
            version_info: "7".into(),
            resources: vec![resource("a", 0), resource("b", 100), resource("c", 200)],
            encoded_resources: None,
            type_url: "type.googleapis.com/t".into(),
            nonce: "7-3".into(),
            control_plane: None,
        },
        SotwResponse {
            version_info: "8".into(),
            resources: vec![
                resource("a", 16_300),
                resource("b", 16_400),
                resource("c", 70_000),
            ],
            encoded_resources: None,
            type_url: "type.googleapis.com/t".into(),
            nonce: String::new(),
            control_plane: control_plane(),
        },
    ];
    for r in cases {
        let prost = DiscoveryResponse {
            version_info: r.version_info.clone(),
            resources: r.resources.iter().map(|x| x.resource.clone()).collect(),
            type_url: r.type_url.clone(),
            nonce: r.nonce.clone(),
            control_plane: r.control_plane.clone(),
            ..Default::default()
        };
        let f = r.to_frame();
        assert_eq!(r.encoded_len(), prost.encoded_len());
        assert_eq!(body(&f), prost.encode_to_vec());
        assert_eq!(f.len(), PREFIX_LEN + prost.encoded_len());
        // The same bytes with the resources encoded beforehand, in one buffer.
        let shared = SotwResponse {
            encoded_resources: Some(sotw_resources(&r.resources)),
            ..r.clone()
        };
        assert_eq!(shared.to_frame(), f);
        // In chunks, the stream's own fields first, then the shared resources: the same
        // message.
        let chunks = shared.to_chunks();
        assert_eq!(chunks.len(), f.len());
        assert_eq!(chunks.shared, shared.encoded_resources.clone().unwrap());
        let joined = Bytes::from(chunks.chunks().flatten().collect::<Vec<u8>>());
        assert_eq!(DiscoveryResponse::decode(body(&joined)).unwrap(), prost);
        // Without shared bytes: one chunk.
        assert_eq!(r.to_chunks().chunks().collect::<Vec<_>>(), [f]);
    }
}

#[test]
fn delta_bytes_equal_prost() {
    let cases = [
        DeltaResponse::default(),
        DeltaResponse {
            system_version_info: "3".into(),
            resources: vec![
                DeltaResource {
                    resource: resource("outbound|80||a.ns.svc.cluster.local", 10),
                    version: "00000000000000ff".into(),
                },
                DeltaResource {
                    resource: resource("", 20_000),
                    version: String::new(),
                },
            ],
            encoded_resources: None,
            type_url: "type.googleapis.com/t".into(),
            nonce: "3-9".into(),
            removed_resources: vec!["gone".into(), String::new(), "x".repeat(300)],
            control_plane: control_plane(),
        },
    ];
    for r in cases {
        let prost = DeltaDiscoveryResponse {
            system_version_info: r.system_version_info.clone(),
            resources: r
                .resources
                .iter()
                .map(|x| Resource {
                    name: x.resource.name.clone(),
                    version: x.version.clone(),
                    resource: Some(x.resource.resource.clone()),
                    ..Default::default()
                })
                .collect(),
            type_url: r.type_url.clone(),
            nonce: r.nonce.clone(),
            removed_resources: r.removed_resources.clone(),
            control_plane: r.control_plane.clone(),
            ..Default::default()
        };
        let f = r.to_frame();
        assert_eq!(r.encoded_len(), prost.encoded_len());
        assert_eq!(body(&f), prost.encode_to_vec());
        let shared = DeltaResponse {
            encoded_resources: Some(delta_resources(&r.resources)),
            ..r.clone()
        };
        assert_eq!(shared.to_frame(), f);
        let chunks = shared.to_chunks();
        assert_eq!(chunks.len(), f.len());
        assert_eq!(chunks.shared, shared.encoded_resources.clone().unwrap());
        let joined = Bytes::from(chunks.chunks().flatten().collect::<Vec<u8>>());
        assert_eq!(
            DeltaDiscoveryResponse::decode(body(&joined)).unwrap(),
            prost
        );
    }
}

#[test]
fn a_response_in_chunks_is_its_own_bytes_then_the_shared_ones() {
    let resources = vec![resource("a", 100), resource("b", 20_000)];
    let r = SotwResponse {
        version_info: "12".into(),
        encoded_resources: Some(sotw_resources(&resources)),
        type_url: "type.googleapis.com/t".into(),
        nonce: "12-4".into(),
        control_plane: control_plane(),
        ..Default::default()
    };
    let chunks: Vec<Bytes> = r.to_chunks().chunks().collect();
    assert_eq!(
        chunks.len(),
        2,
        "one DATA frame of the stream's own, then the shared"
    );
    // The head: the prefix of the whole message, then every field but the resources.
    let own = DiscoveryResponse::decode(&chunks[0][PREFIX_LEN..]).unwrap();
    assert_eq!(
        (
            own.version_info.as_str(),
            own.type_url.as_str(),
            own.nonce.as_str()
        ),
        ("12", "type.googleapis.com/t", "12-4")
    );
    assert_eq!(own.control_plane, control_plane());
    assert!(own.resources.is_empty());
    assert_eq!(chunks[1], r.encoded_resources.clone().unwrap());
}

#[test]
fn varints() {
    for v in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
        let mut buf = BytesMut::new();
        put_varint(&mut buf, v);
        assert_eq!(buf.len(), varint_len(v), "{v}");
        let mut prost_buf = Vec::new();
        prost::encode_length_delimiter(v as usize, &mut prost_buf).unwrap();
        assert_eq!(buf.as_ref(), prost_buf, "{v}");
    }
}
