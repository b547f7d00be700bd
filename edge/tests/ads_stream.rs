//! The ADS server over a real gRPC connection: SotW subscribe/ACK/push/NACK, Delta, drain.

mod ads_support;

use ads_support::*;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use prost::Message;
use shoal_edge::ads::XdsConfig;
use shoal_edge::proxy::node_metadata;
use shoal_proto::push_context::PushContext;
use shoal_proto::xds::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

const WAIT: Duration = Duration::from_secs(10);
const QUIET: Duration = Duration::from_millis(300);

fn node() -> envoy_types::pb::envoy::config::core::v3::Node {
    node_as(NODE_ID)
}

fn node_as(id: &str) -> envoy_types::pb::envoy::config::core::v3::Node {
    envoy_types::pb::envoy::config::core::v3::Node {
        id: id.into(),
        metadata: Some(node_metadata(NS, &Default::default(), "REDIRECT")),
        ..Default::default()
    }
}

/// One SotW stream, driven like Envoy drives it.
struct Sotw {
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: Streaming<DiscoveryResponse>,
}

impl Sotw {
    async fn open(h: &Harness, type_url: &str, names: &[&str]) -> Sotw {
        Sotw::open_as(h, NODE_ID, type_url, names).await
    }

    async fn open_as(h: &Harness, node_id: &str, type_url: &str, names: &[&str]) -> Sotw {
        Sotw::open_with(
            h,
            DiscoveryRequest {
                node: Some(node_as(node_id)),
                ..request(type_url, names, "", "")
            },
        )
        .await
    }

    /// A stream whose first request is `first`.
    async fn open_with(h: &Harness, first: DiscoveryRequest) -> Sotw {
        let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{}", h.addr))
            .await
            .unwrap();
        let (tx, rx) = mpsc::channel(16);
        tx.send(first).await.unwrap();
        let rx = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        Sotw { tx, rx }
    }

    async fn send(&self, req: DiscoveryRequest) {
        self.tx.send(req).await.unwrap();
    }

    async fn recv(&mut self) -> DiscoveryResponse {
        tokio::time::timeout(WAIT, self.rx.message())
            .await
            .expect("a response")
            .unwrap()
            .expect("stream open")
    }

    async fn quiet(&mut self) {
        if let Ok(m) = tokio::time::timeout(QUIET, self.rx.message()).await {
            panic!("expected no response, got {m:?}");
        }
    }

    /// ACKs `r`, keeping the subscription `names`.
    async fn ack(&self, r: &DiscoveryResponse, names: &[&str]) {
        self.send(request(&r.type_url, names, &r.nonce, &r.version_info))
            .await;
    }
}

fn request(type_url: &str, names: &[&str], nonce: &str, version: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.into(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        response_nonce: nonce.into(),
        version_info: version.into(),
        ..Default::default()
    }
}

fn cluster_names(r: &DiscoveryResponse) -> Vec<String> {
    r.resources
        .iter()
        .map(|a| Cluster::decode(a.value.as_slice()).unwrap().name)
        .collect()
}

fn cla_names(r: &DiscoveryResponse) -> Vec<String> {
    r.resources
        .iter()
        .map(|a| {
            ClusterLoadAssignment::decode(a.value.as_slice())
                .unwrap()
                .cluster_name
        })
        .collect()
}

fn outbound(host: &str) -> String {
    format!("outbound|9080||{host}")
}

