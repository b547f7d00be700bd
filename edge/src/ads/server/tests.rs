use super::*;
use crate::ads::SotwStream;
use crate::ads::dispatch::{inbound_changed, needs_push};
use crate::ads::outbound::Outbound;
use crate::ads::testing::node;
use crate::ads::transport::SotwRequest;
use crate::push_queue::PushEvent;
use crate::xds::types::{CLUSTER, LISTENER};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason};
use shoal_proto::config::{ConfigKey, Kind, istio};
use shoal_proto::model::{ExportTo, NamedConfig, NamespaceConfig, Resolution, Service};
use shoal_proto::snapshot::Chunk;
use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};
use tokio::sync::oneshot;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::Status;

const NODE: &str = "sidecar~10.0.0.1~web-1.a~a.svc.cluster.local";

pub(super) fn server(
    config: XdsConfig,
    push: PushContext,
) -> (XdsServer, watch::Sender<Arc<PushContext>>) {
    let (tx, rx) = watch::channel(Arc::new(push));
    let mut registry = prometheus_client::registry::Registry::default();
    let s = XdsServer::new(config, Arc::new(Generator::new()), rx, &mut registry);
    (s, tx)
}

pub(super) type Inbound = mpsc::Sender<Result<SotwRequest, Status>>;

pub(super) async fn open(
    s: &XdsServer,
    node_id: &str,
    type_url: &str,
) -> (Inbound, Result<Outbound, Status>) {
    open_reporting(s, node_id, type_url, "").await
}

/// Opens `node_id`'s stream of `type_url`, its first request reporting `version_info`.
async fn open_reporting(
    s: &XdsServer,
    node_id: &str,
    type_url: &str,
    version_info: &str,
) -> (Inbound, Result<Outbound, Status>) {
    let (tx, rx) = mpsc::channel(8);
    tx.send(Ok(DiscoveryRequest {
        node: Some(node(node_id)),
        type_url: type_url.into(),
        version_info: version_info.into(),
        ..Default::default()
    }
    .into()))
        .await
        .unwrap();
    let out = crate::ads::connection::accept::<SotwStream, _>(
        &s.shared,
        ReceiverStream::new(rx),
        crate::ads::connection::Who::anonymous(),
    )
    .await
    .map(crate::ads::AdsBody::served);
    (tx, out)
}

/// Opens `NODE`'s CDS stream and expects its first response.
async fn open_answered(s: &XdsServer) -> (Inbound, Outbound) {
    let (inbound, out) = open(s, NODE, CLUSTER).await;
    let mut out = out.unwrap();
    assert!(
        out.next_message::<DiscoveryResponse>()
            .await
            .unwrap()
            .is_ok()
    );
    (inbound, out)
}

pub(super) fn svc(ns: &str, name: &str) -> Service {
    Service {
        hostname: format!("{name}.{ns}.svc.cluster.local"),
        namespace: ns.into(),
        name: name.into(),
        ports: vec![],
        addresses: vec![],
        resolution: Resolution::ClientSideLb,
        mesh_external: false,
        export_to: ExportTo::default(),
        labels: Default::default(),
        clusters: vec![],
        external_name: String::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn bad_node_is_refused_with_the_expected_format() {
    let (s, _tx) = server(XdsConfig::default(), PushContext::empty());
    let (_in, out) = open(&s, "not-a-node", CLUSTER).await;
    let status = out.err().unwrap();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("sidecar~10.0.0.1~"), "{status}");
    assert_eq!(s.connected(), 0);
}

#[tokio::test(start_paused = true)]
async fn streams_beyond_the_limit_are_refused() {
    let config = XdsConfig {
        max_streams: 1,
        ..Default::default()
    };
    let (s, _tx) = server(config, PushContext::empty());
    let (_in1, _out1) = open_answered(&s).await;
    let (_in2, out2) = open(&s, NODE, CLUSTER).await;
    assert_eq!(out2.err().unwrap().code(), Code::ResourceExhausted);
    assert_eq!(s.connected(), 1);
}

/// One session per proxy ID: a new stream of a proxy replaces the older one, which ends
/// at once with a retryable status (not left for a drain to wait on).
#[tokio::test(start_paused = true)]
async fn a_second_stream_of_a_proxy_replaces_the_first() {
    let (s, _tx) = server(XdsConfig::default(), PushContext::empty());
    let (_in1, mut out1) = open_answered(&s).await;
    let (_in2, _out2) = open_answered(&s).await;
    let status = out1
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status}");
    assert!(status.message().contains("replaced"), "{status}");
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(s.connected(), 1, "the registry holds the newer stream only");
    assert_eq!(s.proxy_ids(), [NODE]);
    // The newer stream is served on.
    let conn = s.shared.registry.proxy(NODE).unwrap();
    assert_eq!(s.shared.registry.all().len(), 1);
    assert!(s.shared.registry.get(conn.id).is_some());
}

