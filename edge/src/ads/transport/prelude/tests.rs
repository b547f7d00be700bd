//! The prelude reader on hand-built frames (every rule, any split into reads) and on the
//! bytes of real tonic clients, whose replay a real tonic (hyper/h2) server then serves.

use super::*;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::{Struct, Value as StructValue, value::Kind};
use futures::Stream;
use prost::Message;
use std::pin::Pin;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_stream::StreamExt;

const NODE_ID: &str = "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local";
const CA_PATH: &str = "/istio.v1.auth.IstioCertificateService/CreateCertificate";
/// The client's ACK of our empty SETTINGS: what the prelude cuts.
const ACK: [u8; 9] = [0, 0, 0, 4, 1, 0, 0, 0, 0];
const LIMIT: usize = 1 << 20;
const PING: u8 = 0x6;
const WINDOW_UPDATE: u8 = 0x8;

// ---- hand-built frames -------------------------------------------------------------------

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The preface and the client's own SETTINGS (SETTINGS_ENABLE_PUSH = 0), as clients send.
fn start() -> Vec<u8> {
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame(kind::SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 0]));
    bytes
}

/// A gRPC request's header block, with `extra` headers after the usual ones.
fn header_block(path: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut headers = vec![
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "istiod.istio-system.svc:15010"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];
    headers.extend_from_slice(extra);
    encode(&headers)
}

fn headers(stream: u32, block: &[u8]) -> Vec<u8> {
    frame(kind::HEADERS, flag::END_HEADERS, stream, block)
}

fn data(stream: u32, payload: &[u8]) -> Vec<u8> {
    frame(kind::DATA, 0, stream, payload)
}

fn grpc(message: &[u8]) -> Vec<u8> {
    let mut framed = vec![0];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(message);
    framed
}

fn node(id: &str) -> Option<Node> {
    Some(Node {
        id: id.into(),
        cluster: "a.ns".into(),
        ..Default::default()
    })
}

fn sotw_request(id: &str) -> Vec<u8> {
    DiscoveryRequest {
        version_info: "v7".into(),
        node: node(id),
        type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
        ..Default::default()
    }
    .encode_to_vec()
}

