//! CSDS on the secure port: answered for an identity of the control plane's namespace,
//! refused with the reason for any other (PERMISSION_DENIED) and for none
//! (UNAUTHENTICATED), as the `/debug/*` pages are.

use crate::client::channel;
use crate::k8s::namespace;
use crate::mesh::Mesh;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::status::v3::ClientStatusRequest;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_client::ClientStatusDiscoveryServiceClient;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use std::time::{Duration, Instant};
use tonic::Code;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const PROBE: &str = "sidecar~127.0.0.1~probe.alpha~alpha.svc.cluster.local";

fn with_token<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(t) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csds_on_the_secure_port_answers_only_the_control_planes_namespace() {
    let _serial = crate::SERIAL.lock().await;
    let config = vec![("ns.yaml", namespace("alpha"))];
    let mesh = Mesh::start(&config, &[]).await;
    let alpha = mesh.issuer.istio_token("alpha", "probe");

    // A proxy of alpha, its stream held open while CSDS is asked.
    let node = Node {
        id: PROBE.into(),
        metadata: Some(Struct {
            fields: [(
                "NAMESPACE".to_string(),
                Value {
                    kind: Some(Kind::StringValue("alpha".into())),
                },
            )]
            .into(),
        }),
        ..Default::default()
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(DiscoveryRequest {
        node: Some(node),
        type_url: CDS.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut ads = AggregatedDiscoveryServiceClient::new(channel(&mesh));
    let requests = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut responses = ads
        .stream_aggregated_resources(with_token(requests, Some(&alpha)))
        .await
        .unwrap_or_else(|s| panic!("alpha's stream refused: {s:?}\n{}", mesh.shoal.tail(30)))
        .into_inner();
    let first = tokio::time::timeout(Duration::from_secs(10), responses.message()).await;
    assert!(matches!(first, Ok(Ok(Some(_)))), "no CDS: {first:?}");

    let mut csds = ClientStatusDiscoveryServiceClient::new(channel(&mesh));
    let control_plane = mesh.issuer.istio_token("istio-system", "istioctl");
    let deadline = Instant::now() + Duration::from_secs(10);
    let answered = loop {
        let answer = csds
            .fetch_client_status(with_token(
                ClientStatusRequest::default(),
                Some(&control_plane),
            ))
            .await
            .unwrap_or_else(|s| panic!("the control plane refused: {s:?}"))
            .into_inner();
        // The stream publishes its state once its first response is sent.
        if !answer.config.is_empty() || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(answered.config.len(), 1, "{answered:?}");
    assert_eq!(answered.config[0].node.as_ref().unwrap().id, PROBE);

    // A workload's own identity: PERMISSION_DENIED, naming it and the namespace.
    let denied = csds
        .fetch_client_status(with_token(ClientStatusRequest::default(), Some(&alpha)))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(
        denied.message().contains("ns/alpha/sa/probe") && denied.message().contains("istio-system"),
        "{denied:?}"
    );
    let streamed = csds
        .stream_client_status(with_token(
            futures::stream::iter([ClientStatusRequest::default()]),
            Some(&alpha),
        ))
        .await
        .unwrap_err();
    assert_eq!(streamed.code(), Code::PermissionDenied, "{streamed:?}");
    // No credentials: UNAUTHENTICATED.
    let anonymous = csds
        .fetch_client_status(ClientStatusRequest::default())
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), Code::Unauthenticated, "{anonymous:?}");
    drop(tx);
}