/// A storm of new streams above `max_requests_per_second`: a second's worth is admitted
/// at once, the next second's worth waits its turn, the rest are refused with a status
/// that says to retry.
#[tokio::test]
async fn new_streams_beyond_the_admission_rate_wait_then_are_refused() {
    let config = XdsConfig {
        max_requests_per_second: 20.0,
        ..Default::default()
    };
    let (s, _tx) = server(config, PushContext::empty());
    let opens = (0..60).map(|i| {
        let s = s.clone();
        tokio::spawn(async move {
            let id = format!("sidecar~10.0.3.{i}~w-{i}.shop~shop.svc.cluster.local");
            let (tx, out) = open(&s, &id, CLUSTER).await;
            (tx, out.map(|_| ()))
        })
    });
    let mut admitted = 0;
    let mut refused = 0;
    let mut held = Vec::new();
    for open in opens.collect::<Vec<_>>() {
        let (tx, out) = open.await.unwrap();
        held.push(tx);
        match out {
            Ok(()) => admitted += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(status.message().contains("SHOAL_MAX_REQUESTS_PER_SECOND"));
                refused += 1;
            }
        }
    }
    assert!(
        admitted >= 20,
        "a second's worth at once, then more: {admitted}"
    );
    assert!(
        refused >= 10,
        "beyond what a second of waiting admits: {refused}"
    );
    assert_eq!(admitted + refused, 60);
}

#[tokio::test(start_paused = true)]
async fn a_send_that_times_out_closes_the_stream() {
    let config = XdsConfig {
        stream_buffer: 1,
        send_timeout: Duration::from_secs(5),
        ..Default::default()
    };
    let (s, _tx) = server(config, PushContext::empty());
    let (inbound, out) = open(&s, NODE, CLUSTER).await;
    let mut out = out.unwrap();
    // The CDS response fills the buffer; the LDS response waits, and times out.
    inbound
        .send(Ok(DiscoveryRequest {
            type_url: LISTENER.into(),
            ..Default::default()
        }
        .into()))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let status = out
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .err()
        .unwrap();
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(status.message().contains("SHOAL_SEND_TIMEOUT"));
    tokio::task::yield_now().await;
    assert_eq!(s.connected(), 0);
}

#[tokio::test(start_paused = true)]
async fn shutdown_closes_streams_as_unavailable() {
    let (s, _tx) = server(XdsConfig::default(), PushContext::empty());
    let (_inbound, out) = open(&s, NODE, CLUSTER).await;
    let mut out = out.unwrap();
    let (_updates_tx, updates) = mpsc::channel(1);
    s.run_dispatcher(updates, async {}).await;
    let mut last = None;
    while let Some(item) = out.next_message::<DiscoveryResponse>().await {
        last = Some(item);
    }
    assert_eq!(last.unwrap().err().unwrap().code(), Code::Unavailable);
    let (_in2, refused) = open(&s, NODE, CLUSTER).await;
    assert_eq!(refused.err().unwrap().code(), Code::Unavailable);
}

