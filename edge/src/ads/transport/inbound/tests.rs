use super::*;
use crate::ads::transport::tests::grpc;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use futures::StreamExt;
use http_body::Frame;
use http_body_util::StreamBody;
use prost::Message;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tonic::Code;

type Chunks = futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>;

fn inbound(chunks: Vec<Bytes>, max: usize) -> Inbound<StreamBody<Chunks>, DiscoveryRequest> {
    let frames: Vec<_> = chunks.into_iter().map(|c| Ok(Frame::data(c))).collect();
    Inbound::new(StreamBody::new(futures::stream::iter(frames)), max)
}

fn request(type_url: &str, names: usize) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        resource_names: (0..names)
            .map(|i| format!("outbound|80||svc-{i}"))
            .collect(),
        ..Default::default()
    }
}

async fn all(
    mut s: Inbound<StreamBody<Chunks>, DiscoveryRequest>,
) -> Vec<Result<DiscoveryRequest, Status>> {
    let mut out = Vec::new();
    while let Some(r) = s.next().await {
        out.push(r);
    }
    out
}

#[tokio::test]
async fn several_messages_in_one_chunk() {
    let reqs = [request("a", 1), request("b", 0), request("c", 3)];
    let mut chunk = Vec::new();
    for r in &reqs {
        chunk.extend(grpc(&r.encode_to_vec()));
    }
    let got = all(inbound(vec![chunk.into()], 1 << 20)).await;
    let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
    assert_eq!(got, reqs);
}

#[tokio::test]
async fn messages_split_across_chunks() {
    let reqs = [request("a", 2_000), request("b", 1), request("c", 500)];
    let mut stream = Vec::new();
    for r in &reqs {
        stream.extend(grpc(&r.encode_to_vec()));
    }
    // HTTP/2's default frame size, then awkward small cuts (inside prefixes too).
    for size in [16_384, 3, 7, 1000] {
        let chunks = stream.chunks(size).map(Bytes::copy_from_slice).collect();
        let got = all(inbound(chunks, 1 << 20)).await;
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got, reqs, "chunks of {size}");
    }
}

/// A relay passes the proxy's requests on undecoded: each as the proxy framed it, however
/// HTTP/2 cut it, and a request the stream cannot take is refused as when decoding.
#[tokio::test]
async fn framed_requests_are_the_bytes_the_proxy_sent() {
    let framed: Vec<Vec<u8>> = [request("a", 2_000), request("b", 0), request("c", 7)]
        .iter()
        .map(|r| grpc(&r.encode_to_vec()))
        .collect();
    let stream = framed.concat();
    for size in [16_384, 5, 1000, stream.len()] {
        let chunks = stream.chunks(size).map(Bytes::copy_from_slice).collect();
        let mut s = inbound(chunks, 1 << 20);
        let mut got = Vec::new();
        while let Some(r) = futures::future::poll_fn(|cx| s.poll_framed(cx)).await {
            got.push(r.unwrap().to_vec());
        }
        assert_eq!(got, framed, "chunks of {size}");
    }
    let big = grpc(&request("a", 100).encode_to_vec());
    let mut s = inbound(vec![big.into()], 100);
    let refused = futures::future::poll_fn(|cx| s.poll_framed(cx)).await;
    assert_eq!(
        refused.unwrap().unwrap_err().code(),
        Code::ResourceExhausted
    );
    assert!(
        futures::future::poll_fn(|cx| s.poll_framed(cx))
            .await
            .is_none()
    );
}

#[tokio::test]
async fn refused_requests_end_the_stream_with_a_status() {
    let big = grpc(&request("a", 100).encode_to_vec());
    let got = all(inbound(vec![big.clone().into()], 100)).await;
    assert_eq!(got.len(), 1);
    let status = got[0].as_ref().unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(
        status.message().contains("SHOAL_XDS_MAX_REQUEST_BYTES"),
        "{status}"
    );

    let mut compressed = grpc(&request("a", 1).encode_to_vec());
    compressed[0] = 1;
    let got = all(inbound(
        vec![compressed.into(), big.clone().into()],
        1 << 20,
    ))
    .await;
    assert_eq!(got.len(), 1);
    let status = got[0].as_ref().unwrap_err();
    assert_eq!(status.code(), Code::Unimplemented);
    assert!(status.message().contains("compression"), "{status}");

    let got = all(inbound(vec![grpc(b"\xff\xff\xff").into()], 1 << 20)).await;
    let status = got[0].as_ref().unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("DiscoveryRequest"), "{status}");

    let got = all(inbound(vec![big[..big.len() - 1].to_vec().into()], 1 << 20)).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].as_ref().unwrap_err().code(), Code::InvalidArgument);
}

#[tokio::test]
async fn a_failing_body_ends_the_stream_quietly() {
    let frames: Vec<Result<Frame<Bytes>, &str>> = vec![
        Ok(Frame::data(grpc(&request("a", 1).encode_to_vec()).into())),
        Err("stream reset by the proxy"),
    ];
    let mut s = Inbound::<_, DiscoveryRequest>::new(
        StreamBody::new(futures::stream::iter(frames)),
        1 << 20,
    );
    assert_eq!(s.next().await.unwrap().unwrap().type_url, "a");
    assert!(s.next().await.is_none());
    assert!(s.next().await.is_none());
}

/// Bytes whose allocation reports when it is freed.
struct Tracked(Vec<u8>, Arc<AtomicBool>);

impl AsRef<[u8]> for Tracked {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.1.store(true, Ordering::SeqCst);
    }
}

/// Between messages a stream holds no request bytes: neither the DATA chunk a message was
/// decoded from nor the buffer a split message was gathered in.
#[tokio::test]
async fn nothing_is_retained_between_messages() {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut s = Inbound::<_, DiscoveryRequest>::new(body, 1 << 20);

    // Whole in one chunk: decoded from the chunk, which is let go at once.
    let freed = Arc::new(AtomicBool::new(false));
    let chunk = grpc(&request("a", 1_000).encode_to_vec());
    tx.send(Ok(Frame::data(Bytes::from_owner(Tracked(
        chunk,
        freed.clone(),
    )))))
    .await
    .unwrap();
    assert_eq!(s.next().await.unwrap().unwrap().resource_names.len(), 1_000);
    assert!(
        freed.load(Ordering::SeqCst),
        "the chunk outlived its message"
    );
    assert_eq!(s.held(), 0);

    // Split over three chunks: gathered, then released with the message.
    let split = grpc(&request("b", 5_000).encode_to_vec());
    for part in split.chunks(split.len() / 3 + 1) {
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(part))))
            .await
            .unwrap();
    }
    assert_eq!(s.next().await.unwrap().unwrap().resource_names.len(), 5_000);
    assert_eq!(s.held(), 0);
    drop(tx);
    assert!(s.next().await.is_none());
}
