use super::*;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn response(nonce: &str) -> Bytes {
    crate::ads::transport::frame(&DiscoveryResponse {
        nonce: nonce.into(),
        ..Default::default()
    })
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

#[tokio::test]
async fn responses_then_ok_trailers() {
    let (tx, rx) = channel(4);
    let (_close_tx, close_rx) = oneshot::channel();
    let mut body = Outbound::new(rx, close_rx, Gauge::default());
    tx.send(response("1")).await.unwrap();
    tx.send(response("2")).await.unwrap();
    drop(tx);
    let a = body
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.nonce, "1");
    assert!(!body.is_end_stream());
    let b = body
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b.nonce, "2");
    let trailers = body
        .frame()
        .await
        .unwrap()
        .unwrap()
        .into_trailers()
        .unwrap();
    assert_eq!(trailers["grpc-status"], "0");
    assert!(body.is_end_stream());
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn a_closing_status_goes_out_before_what_is_queued() {
    let (tx, rx) = channel(4);
    let (close_tx, close_rx) = oneshot::channel();
    let mut body = Outbound::new(rx, close_rx, Gauge::default());
    tx.send(response("queued")).await.unwrap();
    close_tx
        .send(Status::unavailable("edge is draining; reconnect"))
        .unwrap();
    drop(tx);
    let trailers = body
        .frame()
        .await
        .unwrap()
        .unwrap()
        .into_trailers()
        .unwrap();
    let status = Status::from_header_map(&trailers).unwrap();
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert_eq!(status.message(), "edge is draining; reconnect");
    assert!(body.frame().await.is_none());
}

/// A chunk holds its place in the stream's buffer until HTTP/2 drops it (written), so a
/// proxy that stops reading stops its task's sends; the edge's gauge counts its bytes.
#[tokio::test]
async fn chunks_count_against_the_buffer_until_written() {
    let (tx, rx) = channel(2);
    let (_close_tx, close_rx) = oneshot::channel();
    let queued = Gauge::default();
    let mut body = Outbound::new(rx, close_rx, queued.clone());
    let (a, b) = (response("a"), response("b"));
    let size = (a.len() + b.len()) as i64;
    tx.send(a).await.unwrap();
    tx.send(b).await.unwrap();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(queued.get(), size);
    assert!(tx.try_send(response("c")).is_err(), "both still held");
    drop(first);
    tx.try_send(response("c")).unwrap();
    drop(second);
    let third = body.frame().await.unwrap().unwrap().into_data().unwrap();
    drop(third);
    assert_eq!(queued.get(), 0);
}

#[test]
fn the_default_body_is_already_ended_for_trailers_only_responses() {
    let body = Outbound::default();
    assert!(body.is_end_stream());
    assert_eq!(body.size_hint().exact(), Some(0));
}

/// A stream keeps no buffer sized by what it sent: the body holds two channel handles and
/// the gauge, and a response's allocation is freed as soon as its chunk is written out,
/// however large.
#[tokio::test]
async fn the_body_retains_nothing_of_a_sent_response() {
    assert!(std::mem::size_of::<Outbound>() <= 4 * std::mem::size_of::<usize>());
    let (tx, rx) = channel(1);
    let (_close_tx, close_rx) = oneshot::channel();
    let mut body = Outbound::new(rx, close_rx, Gauge::default());
    for size in [1 << 10, 1 << 20, 8 << 20] {
        let freed = Arc::new(AtomicBool::new(false));
        tx.send(Bytes::from_owner(Tracked(vec![0; size], freed.clone())))
            .await
            .unwrap();
        let chunk = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(chunk.len(), size);
        assert!(!freed.load(Ordering::SeqCst));
        drop(chunk); // as h2 does once the DATA frames are written
        assert!(freed.load(Ordering::SeqCst), "body kept {size} bytes");
    }
}