fn delta_request(id: &str) -> Vec<u8> {
    DeltaDiscoveryRequest {
        node: node(id),
        type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// A whole first SotW stream, the ACK right after the client's SETTINGS.
fn sotw_connection() -> Vec<u8> {
    [
        start(),
        ACK.to_vec(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &grpc(&sotw_request(NODE_ID))),
    ]
    .concat()
}

fn ads(method: AdsMethod) -> Verdict {
    Verdict::Ads {
        method,
        node_id: NODE_ID.into(),
    }
}

/// `bytes` without the ACK frame at `at`.
fn without_ack(bytes: &[u8], at: usize) -> Vec<u8> {
    assert_eq!(bytes[at..at + 9], ACK, "no ACK at {at}");
    [&bytes[..at], &bytes[at + 9..]].concat()
}

/// Feeds `bytes` in reads of `chunk` bytes, stopping at the first answer that is not
/// `NeedMore`.
fn feed_in_chunks(max_bytes: usize, bytes: &[u8], chunk: usize) -> (Progress, Prelude) {
    let mut prelude = Prelude::new(max_bytes);
    let mut progress = Progress::NeedMore;
    for piece in bytes.chunks(chunk.max(1)) {
        prelude.buffer_mut().extend_from_slice(piece);
        progress = prelude.advance();
        if progress != Progress::NeedMore {
            break;
        }
    }
    (progress, prelude)
}

fn feed(bytes: &[u8]) -> (Progress, Prelude) {
    feed_in_chunks(LIMIT, bytes, bytes.len())
}

/// Reads `bytes` whole and one byte at a time: both must end alike (the whole read's
/// replay may hold more bytes, past where the verdict was known).
fn read_both_ways(bytes: &[u8]) -> (Progress, Prelude) {
    let (whole, whole_prelude) = feed(bytes);
    for chunk in [1, 2, 7, 100] {
        let (split, split_prelude) = feed_in_chunks(LIMIT, bytes, chunk);
        assert_eq!(
            std::mem::discriminant(&split),
            std::mem::discriminant(&whole),
            "chunk {chunk}: {split:?} vs {whole:?}"
        );
        assert_eq!(
            split_prelude.verdict(),
            whole_prelude.verdict(),
            "chunk {chunk}"
        );
        assert_eq!(
            split_prelude.acked(),
            whole_prelude.acked(),
            "chunk {chunk}"
        );
    }
    (whole, whole_prelude)
}

fn assert_other(bytes: &[u8], why_contains: &str) {
    let (progress, prelude) = read_both_ways(bytes);
    assert_eq!(progress, Progress::Ready);
    match prelude.verdict() {
        Some(Verdict::Other { why }) => assert!(why.contains(why_contains), "{why}"),
        other => panic!("{other:?}"),
    }
}

fn assert_invalid(bytes: &[u8], why_contains: &str) {
    let (progress, _) = read_both_ways(bytes);
    match progress {
        Progress::Invalid(why) => assert!(why.contains(why_contains), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_sotw_stream_names_its_node_and_the_replay_lacks_only_the_ack() {
    let bytes = sotw_connection();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
    assert!(prelude.acked());
    assert_eq!(prelude.into_replay(), without_ack(&bytes, start().len()));
}

#[test]
fn a_delta_stream_names_its_node() {
    let bytes = [
        start(),
        ACK.to_vec(),
        headers(1, &header_block(DELTA_PATH, &[])),
        data(1, &grpc(&delta_request(NODE_ID))),
    ]
    .concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Delta)));
}

#[test]
fn every_split_into_reads_gives_the_same_verdict_and_replay() {
    let bytes = sotw_connection();
    let whole = feed(&bytes).1.into_replay();
    for chunk in 1..40 {
        let (progress, prelude) = feed_in_chunks(LIMIT, &bytes, chunk);
        assert_eq!(progress, Progress::Ready, "chunk {chunk}");
        assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
        assert_eq!(prelude.into_replay(), whole, "chunk {chunk}");
    }
}

#[test]
fn padded_headers_with_priority_are_read() {
    let block = header_block(SOTW_PATH, &[]);
    let mut payload = vec![3]; // pad length
    payload.extend_from_slice(&[0x80, 0, 0, 0, 15]); // exclusive dependency on 0, weight
    payload.extend_from_slice(&block);
    payload.extend_from_slice(&[0; 3]);
    let flags = flag::END_HEADERS | flag::PADDED | flag::PRIORITY;
    let bytes = [
        start(),
        ACK.to_vec(),
        frame(kind::HEADERS, flags, 1, &payload),
        data(1, &grpc(&sotw_request(NODE_ID))),
    ]
    .concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
    assert_eq!(prelude.into_replay(), without_ack(&bytes, start().len()));
}

#[test]
fn a_header_block_continued_over_frames_is_gathered() {
    let block = header_block(DELTA_PATH, &[("x-long", &"v".repeat(300))]);
    let (first, rest) = block.split_at(40);
    let (second, third) = rest.split_at(200);
    let bytes = [
        start(),
        ACK.to_vec(),
        frame(kind::HEADERS, 0, 1, first),
        frame(kind::CONTINUATION, 0, 1, second),
        frame(kind::CONTINUATION, flag::END_HEADERS, 1, third),
        data(1, &grpc(&delta_request(NODE_ID))),
    ]
    .concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Delta)));
}

#[test]
fn a_message_over_padded_data_frames_is_gathered_without_the_padding() {
    let message = grpc(&sotw_request(NODE_ID));
    let mut bytes = [
        start(),
        ACK.to_vec(),
        headers(1, &header_block(SOTW_PATH, &[])),
    ]
    .concat();
    // Pieces of 1..=7 bytes, so that the prefix and the fields split everywhere.
    let mut rest = &message[..];
    let mut piece_len = 1;
    while !rest.is_empty() {
        let (piece, after) = rest.split_at(piece_len.min(rest.len()));
        let mut payload = vec![2];
        payload.extend_from_slice(piece);
        payload.extend_from_slice(&[0xee, 0xee]);
        bytes.extend(frame(kind::DATA, flag::PADDED, 1, &payload));
        rest = after;
        piece_len = piece_len % 7 + 1;
    }
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
}