#[tokio::test]
async fn sotw_subscribe_ack_push_and_nack() {
    let h = Harness::start(mesh_v1()).await;
    let mut s = Sotw::open(&h, CLUSTER, &[]).await;

    // CDS wildcard: the first config comes from the current snapshot, no update needed.
    let cds = s.recv().await;
    assert_eq!(cds.type_url, CLUSTER);
    assert_eq!(cds.version_info, "1");
    let clusters = cluster_names(&cds);
    for host in [REVIEWS, RATINGS] {
        assert!(clusters.contains(&outbound(host)), "{clusters:?}");
    }
    s.ack(&cds, &[]).await;
    s.quiet().await;

    // EDS for the clusters just received, LDS wildcard, RDS by name.
    let eds_names = [outbound(RATINGS), outbound(REVIEWS)];
    let eds_names: Vec<&str> = eds_names.iter().map(String::as_str).collect();
    s.send(request(ENDPOINT, &eds_names, "", "")).await;
    let eds = s.recv().await;
    assert_eq!(eds.type_url, ENDPOINT);
    let mut got = cla_names(&eds);
    got.sort();
    assert_eq!(got, eds_names);
    s.ack(&eds, &eds_names).await;

    s.send(request(LISTENER, &[], "", "")).await;
    let lds = s.recv().await;
    assert_eq!(lds.type_url, LISTENER);
    assert!(!lds.resources.is_empty());
    s.ack(&lds, &[]).await;

    s.send(request(ROUTE, &["9080"], "", "")).await;
    let rds = s.recv().await;
    assert_eq!(rds.type_url, ROUTE);
    assert_eq!(rds.resources.len(), 1);
    s.ack(&rds, &["9080"]).await;
    s.quiet().await;

    // An endpoint-only update for reviews: one EDS response, with only reviews.
    let (reviews, ratings) = (service("reviews", 9080), service("ratings", 9080));
    let v2 = h
        .latest()
        .with_changes(2, [endpoints(&reviews, &["10.2.0.1", "10.2.0.9"])], []);
    h.update(v2, false, &[service_key(REVIEWS)]).await;
    let pushed = s.recv().await;
    assert_eq!(pushed.type_url, ENDPOINT);
    assert_eq!(pushed.version_info, "2");
    assert_eq!(cla_names(&pushed), [outbound(REVIEWS)]);
    s.ack(&pushed, &eds_names).await;
    s.quiet().await;

    // A full update adding a service: CDS first (make before break), the full set.
    let details = service("details", 9080);
    let v3 = h.latest().with_changes(
        3,
        [
            endpoints(&details, &["10.2.0.3"]),
            namespace(vec![reviews, ratings, details]),
        ],
        [],
    );
    h.update(v3, true, &[service_key(DETAILS)]).await;
    let cds3 = s.recv().await;
    assert_eq!(cds3.type_url, CLUSTER);
    assert_eq!(cds3.version_info, "3");
    assert!(cluster_names(&cds3).contains(&outbound(DETAILS)));

    // The proxy rejects it: recorded, nothing resent, visible in syncz and metrics.
    s.send(DiscoveryRequest {
        error_detail: Some(RpcStatus {
            code: 3,
            message: "cluster details: bad config".into(),
            details: vec![],
        }),
        ..request(CLUSTER, &[], &cds3.nonce, &cds.version_info)
    })
    .await;
    // Drain whatever else the full push sent (LDS/RDS may have changed), ACKing nothing.
    while tokio::time::timeout(QUIET, s.rx.message()).await.is_ok() {}

    let syncz = h.server.syncz();
    let proxy = &syncz[0];
    assert_eq!(proxy["proxy"], NODE_ID);
    assert_eq!(proxy["protocol"], "sotw");
    let cds_state = &proxy["types"]["cds"];
    assert_eq!(cds_state["state"], "NACKED", "{syncz:#}");
    assert_eq!(cds_state["nack"]["message"], "cluster details: bad config");
    assert_eq!(cds_state["version_acked"], "1");
    assert_eq!(proxy["types"]["eds"]["state"], "SYNCED", "{syncz:#}");
    assert_eq!(proxy["types"]["eds"]["version_acked"], "2");

    let metrics = h.metrics();
    assert!(metrics.contains("pilot_xds 1"), "{metrics}");
    assert!(
        metrics.contains(r#"pilot_total_xds_rejects_total{type="cds"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"pilot_xds_pushes_total{type="eds"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("pilot_proxy_convergence_time_count"),
        "{metrics}"
    );

    // Drain: the stream ends with UNAVAILABLE so the proxy reconnects elsewhere.
    let Sotw { tx: _tx, mut rx } = s;
    h.shutdown().await;
    let status = loop {
        match tokio::time::timeout(WAIT, rx.message()).await.unwrap() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("stream ended without a status"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
}

#[tokio::test]
async fn proxy_connected_before_any_snapshot_gets_config_when_one_arrives() {
    let h = Harness::start(shoal_proto::push_context::PushContext::empty()).await;
    let mut s = Sotw::open(&h, CLUSTER, &[]).await;
    let empty = s.recv().await;
    assert_eq!(empty.version_info, "0");
    assert!(!cluster_names(&empty).contains(&outbound(REVIEWS)));
    s.ack(&empty, &[]).await;

    h.update(mesh_v1(), true, &[]).await;
    let cds = s.recv().await;
    assert_eq!(cds.version_info, "1");
    assert!(cluster_names(&cds).contains(&outbound(REVIEWS)));
    h.shutdown().await;
}

#[tokio::test]
async fn bad_node_is_rejected_with_a_hint() {
    let h = Harness::start(mesh_v1()).await;
    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{}", h.addr))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(1);
    tx.send(DiscoveryRequest {
        node: Some(envoy_types::pb::envoy::config::core::v3::Node {
            id: "web-1".into(),
            ..Default::default()
        }),
        ..request(CLUSTER, &[], "", "")
    })
    .await
    .unwrap();
    let status = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("sidecar~"),
        "{}",
        status.message()
    );
    h.shutdown().await;
}

#[tokio::test]
async fn delta_subscribe_push_and_remove() {
    let h = Harness::start(mesh_v1()).await;
    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{}", h.addr))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(16);
    tx.send(DeltaDiscoveryRequest {
        node: Some(node()),
        type_url: CLUSTER.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut rx: Streaming<DeltaDiscoveryResponse> = client
        .delta_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mut recv = async || {
        tokio::time::timeout(WAIT, rx.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    let ack = |r: &DeltaDiscoveryResponse| DeltaDiscoveryRequest {
        type_url: r.type_url.clone(),
        response_nonce: r.nonce.clone(),
        ..Default::default()
    };

    let cds = recv().await;
    let names: Vec<&str> = cds.resources.iter().map(|r| r.name.as_str()).collect();
    assert!(names.contains(&outbound(RATINGS).as_str()), "{names:?}");
    tx.send(ack(&cds)).await.unwrap();

    // Subscribe one CLA by name.
    tx.send(DeltaDiscoveryRequest {
        type_url: ENDPOINT.into(),
        resource_names_subscribe: vec![outbound(RATINGS)],
        ..Default::default()
    })
    .await
    .unwrap();
    let eds = recv().await;
    assert_eq!(eds.resources.len(), 1);
    assert_eq!(eds.resources[0].name, outbound(RATINGS));
    tx.send(ack(&eds)).await.unwrap();

    // ratings goes away: CDS removes its cluster (nothing else is resent), then EDS
    // tells the proxy its subscribed assignment is gone.
    let v2 = h
        .latest()
        .with_changes(2, [namespace(vec![service("reviews", 9080)])], []);
    h.update(v2, true, &[service_key(RATINGS)]).await;
    let pushed = recv().await;
    assert_eq!(pushed.type_url, CLUSTER);
    assert!(pushed.resources.is_empty(), "{:?}", pushed.resources);
    assert_eq!(pushed.removed_resources, [outbound(RATINGS)]);
    tx.send(ack(&pushed)).await.unwrap();
    let pushed = recv().await;
    assert_eq!(pushed.type_url, ENDPOINT);
    assert!(pushed.resources.is_empty());
    assert_eq!(pushed.removed_resources, [outbound(RATINGS)]);
    tx.send(ack(&pushed)).await.unwrap();
    let syncz = h.server.syncz();
    assert_eq!(syncz[0]["protocol"], "delta");
    h.shutdown().await;
}

/// Drain: new streams are refused, and every stream held ends with a retryable
/// UNAVAILABLE, spread over the drain window rather than all at once.
#[tokio::test]
async fn drain_hands_every_proxy_off_at_a_pace() {
    let h = Harness::start(mesh_v1()).await;
    let mut ended = Vec::new();
    let started = tokio::time::Instant::now();
    for i in 0..10 {
        let id = format!("sidecar~10.0.1.{i}~w-{i}.{NS}~{NS}.svc.cluster.local");
        let mut s = Sotw::open_as(&h, &id, CLUSTER, &[]).await;
        let cds = s.recv().await;
        s.ack(&cds, &[]).await;
        ended.push(tokio::spawn(async move {
            let status = loop {
                match s.rx.message().await {
                    Ok(Some(_)) => continue,
                    Ok(None) => panic!("stream ended without a status"),
                    Err(status) => break status,
                }
            };
            drop(s.tx);
            (started.elapsed(), status)
        }));
    }
    let server = h.server.clone();
    let drain = tokio::spawn(async move {
        server.drain_streams(Duration::from_secs(2), 1.0).await;
    });
    tokio::time::sleep(Duration::from_millis(50)).await;

    // Refused while draining, with a status that says to go elsewhere.
    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{}", h.addr))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(1);
    tx.send(DiscoveryRequest {
        node: Some(node_as("sidecar~10.0.2.1~late.ns~ns.svc.cluster.local")),
        ..request(CLUSTER, &[], "", "")
    })
    .await
    .unwrap();
    let refused = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .expect_err("refused while draining");
    assert_eq!(refused.code(), tonic::Code::Unavailable);

    let mut times = Vec::new();
    for task in ended {
        let (at, status) = tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
        assert!(status.message().contains("handed off"), "{status:?}");
        times.push(at);
    }
    drain.await.unwrap();
    times.sort();
    let spread = times[9] - times[0];
    // 10 proxies over 2 s: one every 200 ms, so the last goes ~1.8 s after the first.
    assert!(
        spread >= Duration::from_secs(1),
        "all handed off within {spread:?}"
    );
    assert!(
        h.metrics().contains("shoal_xds_handoffs_total 10"),
        "{}",
        h.metrics()
    );
    h.shutdown().await;
}

/// A proxy that stops reading holds at most its stream buffer on the edge, however many
/// responses are due to it and however large a window it advertises: the chunks HTTP/2
/// has not written count against the buffer, so the next send waits, times out and closes
/// the stream (Istio's send timeout), instead of HTTP/2 taking every response in.
#[tokio::test]
async fn a_proxy_that_stops_reading_holds_only_its_buffer_and_times_out() {
    let mesh = |version: u64| {
        let services = (0..2000)
            .map(|i| service(&format!("svc-{i}"), 9080 + version as u32))
            .collect::<Vec<_>>();
        PushContext::from_chunks(version, [namespace(services)])
    };
    let config = XdsConfig {
        stream_buffer: 2,
        send_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let h = Harness::start_with(config, mesh(1), "127.0.0.1:0".parse().unwrap()).await;
    let stall = Arc::new(stalling::Stall::default());
    // Envoy's windows are 256 MiB: flow control never stops the edge, full buffers do.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", h.addr))
        .unwrap()
        .initial_stream_window_size(64 << 20)
        .initial_connection_window_size(64 << 20)
        .connect_with_connector(stalling::Connector(stall.clone()))
        .await
        .unwrap();
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let (tx, rx) = mpsc::channel(16);
    tx.send(DiscoveryRequest {
        node: Some(node()),
        ..request(CLUSTER, &[], "", "")
    })
    .await
    .unwrap();
    let mut responses = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    stall.set(true);
    for type_url in [LISTENER, ROUTE] {
        tx.send(request(type_url, &[], "", "")).await.unwrap();
    }
    // New versions until a send times out, the most bytes held for the stream meanwhile.
    let mut most_held = 0.0f64;
    for version in 2..40 {
        most_held = most_held.max(h.metric("shoal_xds_queued_bytes"));
        if h.metric("pilot_xds_write_timeout_total") >= 1.0 {
            break;
        }
        h.update(mesh(version), true, &[]).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        h.metric("pilot_xds_write_timeout_total"),
        1.0,
        "{}",
        h.metrics()
    );
    assert_eq!(h.server.connected(), 0);

    // Read again: what the edge held arrives whole, then the send timeout's status.
    stall.set(false);
    let mut largest = 0;
    let status = tokio::time::timeout(WAIT, async {
        loop {
            match responses.message().await {
                Ok(Some(r)) => largest = largest.max(r.encoded_len()),
                Ok(None) => panic!("the stream ended without a status"),
                Err(status) => break status,
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(
        status.message().contains("SHOAL_SEND_TIMEOUT"),
        "{status:?}"
    );
    // Two chunks: at most the shared resources of one response and a little framing.
    assert!(largest > 100_000, "a CDS response of {largest} bytes");
    assert!(
        most_held > 0.0 && most_held <= largest as f64 + 1024.0,
        "{most_held} bytes held for a stream of two chunks, responses up to {largest}"
    );
    tokio::time::timeout(WAIT, async {
        while h.metric("shoal_xds_queued_bytes") > 0.0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("nothing held once written");
    h.shutdown().await;
}

/// A TCP connection to the edge whose reads can be stopped, as a proxy that stops reading:
/// the kernel's buffers fill, then the edge holds what is left.
mod stalling {
    use hyper_util::rt::TokioIo;
    use std::future::Future;
    use std::io;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll, Waker};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::TcpStream;

    #[derive(Default)]
    pub struct Stall {
        stalled: AtomicBool,
        reader: Mutex<Option<Waker>>,
    }

    impl Stall {
        pub fn set(&self, stalled: bool) {
            self.stalled.store(stalled, Ordering::SeqCst);
            if let Some(w) = self.reader.lock().unwrap().take() {
                w.wake();
            }
        }
    }

    pub struct Stream {
        tcp: TcpStream,
        stall: Arc<Stall>,
    }

    impl AsyncRead for Stream {
        fn poll_read(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if self.stall.stalled.load(Ordering::SeqCst) {
                *self.stall.reader.lock().unwrap() = Some(cx.waker().clone());
                if self.stall.stalled.load(Ordering::SeqCst) {
                    return Poll::Pending;
                }
            }
            Pin::new(&mut self.tcp).poll_read(cx, buf)
        }
    }

    impl AsyncWrite for Stream {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            Pin::new(&mut self.tcp).poll_write(cx, buf)
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.tcp).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.tcp).poll_shutdown(cx)
        }
    }

    #[derive(Clone)]
    pub struct Connector(pub Arc<Stall>);

    impl tower_service::Service<http::Uri> for Connector {
        type Response = TokioIo<Stream>;
        type Error = io::Error;
        type Future = Pin<Box<dyn Future<Output = io::Result<TokioIo<Stream>>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, uri: http::Uri) -> Self::Future {
            let stall = self.0.clone();
            Box::pin(async move {
                let authority = uri.authority().expect("host:port").to_string();
                let tcp = TcpStream::connect(authority).await?;
                Ok(TokioIo::new(Stream { tcp, stall }))
            })
        }
    }
}

/// A proxy that moved here from an edge further ahead reports that edge's snapshot in its
/// first request: it is answered once this edge holds that snapshot, never with an older
/// one.
#[tokio::test]
async fn a_proxy_from_an_edge_further_ahead_waits_for_its_snapshot() {
    let h = Harness::start(mesh_v1()).await;
    let first = DiscoveryRequest {
        node: Some(node()),
        ..request(CLUSTER, &[], "", "2")
    };
    let mut s = Sotw::open_with(&h, first).await;
    s.quiet().await;
    let reviews = service("reviews", 9080);
    let v2 = h
        .latest()
        .with_changes(2, [endpoints(&reviews, &["10.2.0.7"])], []);
    h.update(v2, false, &[service_key(REVIEWS)]).await;
    let cds = s.recv().await;
    assert_eq!(cds.type_url, CLUSTER);
    assert_eq!(cds.version_info, "2");
    h.shutdown().await;
}

/// Delta's twin: a reconnecting proxy's `initial_resource_versions` name the snapshot they
/// came from (`<hash>@<snapshot>`); an edge behind it waits to catch up before answering.
#[tokio::test]
async fn a_delta_proxy_from_an_edge_further_ahead_waits_for_its_snapshot() {
    let h = Harness::start(mesh_v1()).await;
    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{}", h.addr))
        .await
        .unwrap();
    let (tx, rx) = mpsc::channel(16);
    tx.send(DeltaDiscoveryRequest {
        node: Some(node()),
        type_url: CLUSTER.into(),
        resource_names_subscribe: vec!["*".into()],
        initial_resource_versions: [(outbound(RATINGS), "0123456789abcdef@2".to_string())].into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut rx: Streaming<DeltaDiscoveryResponse> = client
        .delta_aggregated_resources(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    if let Ok(m) = tokio::time::timeout(QUIET, rx.message()).await {
        panic!("expected no response from snapshot 1, got {m:?}");
    }
    let reviews = service("reviews", 9080);
    let v2 = h
        .latest()
        .with_changes(2, [endpoints(&reviews, &["10.2.0.7"])], []);
    h.update(v2, false, &[service_key(REVIEWS)]).await;
    let cds = tokio::time::timeout(WAIT, rx.message())
        .await
        .expect("a response")
        .unwrap()
        .expect("stream open");
    assert_eq!(cds.type_url, CLUSTER);
    assert_eq!(cds.system_version_info, "2");
    drop(tx);
    h.shutdown().await;
}