#[tokio::test(start_paused = true)]
async fn updates_reach_only_the_proxies_whose_scope_depends_on_them() {
    // Namespace a narrows egress to its own namespace; b sees everything.
    let mut a = NamespaceConfig {
        namespace: "a".into(),
        services: vec![svc("a", "x")],
        ..Default::default()
    };
    a.sidecars.push(NamedConfig {
        name: "default".into(),
        namespace: "a".into(),
        created: 0,
        spec: istio::Sidecar {
            egress: vec![istio::EgressListener {
                hosts: vec!["./*".into()],
                ..Default::default()
            }],
            ..Default::default()
        },
    });
    let b = NamespaceConfig {
        namespace: "b".into(),
        services: vec![svc("b", "y")],
        ..Default::default()
    };
    let push = Arc::new(PushContext::from_chunks(
        1,
        [Chunk::Namespace(a), Chunk::Namespace(b)],
    ));
    let (s, _tx) = server(XdsConfig::default(), (*push).clone());
    let (_ia, oa) = open(&s, NODE, CLUSTER).await;
    let (_ib, ob) = open(&s, "sidecar~10.0.0.2~w-1.b~b.svc.cluster.local", CLUSTER).await;
    let (_oa, _ob) = (oa.unwrap(), ob.unwrap());
    tokio::task::yield_now().await;
    let mut conns = s.shared.registry.all();
    conns.sort_by_key(|c| c.id);
    let (ca, cb) = (&conns[0], &conns[1]);

    let event = |full: bool, keys: &[ChangeKey]| {
        PushEvent::new(
            push.clone(),
            Arc::new(ChangeSet::of(
                full,
                keys.iter().cloned().collect::<BTreeSet<_>>(),
                TriggerReason::Unknown,
                SystemTime::now(),
            )),
        )
    };
    let y = ChangeKey::service("b", "y.b.svc.cluster.local");
    let x = ChangeKey::service("a", "x.a.svc.cluster.local");
    for full in [true, false] {
        assert!(!needs_push(ca, &event(full, std::slice::from_ref(&y))));
        assert!(needs_push(cb, &event(full, std::slice::from_ref(&y))));
        assert!(needs_push(ca, &event(full, std::slice::from_ref(&x))));
        assert!(needs_push(ca, &event(full, &[])));
    }
    let vs = ConfigKey::new(Kind::VirtualService, "b", "anything");
    assert!(needs_push(ca, &event(true, &[vs.into()])));
}

#[tokio::test(start_paused = true)]
async fn a_workloads_own_endpoints_change_its_inbound_side() {
    // A pod turns ready after its sidecar connected: only endpoints change, but they
    // name the proxy's IP, so its listeners and clusters must be pushed again.
    let mut web = svc("a", "web");
    web.ports = vec![shoal_proto::model::ServicePort {
        name: "http".into(),
        port: 80,
        protocol: shoal_proto::model::Protocol::Http,
    }];
    let ns = NamespaceConfig {
        namespace: "a".into(),
        services: vec![web.clone()],
        ..Default::default()
    };
    let before = PushContext::from_chunks(1, [Chunk::Namespace(ns)]);
    let (s, _tx) = server(XdsConfig::default(), before.clone());
    let (_in, out) = open(&s, NODE, CLUSTER).await;
    let _out = out.unwrap();
    tokio::task::yield_now().await;
    let conn = s.shared.registry.all().pop().unwrap();
    assert!(!inbound_changed(&conn, &before), "no targets yet");

    let ready = shoal_proto::model::ServiceEndpoints {
        service: web.key(),
        endpoints: vec![shoal_proto::model::Endpoint::at("10.0.0.1", 8080, 80)],
    };
    let after = before.with_changes(2, [Chunk::Endpoints(ready.clone())], []);
    assert!(
        inbound_changed(&conn, &after),
        "the pod now serves web:80 on 8080"
    );
    assert!(!inbound_changed(&conn, &after), "judged once");

    // Endpoints of another workload move: not this one's ports (and not looked up).
    let mut elsewhere = ready.clone();
    elsewhere.service = svc("a", "api").key();
    elsewhere.endpoints[0].address = "10.0.0.2".into();
    let later = after.with_changes(3, [Chunk::Endpoints(elsewhere)], []);
    assert!(!later.targets_may_have_moved("10.0.0.1"));
    assert!(!inbound_changed(&conn, &later));
    // Its own target port moves.
    let mut moved = ready;
    moved.endpoints[0].port = 9090;
    let last = later.with_changes(4, [Chunk::Endpoints(moved)], []);
    assert!(inbound_changed(&conn, &last), "web:80 now on 9090");
}