#[test]
fn the_verdict_waits_for_the_ack_that_comes_after_it() {
    let before_ack = [
        start(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &grpc(&sotw_request(NODE_ID))),
        frame(PING, 0, 0, &[1; 8]),
    ]
    .concat();
    let (progress, mut prelude) = read_both_ways(&before_ack);
    assert_eq!(progress, Progress::NeedMore);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
    assert!(!prelude.acked());
    let tail = frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]);
    prelude.buffer_mut().extend_from_slice(&ACK);
    prelude.buffer_mut().extend_from_slice(&tail);
    assert_eq!(prelude.advance(), Progress::Ready);
    assert!(prelude.acked());
    assert_eq!(prelude.into_replay(), [before_ack, tail].concat());
}

#[test]
fn an_ack_before_the_first_headers_is_cut() {
    let bytes = [
        start(),
        frame(WINDOW_UPDATE, 0, 0, &[0, 0xf, 0, 1]),
        ACK.to_vec(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &grpc(&sotw_request(NODE_ID))),
    ]
    .concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert!(prelude.acked());
    let ack_at = start().len() + 13;
    assert_eq!(prelude.into_replay(), without_ack(&bytes, ack_at));
}

#[test]
fn only_the_first_ack_is_cut() {
    let bytes = [
        start(),
        ACK.to_vec(),
        ACK.to_vec(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &grpc(&sotw_request(NODE_ID))),
    ]
    .concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    let replay = prelude.into_replay();
    assert_eq!(replay, without_ack(&bytes, start().len()));
    assert_eq!(replay[start().len()..][..9], ACK);
}

#[test]
fn another_services_path_is_other_without_any_data() {
    let bytes = [
        start(),
        ACK.to_vec(),
        headers(1, &header_block(CA_PATH, &[])),
    ]
    .concat();
    assert_other(&bytes, "not ADS");
}

#[test]
fn a_stream_with_no_path_is_other() {
    let block = encode(&[(":method", "POST")]);
    let bytes = [start(), ACK.to_vec(), headers(1, &block)].concat();
    assert_other(&bytes, "no :path");
}

#[test]
fn a_compressed_first_message_is_other() {
    let mut message = grpc(&sotw_request(NODE_ID));
    message[0] = 1;
    let bytes = [
        start(),
        ACK.to_vec(),
        headers(
            1,
            &header_block(SOTW_PATH, &[("grpc-encoding", "identity")]),
        ),
        data(1, &message),
    ]
    .concat();
    assert_other(&bytes, "compressed");
}

#[test]
fn a_gzip_grpc_encoding_is_other() {
    let block = header_block(SOTW_PATH, &[("grpc-encoding", "gzip")]);
    let bytes = [start(), ACK.to_vec(), headers(1, &block)].concat();
    assert_other(&bytes, "compressed");
}

#[test]
fn a_request_without_a_node_or_with_an_empty_id_is_other() {
    for request in [
        DiscoveryRequest {
            version_info: "v7".into(),
            ..Default::default()
        }
        .encode_to_vec(),
        sotw_request(""),
        Vec::new(),
    ] {
        let bytes = [
            start(),
            ACK.to_vec(),
            headers(1, &header_block(SOTW_PATH, &[])),
            data(1, &grpc(&request)),
        ]
        .concat();
        assert_other(&bytes, "first request names no node");
    }
}

