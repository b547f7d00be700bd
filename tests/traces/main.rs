//! One trace per config change: the all-in-one `shoal`, exporting to an OTLP receiver
//! ([`receiver`], a stand-in for an OpenTelemetry Collector), serves one proxy (a plain
//! ADS client that ACKs what it is sent); a VirtualService edited in the config directory
//! makes one trace holding the ingest spans (the change, its KV write, the debounced
//! push), the builder's (build, wait for the revision, snapshot build and write) and the
//! edge's (snapshot pull, dispatch, and `converge`, ended by the proxy's ACK), the
//! revision on each. [`kubernetes`]: the same through the Kubernetes API, the tiers
//! split over NATS and Redis, each with its own `service.name`.

#[path = "../support/mod.rs"]
mod support;

mod kubernetes;
mod receiver;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use receiver::{Receiver, Span};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};
use support::process::{Proc, wait_http_ok};
use support::{free_port, mesh, tiers};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
pub(crate) const SERVICE_PORT: u16 = 9080;

/// The spans each stage must contribute to a change's trace.
pub(crate) const INGEST: &[&str] = &["config change", "kv write", "push publish"];
pub(crate) const BUILDER: &[&str] = &[
    "build",
    "wait for revision",
    "snapshot build",
    "snapshot write",
];
pub(crate) const EDGE: &[&str] = &["snapshot pull", "dispatch", "converge"];

fn start_shoal(config_dir: &Path, otlp: &str, http: u16, xds: u16, dir: &Path) -> Proc {
    tiers::shoal(
        config_dir,
        xds,
        http,
        &["--otlp-endpoint".into(), otlp.into()],
        // The batch exporter's interval: spans arrive within a fraction of a second.
        &[("OTEL_BSP_SCHEDULE_DELAY", "200".to_string())],
        dir,
    )
}

/// A sidecar of `reviews` in the test mesh over SotW ADS, subscribed to clusters,
/// listeners and the port's routes, ACKing every response; counts the responses.
pub(crate) fn connect_proxy(xds: u16) -> tokio::sync::watch::Receiver<usize> {
    let (seen_tx, seen) = tokio::sync::watch::channel(0usize);
    tokio::spawn(async move {
        let channel = tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{xds}"))
            .unwrap()
            .connect()
            .await
            .expect("connect to the xDS port");
        let mut client = AggregatedDiscoveryServiceClient::new(channel);
        let node = Node {
            id: format!(
                "sidecar~10.1.0.1~reviews-v1-0.{0}~{0}.svc.cluster.local",
                mesh::NAMESPACE
            ),
            cluster: "reviews.bookinfo".into(),
            metadata: Some(Struct {
                fields: [(
                    "NAMESPACE".to_string(),
                    Value {
                        kind: Some(Kind::StringValue(mesh::NAMESPACE.into())),
                    },
                )]
                .into(),
            }),
            ..Default::default()
        };
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let subscribe = |type_url: &str, names: Vec<String>| DiscoveryRequest {
            node: Some(node.clone()),
            type_url: type_url.into(),
            resource_names: names,
            ..Default::default()
        };
        tx.send(subscribe(CDS, vec![])).await.unwrap();
        tx.send(subscribe(LDS, vec![])).await.unwrap();
        tx.send(subscribe(RDS, vec![SERVICE_PORT.to_string()]))
            .await
            .unwrap();
        let mut inbound = client
            .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .expect("ADS stream")
            .into_inner();
        let mut names: BTreeMap<String, Vec<String>> = BTreeMap::from([
            (CDS.into(), vec![]),
            (LDS.into(), vec![]),
            (RDS.into(), vec![SERVICE_PORT.to_string()]),
        ]);
        while let Ok(Some(response)) = inbound.message().await {
            let ack = DiscoveryRequest {
                node: Some(node.clone()),
                type_url: response.type_url.clone(),
                version_info: response.version_info.clone(),
                response_nonce: response.nonce.clone(),
                resource_names: names.entry(response.type_url.clone()).or_default().clone(),
                ..Default::default()
            };
            if tx.send(ack).await.is_err() {
                break;
            }
            seen_tx.send_modify(|n| *n += 1);
        }
    });
    seen
}