/// A stream's task lives as long as the stream: its future must not hold a request or the
/// state of handling one (those are boxed while they run), nor its arguments twice.
#[tokio::test]
async fn the_resident_stream_task_stays_small() {
    let (s, _tx) = server(XdsConfig::default(), PushContext::empty());
    let (_in_tx, rx) = mpsc::channel::<Result<SotwRequest, Status>>(1);
    let (out_tx, _out_rx) = crate::ads::outbound::channel(1);
    let (close_tx, _close_rx) = oneshot::channel();
    let permit = s.shared.streams.clone().try_acquire_owned().unwrap();
    let proxy = crate::proxy::from_node(Some(&node(NODE)), Default::default()).unwrap();
    let opened = crate::ads::connection::Opened::<SotwStream, _> {
        proxy,
        first: Box::default(),
        inbound: ReceiverStream::new(rx),
        out: out_tx,
        close: close_tx,
        admitted: crate::ads::connection::Admitted {
            _permit: permit,
            relayed_in: false,
        },
    };
    let task = crate::ads::connection::serve(s.shared.clone(), Box::new(opened));
    // 704 bytes in a debug build (1,072 while its arguments were kept besides their locals).
    let size = std::mem::size_of_val(&task);
    assert!(size < 800, "the stream task's future is {size} bytes");
}

/// Opens `NODE`'s CDS stream reporting it holds snapshot `reported`.
async fn open_holding(s: &XdsServer, reported: u64) -> (Inbound, Result<Outbound, Status>) {
    open_reporting(s, NODE, CLUSTER, &reported.to_string()).await
}

#[tokio::test(start_paused = true)]
async fn a_proxy_ahead_of_a_snapshot_this_edge_has_not_pulled_yet_is_sent_back_not_given_an_older_one()
 {
    let (s, _tx) = server(XdsConfig::default(), PushContext::from_chunks(3, []));
    // The puller has heard of snapshot 5 but not pulled it.
    s.follow_announced(Arc::new(std::sync::atomic::AtomicU64::new(5)));
    let (_inbound, out) = open_holding(&s, 5).await;
    let mut out = out.unwrap();
    let first = out.next_message::<DiscoveryResponse>().await.unwrap();
    let status = first.expect_err("no response of snapshot 3");
    assert_eq!(status.code(), Code::Unavailable, "{status}");
    assert!(
        status.message().contains("never sends an older one"),
        "{status}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_proxy_served_once_this_edge_catches_up_within_the_resume_wait() {
    let (s, tx) = server(XdsConfig::default(), PushContext::from_chunks(3, []));
    s.follow_announced(Arc::new(std::sync::atomic::AtomicU64::new(5)));
    let (_inbound, out) = open_holding(&s, 5).await;
    let mut out = out.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    tx.send_replace(Arc::new(PushContext::from_chunks(5, [])));
    let first = out
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.version_info, "5");
}

#[tokio::test(start_paused = true)]
async fn a_proxy_ahead_of_any_snapshot_this_edge_knows_of_is_served_what_it_holds() {
    // The store was reset, say: nothing announced reaches the version the proxy reports.
    let (s, _tx) = server(XdsConfig::default(), PushContext::from_chunks(3, []));
    s.follow_announced(Arc::new(std::sync::atomic::AtomicU64::new(3)));
    let (_inbound, out) = open_holding(&s, 9).await;
    let first = out
        .unwrap()
        .next_message::<DiscoveryResponse>()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.version_info, "3");
}