#[test]
fn the_last_node_id_wins_when_nodes_merge() {
    // Node { id: "first" }, version_info, Node { cluster: "c" }, Node { id: NODE_ID }:
    // protobuf merges the three nodes; the last id wins and a node without one keeps it.
    let mut request = Vec::new();
    request.extend(sotw_request("first"));
    request.extend(
        DiscoveryRequest {
            node: Some(Node {
                cluster: "c".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let merged = DiscoveryRequest::decode(&request[..]).unwrap();
    assert_eq!(merged.node.unwrap().id, "first");
    let bytes = [
        start(),
        ACK.to_vec(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &grpc(&request)),
    ]
    .concat();
    let (_, prelude) = read_both_ways(&bytes);
    assert_eq!(
        prelude.verdict(),
        Some(&Verdict::Ads {
            method: AdsMethod::Sotw,
            node_id: "first".into()
        })
    );

    request.extend(sotw_request(NODE_ID));
    let merged = DiscoveryRequest::decode(&request[..]).unwrap();
    assert_eq!(merged.node.unwrap().id, NODE_ID);
    let bytes = [
        start(),
        ACK.to_vec(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &grpc(&request)),
    ]
    .concat();
    let (_, prelude) = read_both_ways(&bytes);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
}

#[test]
fn an_unreadable_request_is_other() {
    let not_utf8 = [0x12, 0x04, 0x0a, 0x02, 0xff, 0xfe]; // node { id: "\xff\xfe" }
    let group = [0x0b, 0x0c]; // field 1 as a group
    let truncated = [0x12, 0x09, 0x0a]; // node of 9 bytes, 1 there
    let id_not_string = [0x12, 0x02, 0x08, 0x01]; // node { 1: varint }
    for (request, why) in [
        (&not_utf8[..], "UTF-8"),
        (&group[..], "group"),
        (&truncated[..], "past the end"),
        (&id_not_string[..], "not a string"),
    ] {
        let bytes = [
            start(),
            ACK.to_vec(),
            headers(1, &header_block(SOTW_PATH, &[])),
            data(1, &grpc(request)),
        ]
        .concat();
        assert_other(&bytes, why);
    }
}

#[test]
fn a_first_stream_that_ends_or_is_reset_without_a_message_is_other() {
    let block = header_block(SOTW_PATH, &[]);
    let message = grpc(&sotw_request(NODE_ID));
    let cases = [
        (
            frame(
                kind::HEADERS,
                flag::END_HEADERS | flag::END_STREAM,
                1,
                &block,
            ),
            "without a message",
        ),
        (
            [
                headers(1, &block),
                frame(kind::DATA, flag::END_STREAM, 1, &message[..20]),
            ]
            .concat(),
            "ended before its first message",
        ),
        (
            [
                headers(1, &block),
                data(1, &message[..3]),
                frame(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]),
            ]
            .concat(),
            "reset",
        ),
        (
            [
                headers(1, &block),
                frame(kind::GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]),
            ]
            .concat(),
            "GOAWAY",
        ),
    ];
    for (frames, why) in cases {
        assert_other(&[start(), ACK.to_vec(), frames].concat(), why);
    }
}

#[test]
fn frames_of_other_streams_pass_through() {
    let message = grpc(&sotw_request(NODE_ID));
    let bytes = [
        start(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &message[..10]),
        headers(3, &header_block(CA_PATH, &[])),
        data(3, &grpc(b"\x0a\x03csr")),
        frame(kind::RST_STREAM, 0, 3, &[0, 0, 0, 8]),
        ACK.to_vec(),
        data(1, &message[10..]),
    ]
    .concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
    let ack_at = bytes.len() - data(1, &message[10..]).len() - 9;
    assert_eq!(prelude.into_replay(), without_ack(&bytes, ack_at));
}

#[test]
fn an_unknown_frame_type_passes_through() {
    let unknown = frame(0xfa, 0xff, 0, b"extension");
    let bytes = [
        start(),
        unknown.clone(),
        ACK.to_vec(),
        unknown.clone(),
        headers(1, &header_block(SOTW_PATH, &[])),
        frame(0xfb, 0, 1, b"on the first stream"),
        data(1, &grpc(&sotw_request(NODE_ID))),
    ]
    .concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::Ready);
    assert_eq!(prelude.verdict(), Some(&ads(AdsMethod::Sotw)));
    let ack_at = start().len() + unknown.len();
    assert_eq!(prelude.into_replay(), without_ack(&bytes, ack_at));
}

#[test]
fn a_bad_preface_is_invalid_from_its_first_wrong_byte() {
    assert_invalid(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "preface");
    // A TLS ClientHello: the edge expected plaintext.
    let (progress, _) = feed_in_chunks(LIMIT, &[0x16, 0x03, 0x01], 1);
    assert!(matches!(progress, Progress::Invalid(_)), "{progress:?}");
    let (progress, _) = feed_in_chunks(LIMIT, &PREFACE[..10], 1);
    assert_eq!(progress, Progress::NeedMore);
}

#[test]
fn the_first_frame_must_be_the_clients_settings() {
    let bytes = [PREFACE.to_vec(), ACK.to_vec(), start()[24..].to_vec()].concat();
    assert_invalid(&bytes, "not the client's SETTINGS");
    let bytes = [PREFACE.to_vec(), headers(1, &header_block(SOTW_PATH, &[]))].concat();
    assert_invalid(&bytes, "not the client's SETTINGS");
}

#[test]
fn a_frame_larger_than_our_settings_allow_is_invalid() {
    let bytes = [start(), data(3, &vec![0; MAX_FRAME_PAYLOAD + 1])].concat();
    assert_invalid(&bytes[..start().len() + 9], "larger than the 16384");
    // The largest allowed is fine.
    let bytes = [start(), data(3, &vec![0; MAX_FRAME_PAYLOAD]), ACK.to_vec()].concat();
    let (progress, prelude) = read_both_ways(&bytes);
    assert_eq!(progress, Progress::NeedMore);
    assert!(prelude.acked());
}

#[test]
fn protocol_violations_we_rely_on_are_invalid() {
    let block = header_block(SOTW_PATH, &[]);
    let cases = [
        (
            frame(kind::SETTINGS, flag::ACK, 0, &[0; 6]),
            "SETTINGS ACK of 6 bytes",
        ),
        (frame(kind::SETTINGS, flag::ACK, 1, &[]), "on stream 1"),
        (headers(2, &block), "cannot open"),
        (headers(0, &block), "cannot open"),
        (
            [frame(kind::HEADERS, 0, 1, &block[..5]), data(1, b"x")].concat(),
            "inside stream 1's header block",
        ),
        (
            [
                frame(kind::HEADERS, 0, 1, &block[..5]),
                frame(kind::CONTINUATION, flag::END_HEADERS, 3, &block[5..]),
            ]
            .concat(),
            "inside stream 1's header block",
        ),
        (
            [frame(kind::HEADERS, 0, 1, &block[..5]), ACK.to_vec()].concat(),
            "inside stream 1's header block",
        ),
        (
            frame(kind::HEADERS, flag::END_HEADERS | flag::PADDED, 1, &[]),
            "no pad length",
        ),
        (
            frame(
                kind::HEADERS,
                flag::END_HEADERS | flag::PADDED,
                1,
                &[9, 1, 2],
            ),
            "padded past its end",
        ),
        (
            frame(
                kind::HEADERS,
                flag::END_HEADERS | flag::PRIORITY,
                1,
                &[0, 0],
            ),
            "priority",
        ),
        // An indexed header beyond both tables.
        (headers(1, &[0xff, 0x7f]), "HPACK"),
        // A dynamic table size update beyond the default 4096.
        (headers(1, &[0x3f, 0xe1, 0x3f, 0x84]), "HPACK"),
    ];
    for (frames, why) in cases {
        assert_invalid(&[start(), frames].concat(), why);
    }
    let bytes = [
        start(),
        ACK.to_vec(),
        headers(1, &block),
        frame(kind::DATA, flag::PADDED, 1, &[200, 0, 0]),
    ]
    .concat();
    assert_invalid(&bytes, "padded past its end");
}

#[test]
fn invalid_stays_invalid() {
    let mut prelude = Prelude::new(LIMIT);
    prelude.buffer_mut().extend_from_slice(b"GET ");
    assert!(matches!(prelude.advance(), Progress::Invalid(_)));
    prelude.buffer_mut().extend_from_slice(&sotw_connection());
    assert!(matches!(prelude.advance(), Progress::Invalid(_)));
}

#[test]
fn the_limit_counts_every_byte_read_the_cut_ack_included() {
    let bytes = sotw_connection();
    // Exactly enough: ready, however the bytes came.
    for chunk in [1, 9, bytes.len()] {
        let (progress, _) = feed_in_chunks(bytes.len(), &bytes, chunk);
        assert_eq!(progress, Progress::Ready, "chunk {chunk}");
    }
    // One byte short: invalid, however the bytes came, and said as soon as certain.
    for chunk in [1, 9, bytes.len()] {
        let (progress, prelude) = feed_in_chunks(bytes.len() - 1, &bytes, chunk);
        match progress {
            Progress::Invalid(why) => assert!(why.contains("without a verdict"), "{why}"),
            other => panic!("chunk {chunk}: {other:?}"),
        }
        assert!(prelude.acked());
    }
    // A verdict but no ACK within the limit.
    let no_ack = [
        start(),
        headers(1, &header_block(CA_PATH, &[])),
        frame(PING, 0, 0, &[0; 8]),
    ]
    .concat();
    let (progress, prelude) = feed_in_chunks(no_ack.len(), &no_ack, 1);
    match progress {
        Progress::Invalid(why) => assert!(why.contains("ACK"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(prelude.verdict().is_some());
    // A first message longer than the limit.
    let mut prefix = vec![0];
    prefix.extend_from_slice(&u32::MAX.to_be_bytes());
    let huge = [
        start(),
        ACK.to_vec(),
        headers(1, &header_block(SOTW_PATH, &[])),
        data(1, &prefix),
    ]
    .concat();
    let (progress, _) = feed_in_chunks(huge.len() + 100, &huge, huge.len());
    assert_eq!(progress, Progress::NeedMore);
    let mut prelude = Prelude::new(huge.len() + 100);
    prelude.buffer_mut().extend_from_slice(&huge);
    prelude.advance();
    prelude.buffer_mut().extend_from_slice(&data(1, &[0; 200]));
    assert!(matches!(prelude.advance(), Progress::Invalid(_)));
}

#[test]
fn replay_is_available_before_any_verdict() {
    let bytes = [start(), ACK.to_vec(), frame(PING, 0, 0, &[7; 8])].concat();
    let (progress, prelude) = feed(&bytes);
    assert_eq!(progress, Progress::NeedMore);
    assert!(prelude.acked());
    assert_eq!(prelude.verdict(), None);
    assert_eq!(prelude.into_replay(), without_ack(&bytes, start().len()));
}

/// Corrupted connections, read whole and byte by byte: never a panic, and the same
/// outcome either way.
#[test]
fn corrupted_input_never_panics_and_reads_alike_in_any_split() {
    let base = [
        start(),
        ACK.to_vec(),
        frame(
            kind::HEADERS,
            flag::PADDED | flag::PRIORITY,
            1,
            &[
                [2, 0, 0, 0, 0, 9].to_vec(),
                header_block(SOTW_PATH, &[]),
                vec![0, 0],
            ]
            .concat(),
        ),
        frame(kind::CONTINUATION, flag::END_HEADERS, 1, &[]),
        frame(
            kind::DATA,
            flag::PADDED,
            1,
            &[[1].to_vec(), grpc(&sotw_request(NODE_ID)), vec![0]].concat(),
        ),
    ]
    .concat();
    assert_eq!(feed(&base).1.verdict(), Some(&ads(AdsMethod::Sotw)));
    // xorshift: deterministic, no dependency.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..3000 {
        let mut bytes = base.clone();
        let flips = 1 + next() % 4;
        for _ in 0..flips {
            let at = usize::try_from(next()).unwrap() % bytes.len();
            bytes[at] = u8::try_from(next() & 0xff).unwrap();
        }
        if next() % 4 == 0 {
            bytes.truncate(usize::try_from(next()).unwrap() % (bytes.len() + 1));
        }
        let max_bytes = 100 + usize::try_from(next()).unwrap() % 400;
        let (whole, whole_prelude) = feed_in_chunks(max_bytes, &bytes, bytes.len());
        let (bytewise, bytewise_prelude) = feed_in_chunks(max_bytes, &bytes, 1);
        assert_eq!(
            std::mem::discriminant(&whole),
            std::mem::discriminant(&bytewise),
            "{whole:?} vs {bytewise:?}"
        );
        assert_eq!(whole_prelude.verdict(), bytewise_prelude.verdict());
        let whole_replay = whole_prelude.into_replay();
        assert!(whole_replay.starts_with(&bytewise_prelude.into_replay()));
    }
}

// ---- real clients ------------------------------------------------------------------------

/// Big enough that the first request spans several DATA frames (16 KiB each at most).
fn big_metadata() -> Option<Struct> {
    let fields = (0..200)
        .map(|i| {
            let value = StructValue {
                kind: Some(Kind::StringValue(format!("{i:03}-{}", "m".repeat(100)))),
            };
            (format!("LABEL_{i:03}"), value)
        })
        .collect();
    Some(Struct { fields })
}

fn real_node() -> Option<Node> {
    Some(Node {
        id: NODE_ID.into(),
        metadata: big_metadata(),
        ..Default::default()
    })
}

/// A tonic client's ADS stream on `addr` with `method`: a first request, and a second
/// once the first is answered. Resolves to the two responses' versions (from [`EchoNode`]).
fn spawn_real_client(
    addr: std::net::SocketAddr,
    method: AdsMethod,
) -> tokio::task::JoinHandle<Vec<String>> {
    tokio::spawn(async move {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let type_url = "type.googleapis.com/envoy.config.cluster.v3.Cluster".to_string();
        match method {
            AdsMethod::Sotw => {
                let (requests, rx) = tokio::sync::mpsc::channel(2);
                let first = DiscoveryRequest {
                    version_info: "v7".into(),
                    node: real_node(),
                    type_url: type_url.clone(),
                    ..Default::default()
                };
                requests.send(first).await.unwrap();
                let mut responses = client
                    .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await
                    .unwrap()
                    .into_inner();
                let mut versions = vec![responses.message().await.unwrap().unwrap().version_info];
                let second = DiscoveryRequest {
                    version_info: versions[0].clone(),
                    type_url,
                    ..Default::default()
                };
                requests.send(second).await.unwrap();
                versions.push(responses.message().await.unwrap().unwrap().version_info);
                versions
            }
            AdsMethod::Delta => {
                let (requests, rx) = tokio::sync::mpsc::channel(2);
                let first = DeltaDiscoveryRequest {
                    node: real_node(),
                    type_url: type_url.clone(),
                    ..Default::default()
                };
                requests.send(first).await.unwrap();
                let mut responses = client
                    .delta_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await
                    .unwrap()
                    .into_inner();
                let mut versions = vec![
                    responses
                        .message()
                        .await
                        .unwrap()
                        .unwrap()
                        .system_version_info,
                ];
                let second = DeltaDiscoveryRequest {
                    type_url,
                    ..Default::default()
                };
                requests.send(second).await.unwrap();
                versions.push(
                    responses
                        .message()
                        .await
                        .unwrap()
                        .unwrap()
                        .system_version_info,
                );
                versions
            }
        }
    })
}

/// What the edge holds once a real client's prelude is read.
struct Accepted {
    socket: TcpStream,
    prelude: Prelude,
    /// Every byte read from the client.
    raw: Vec<u8>,
    client: tokio::task::JoinHandle<Vec<String>>,
}

/// Accepts a real client's connection as the edge does: our empty SETTINGS first, then
/// reads until `Ready`.
async fn accept_real_client(method: AdsMethod) -> Accepted {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = spawn_real_client(listener.local_addr().unwrap(), method);
    let (mut socket, _) = listener.accept().await.unwrap();
    socket.write_all(&EMPTY_SETTINGS).await.unwrap();
    let mut prelude = Prelude::new(LIMIT);
    let mut raw = Vec::new();
    let read = async {
        loop {
            let before = prelude.buffer_mut().len();
            let n = socket.read_buf(prelude.buffer_mut()).await.unwrap();
            assert_ne!(n, 0, "the client closed");
            raw.extend_from_slice(&prelude.buffer_mut()[before..]);
            match prelude.advance() {
                Progress::NeedMore => {}
                Progress::Ready => return,
                Progress::Invalid(why) => panic!("{why}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("no verdict from a real client");
    Accepted {
        socket,
        prelude,
        raw,
        client,
    }
}

/// Where the first SETTINGS ACK frame starts in a client's bytes.
fn first_ack(raw: &[u8]) -> usize {
    let mut at = PREFACE.len();
    loop {
        let header = FrameHeader::parse(&raw[at..]).expect("no ACK in the client's bytes");
        if header.kind == kind::SETTINGS && header.flags & flag::ACK != 0 {
            return at;
        }
        at += FRAME_HEADER_LEN + header.len;
    }
}

async fn a_real_client_is_read(method: AdsMethod) {
    let accepted = accept_real_client(method).await;
    accepted.client.abort();
    assert_eq!(accepted.prelude.verdict(), Some(&ads(method)));
    assert!(accepted.prelude.acked());
    // The request spanned several DATA frames.
    assert!(
        accepted.raw.len() > MAX_FRAME_PAYLOAD + 1024,
        "{}",
        accepted.raw.len()
    );
    let replay = accepted.prelude.into_replay();
    assert!(replay.starts_with(PREFACE));
    assert_eq!(replay, without_ack(&accepted.raw, first_ack(&accepted.raw)));
}

#[tokio::test]
async fn a_real_sotw_client_is_read_and_its_replay_lacks_only_the_ack() {
    a_real_client_is_read(AdsMethod::Sotw).await;
}

#[tokio::test]
async fn a_real_delta_client_is_read_and_its_replay_lacks_only_the_ack() {
    a_real_client_is_read(AdsMethod::Delta).await;
}

/// An ADS server that answers each request of a stream with version `{node ID}#{n}`: the
/// node ID of the stream's first request, and the request's index.
struct EchoNode;

type Responses<T> = Pin<Box<dyn Stream<Item = Result<T, tonic::Status>> + Send>>;

/// `respond(version)` for each of `requests`, versions as [`EchoNode`] says.
async fn echo_node<Req, Resp>(
    mut requests: tonic::Streaming<Req>,
    node_id: impl Fn(&Req) -> Option<String>,
    respond: impl Fn(String) -> Resp + Send + 'static,
) -> Result<tonic::Response<Responses<Resp>>, tonic::Status>
where
    Req: Send + 'static,
    Resp: Send + 'static,
{
    let first = requests
        .message()
        .await?
        .ok_or_else(|| tonic::Status::invalid_argument("no request"))?;
    let id = node_id(&first).ok_or_else(|| tonic::Status::invalid_argument("no node"))?;
    let mut index = 0;
    let responses = tokio_stream::once(Ok(()))
        .chain(requests.map(|request| request.map(drop)))
        .map(move |request| {
            let version = format!("{id}#{index}");
            index += 1;
            request.map(|()| respond(version))
        });
    Ok(tonic::Response::new(Box::pin(responses)))
}

#[async_trait::async_trait]
impl AggregatedDiscoveryService for EchoNode {
    type StreamAggregatedResourcesStream = Responses<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Responses<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: tonic::Request<tonic::Streaming<DiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::StreamAggregatedResourcesStream>, tonic::Status> {
        echo_node(
            request.into_inner(),
            |r| r.node.as_ref().map(|n| n.id.clone()),
            |version_info| DiscoveryResponse {
                version_info,
                ..Default::default()
            },
        )
        .await
    }

    async fn delta_aggregated_resources(
        &self,
        request: tonic::Request<tonic::Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::DeltaAggregatedResourcesStream>, tonic::Status> {
        echo_node(
            request.into_inner(),
            |r| r.node.as_ref().map(|n| n.id.clone()),
            |system_version_info| DeltaDiscoveryResponse {
                system_version_info,
                ..Default::default()
            },
        )
        .await
    }
}

/// Hands the connection to a real HTTP/2 server (tonic: hyper and h2) as the edge does:
/// the replay first, then the socket's further bytes, both ways.
async fn serve_with_replay(mut socket: TcpStream, replay: Bytes) {
    let (server_side, mut edge_side) = tokio::io::duplex(1 << 20);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AggregatedDiscoveryServiceServer::new(EchoNode))
            .serve_with_incoming(tokio_stream::once(Ok::<_, std::io::Error>(server_side))),
    );
    edge_side.write_all(&replay).await.unwrap();
    tokio::spawn(async move {
        let _ = tokio::io::copy_bidirectional(&mut socket, &mut edge_side).await;
    });
}

async fn a_real_server_serves_the_replay(method: AdsMethod) {
    let accepted = accept_real_client(method).await;
    assert_eq!(accepted.prelude.verdict(), Some(&ads(method)));
    serve_with_replay(accepted.socket, accepted.prelude.into_replay()).await;
    let answered = tokio::time::timeout(Duration::from_secs(10), accepted.client)
        .await
        .expect("the real server did not answer the replayed stream")
        .unwrap();
    // The second answer comes after the client has ACKed the real server's SETTINGS: the
    // server saw exactly one ACK, its own (h2 ends the connection on an unexpected one).
    assert_eq!(answered, [format!("{NODE_ID}#0"), format!("{NODE_ID}#1")]);
}

#[tokio::test]
async fn a_real_http2_server_serves_a_replayed_sotw_stream() {
    a_real_server_serves_the_replay(AdsMethod::Sotw).await;
}

#[tokio::test]
async fn a_real_http2_server_serves_a_replayed_delta_stream() {
    a_real_server_serves_the_replay(AdsMethod::Delta).await;
}

/// An HPACK header block of `headers`, names and values Huffman-coded as clients send them.
fn encode(headers: &[(&str, &str)]) -> Vec<u8> {
    use httlib_hpack::Encoder;
    let mut encoder = Encoder::default();
    let mut block = Vec::new();
    for (name, value) in headers {
        let flags = Encoder::HUFFMAN_NAME | Encoder::HUFFMAN_VALUE | Encoder::BEST_FORMAT;
        let field = (name.as_bytes().to_vec(), value.as_bytes().to_vec(), flags);
        encoder.encode(field, &mut block).expect("encodes");
    }
    block
}