/// The trace holding a `config change` span of `kind` (e.g. `VirtualService`), once every
/// stage's spans arrived; panics after `timeout`.
pub(crate) async fn trace_of(receiver: &Receiver, kind: &str, timeout: Duration) -> Vec<Span> {
    let deadline = Instant::now() + timeout;
    loop {
        let spans = receiver.spans();
        let roots: BTreeSet<String> = spans
            .iter()
            .filter(|s| s.name == "config change" && s.attributes["key"].contains(kind))
            .map(|s| s.trace_id.clone())
            .collect();
        for trace_id in &roots {
            let trace: Vec<Span> = spans
                .iter()
                .filter(|s| &s.trace_id == trace_id)
                .cloned()
                .collect();
            let names: BTreeSet<&str> = trace.iter().map(|s| s.name.as_str()).collect();
            if INGEST
                .iter()
                .chain(BUILDER)
                .chain(EDGE)
                .all(|n| names.contains(n))
            {
                return trace;
            }
        }
        if Instant::now() > deadline {
            let names: Vec<(&str, &str)> = spans
                .iter()
                .map(|s| (s.trace_id.as_str(), s.name.as_str()))
                .collect();
            panic!("no complete trace of the {kind} change within {timeout:?}: {names:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) fn one<'a>(trace: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = trace.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name} span in {trace:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_the_directory_is_one_trace_from_ingest_through_builder_to_the_edge() {
    let started = Instant::now();
    let receiver = Receiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config_dir = dir.path().join("config");
    mesh::write(&config_dir, SERVICE_PORT, free_port(), free_port());
    let (http, xds) = (free_port(), free_port());
    let mut shoal = start_shoal(&config_dir, &receiver.endpoint(), http, xds, dir.path());
    let ready = format!("http://127.0.0.1:{http}/healthz/ready");
    if !wait_http_ok(&ready, Duration::from_secs(30)).await {
        panic!("shoal not ready:\n{}", shoal.tail(40));
    }
    let mut seen = connect_proxy(xds);
    tokio::time::timeout(Duration::from_secs(10), seen.wait_for(|n| *n >= 3))
        .await
        .expect("the proxy's first responses")
        .unwrap();

    std::fs::write(
        config_dir.join("routing/virtual-service.yaml"),
        mesh::virtual_service(50),
    )
    .unwrap();
    let trace = trace_of(&receiver, "VirtualService", Duration::from_secs(30)).await;
    for span in &trace {
        eprintln!("{} {:?}", span.name, span.attributes);
    }

    // Every span of the trace is the all-in-one's, and they form one tree.
    assert!(trace.iter().all(|s| s.service == "shoal"), "{trace:#?}");
    let ids: BTreeSet<&str> = trace.iter().map(|s| s.span_id.as_str()).collect();
    let roots: Vec<&Span> = trace.iter().filter(|s| s.parent_id.is_empty()).collect();
    assert_eq!(roots.len(), 1, "one root: {trace:#?}");
    assert_eq!(roots[0].name, "config change");
    for span in &trace {
        assert!(
            span.parent_id.is_empty() || ids.contains(span.parent_id.as_str()),
            "{} has its parent in the trace",
            span.name
        );
    }
    // The revision the KV gave the change, carried to the build and the dispatch.
    let revision = &one(&trace, "config change").attributes["revision"];
    assert_eq!(
        &one(&trace, "push publish").attributes["revision"],
        revision
    );
    let build = one(&trace, "build");
    assert_eq!(&build.attributes["revision"], revision);
    let version = &build.attributes["version"];
    assert_eq!(&one(&trace, "snapshot pull").attributes["version"], version);
    let dispatch = one(&trace, "dispatch");
    assert_eq!(&dispatch.attributes["revision"], version);
    assert_eq!(dispatch.attributes["connections"], "1");
    assert_eq!(dispatch.attributes["queued"], "1", "{dispatch:?}");
    // Ended by the proxy's ACK: one concerned, one ACKed, none pending.
    let converge = one(&trace, "converge");
    assert_eq!(converge.attributes["concerned"], "1", "{converge:?}");
    assert_eq!(converge.attributes["acked"], "1", "{converge:?}");
    assert_eq!(converge.attributes["pending"], "0", "{converge:?}");
    // Ended by this proxy's answer: the slowest (here the only) one.
    assert!(
        converge.attributes["slowest_proxy"].starts_with("sidecar~"),
        "{converge:?}"
    );

    // Two changes within one debounce: one push, in the earlier change's trace, linked
    // to the later change's.
    let before = receiver.spans().len();
    std::fs::write(
        config_dir.join("routing/virtual-service.yaml"),
        mesh::virtual_service(60),
    )
    .unwrap();
    let other = mesh::virtual_service(70).replace(
        "name: reviews\n  namespace",
        "name: reviews-canary\n  namespace",
    );
    std::fs::write(config_dir.join("routing/canary.yaml"), other).unwrap();
    let (publish, changes) = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let spans = receiver.spans().split_off(before);
            let changes: Vec<Span> = spans
                .iter()
                .filter(|s| s.name == "config change")
                .cloned()
                .collect();
            let merged = spans
                .iter()
                .find(|s| s.name == "push publish" && s.attributes["events"] == "2");
            if let Some(publish) = merged
                && changes.len() == 2
            {
                return (publish.clone(), changes);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("one push for both changes");
    let (kept, linked): (Vec<&Span>, Vec<&Span>) =
        changes.iter().partition(|c| c.trace_id == publish.trace_id);
    assert_eq!((kept.len(), linked.len()), (1, 1), "{changes:#?}");
    assert_eq!(publish.attributes["linked"], "1", "{publish:?}");
    assert_eq!(
        publish.links,
        [(linked[0].trace_id.clone(), linked[0].span_id.clone())],
        "{publish:?}"
    );
    shoal.stop(Duration::from_secs(5));
    eprintln!("trace test took {:?}", started.elapsed());
}
