//! The ingest against a real `nats-server -js`: a YAML edit becomes a config KV update and
//! a debounced push on `shoal.push`; the `ingest` binary serves its admin endpoints and
//! drains on SIGTERM.

use futures::StreamExt;
use prometheus_client::registry::Registry;
use shoal_infra::nats::{NatsBus, NatsConfigKv, connect};
use shoal_infra::runtime::Drain;
use shoal_infra::testing::{NatsServer, free_port};
use shoal_ingest::{Ingest, IngestConfig};
use shoal_proto::config::{ConfigKey, Kind, Origin, Spec};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{Bus, ConfigKv, Delivery, config_kv_key, decode_config};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, timeout};

const WAIT: Duration = Duration::from_secs(15);

fn vs(name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  hosts: [{host}]\n  http:\n  - route:\n    - destination:\n        host: {host}\n"
    )
}

fn key(name: &str) -> ConfigKey {
    ConfigKey::new(Kind::VirtualService, "shop", name)
}

async fn next_push(
    stream: &mut (
             impl futures::Stream<Item = shoal_proto::transport::Result<Delivery<PushRequest>>> + Unpin
         ),
) -> PushRequest {
    let delivery = timeout(WAIT, stream.next())
        .await
        .expect("no push request in time")
        .expect("push stream ended")
        .expect("push stream error");
    delivery.acker.ack().await.unwrap();
    delivery.message
}

async fn kv_host(kv: &dyn ConfigKv, cluster: &str, name: &str) -> Option<(String, u64)> {
    let wanted = config_kv_key(&Origin::new(cluster, "dir", ""), &key(name));
    let entry = kv
        .entries()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.key == wanted)?;
    let config = decode_config(entry.value.as_ref()?).unwrap();
    match config.spec {
        Spec::VirtualService(vs) => Some((vs.hosts[0].clone(), entry.revision)),
        _ => None,
    }
}

async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[tokio::test]
async fn yaml_edit_becomes_a_kv_update_and_a_debounced_push() {
    shoal_infra::runtime::init_tracing();
    let server = NatsServer::start();
    let client = connect(&server.url()).await.unwrap();
    let kv = Arc::new(
        NatsConfigKv::open(client.clone(), Default::default())
            .await
            .unwrap(),
    );
    let bus = Arc::new(NatsBus::open(client, Default::default()).await.unwrap());
    // A builder's view of the push queue.
    let mut pushes = bus.push_requests().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &vs("a", "one"));
    let mut config = IngestConfig::new(dir.path(), "east");
    config.debounce_after = Duration::from_millis(400);
    let mut registry = Registry::default();
    let ingest = Ingest::new(config, kv.clone(), bus.clone(), &mut registry);
    let handle = ingest.handle();
    let drain = Drain::new();
    let task = tokio::spawn(ingest.run(drain.watcher()));

    // Start-up: the directory in the KV, then one full push at the KV's revision.
    let start = next_push(&mut pushes).await;
    assert!(start.changes.full && start.changes.keys.is_empty());
    let (host, revision) = kv_host(&*kv, "east", "a").await.unwrap();
    assert_eq!(host, "one");
    assert!(start.revision >= revision);
    assert!(handle.is_ready());

    // Two edits 150 ms apart (longer than the file coalescing, shorter than the quiet
    // period): two KV writes, one push naming both.
    write(dir.path(), "a.yaml", &vs("a", "two"));
    wait_for("a's update in the KV", || async {
        kv_host(&*kv, "east", "a")
            .await
            .is_some_and(|(h, _)| h == "two")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    write(dir.path(), "b.yaml", &vs("b", "three"));
    let push = next_push(&mut pushes).await;
    let (_, rev_a) = kv_host(&*kv, "east", "a").await.unwrap();
    let (_, rev_b) = kv_host(&*kv, "east", "b").await.unwrap();
    assert!(push.changes.full);
    assert_eq!(push.changes.keys, [key("a").into(), key("b").into()].into());
    assert_eq!(push.changes.events(), 2, "both events merged: {push:?}");
    assert_eq!(push.revision, rev_a.max(rev_b));
    // Nothing else was published.
    assert!(
        timeout(Duration::from_millis(700), pushes.next())
            .await
            .is_err(),
        "an extra push was published"
    );

    // A delete: the KV key goes, then its push.
    std::fs::remove_file(dir.path().join("b.yaml")).unwrap();
    let push = next_push(&mut pushes).await;
    assert_eq!(push.changes.keys, [key("b").into()].into());
    assert!(kv_host(&*kv, "east", "b").await.is_none());

    assert!(drain.signal_and_wait(WAIT).await);
    task.await.unwrap().unwrap();
}

#[tokio::test]
async fn binary_serves_admin_and_drains_on_sigterm() {
    let server = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &vs("a", "one"));
    let bad = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: bad\n  namespace: shop\nspec:\n  http: []\n";
    write(dir.path(), "bad.yaml", bad);
    let http = format!("127.0.0.1:{}", free_port());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ingest"))
        .args(["--config-dir", &dir.path().display().to_string()])
        .args(["--cluster-id", "west", "--nats-url", &server.url()])
        .args(["--http-addr", &http])
        .env("SHOAL_DEBOUNCE_AFTER", "50ms")
        .env("SHOAL_DEBOUNCE_MAX", "2s")
        .spawn()
        .unwrap();

    let client = reqwest::Client::new();
    let get = |path: &str| {
        let url = format!("http://{http}{path}");
        let client = client.clone();
        async move {
            let response = client.get(url).send().await.ok()?;
            Some((response.status().as_u16(), response.text().await.ok()?))
        }
    };
    wait_for("ready", || async {
        get("/healthz/ready")
            .await
            .is_some_and(|(status, _)| status == 200)
    })
    .await;
    let (_, rejections) = get("/debug/rejections").await.unwrap();
    let rejections: serde_json::Value = serde_json::from_str(&rejections).unwrap();
    assert_eq!(
        rejections[0]["object"], "VirtualService shop/bad",
        "{rejections}"
    );
    let (_, metrics) = get("/metrics").await.unwrap();
    assert!(
        metrics.contains("shoal_ingest_config_rejected_total{kind=\"VirtualService\"} 1"),
        "{metrics}"
    );
    let kv = NatsConfigKv::open(connect(&server.url()).await.unwrap(), Default::default())
        .await
        .unwrap();
    assert_eq!(kv_host(&kv, "west", "a").await.unwrap().0, "one");

    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = std::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "ingest did not exit on SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
}
