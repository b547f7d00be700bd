//! Issue 17's attack, tried as a new user would: an ADS client that proves nothing claims
//! to be a router in a gateway's namespace and asks SDS for the gateway's
//! `kubernetes://<credentialName>`. It must never get the Secret.

use super::SERIAL;
use super::support::free_port;
use super::support::process::{Proc, wait_http_ok};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use prost::Message;
use std::time::Duration;

const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
const GATEWAY_NS: &str = "istio-system";

/// A Gateway naming `ingress-cert`, and that Secret (a real key, made here).
fn gateway_and_secret() -> String {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["secure.example.com".into()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let b64 = |s: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, s);
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata:\n  name: public\n  \
         namespace: {GATEWAY_NS}\nspec:\n  selector:\n    istio: ingressgateway\n  servers:\n  \
         - port: {{number: 443, name: https, protocol: HTTPS}}\n    hosts: [\"*\"]\n    \
         tls: {{mode: SIMPLE, credentialName: ingress-cert}}\n---\n\
         apiVersion: v1\nkind: Secret\nmetadata:\n  name: ingress-cert\n  namespace: {GATEWAY_NS}\n\
         type: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(&cert.pem()),
        b64(&key.serialize_pem())
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_router_never_gets_a_gateway_key() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let config_dir = dir.path().join("config");
    std::fs::create_dir_all(&config_dir).expect("mkdir");
    let mesh = gateway_and_secret();
    std::fs::write(config_dir.join("gateway.yaml"), &mesh).expect("write");
    let (http, xds_port) = (free_port(), free_port());
    let mut shoal = Proc::spawn(
        "shoal",
        std::path::Path::new(env!("CARGO_BIN_EXE_shoal")),
        &[
            "--config-dir".into(),
            config_dir.display().to_string(),
            "--plaintext-xds-addr".into(),
            format!("127.0.0.1:{xds_port}"),
            // The secure listener is always on: a free port, not 15012.
            "--secure-xds-addr".into(),
            "127.0.0.1:0".into(),
            "--http-addr".into(),
            format!("127.0.0.1:{http}"),
        ],
        &[("RUST_LOG", "info".to_string())],
        dir.path(),
    );
    let ready = format!("http://127.0.0.1:{http}/healthz/ready");
    assert!(
        wait_http_ok(&ready, Duration::from_secs(30)).await,
        "shoal not ready"
    );

    // A router in the gateway's namespace, as its node ID claims; nothing proven.
    let mut client =
        AggregatedDiscoveryServiceClient::connect(format!("http://127.0.0.1:{xds_port}"))
            .await
            .expect("connect");
    let wanted = [
        "kubernetes://ingress-cert",
        "kubernetes://ingress-cert-cacert",
    ];
    let request = DiscoveryRequest {
        node: Some(Node {
            id: format!("router~10.9.9.9~attacker.{GATEWAY_NS}~{GATEWAY_NS}.svc.cluster.local"),
            ..Default::default()
        }),
        type_url: SECRET.into(),
        resource_names: wanted.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    // The request side stays open, as a proxy's does.
    let (requests, rx) = tokio::sync::mpsc::channel(1);
    requests.send(request).await.expect("queued");
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("the stream opens")
        .into_inner();
    let response = tokio::time::timeout(Duration::from_secs(10), responses.message())
        .await
        .expect("an answer within 10 s")
        .expect("no stream error")
        .expect("a response");
    let secrets: Vec<Secret> = response
        .resources
        .iter()
        .map(|any| Secret::decode(any.value.as_slice()).expect("a Secret"))
        .collect();
    assert!(
        secrets.is_empty(),
        "an anonymous router was sent {:?}",
        secrets.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    // Nothing of the key in what was sent, whatever its framing.
    let key_line = mesh.lines().find(|l| l.contains("tls.key")).expect("key");
    let key_b64 = key_line.split_whitespace().last().expect("value");
    let sent = format!("{response:?}");
    assert!(
        !sent.contains(&key_b64[..40]),
        "key material in the response"
    );
    // The refusal is logged with its reason, naming the secret and the proxy.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = shoal.tail(200);
    assert!(
        log.contains("secret kubernetes://ingress-cert not sent")
            && log.contains("unauthenticated"),
        "{log}"
    );
    shoal.assert_running();
    shoal.stop(Duration::from_secs(5));
}
