//! The builder against real NATS (config KV, push stream, announcements) and Redis
//! (snapshots): layout (root manifest → index pages → leaf pages → chunks), forward-only `latest`, and an
//! endpoint change writing one small chunk and one page rather than the mesh.

use futures::StreamExt;
use prometheus_client::registry::Registry;
use shoal_builder::{Builder, BuilderConfig};
use shoal_infra::nats::{NatsBus, NatsBusConfig, NatsConfigKv, NatsConfigKvConfig, connect};
use shoal_infra::redis::{RedisConfig, RedisSnapshotStore};
use shoal_infra::runtime::Drain;
use shoal_infra::testing::{NatsServer, RedisServer};
use shoal_proto::change::{ChangeKey, TriggerReason};
use shoal_proto::config::parse::parse_documents;
use shoal_proto::config::{ConfigKey, Kind, Origin};
use shoal_proto::push::PushRequest;
use shoal_proto::snapshot::{ChunkHash, ChunkKey, ChunkRef, IndexPage, Manifest, Page};
use shoal_proto::transport::{
    Bus, ConfigKv, SnapshotEvent, SnapshotStore, TransportError, config_kv_key, encode_config,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

fn mesh(pod_ip: &str) -> String {
    let mut yaml = String::new();
    for ns in ["shop", "payments"] {
        for svc in 0..5 {
            yaml.push_str(&format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc-{svc}, namespace: {ns}}}\nspec: {{selector: {{app: svc-{svc}}}, ports: [{{name: http, port: 80, targetPort: 8080}}]}}\n"
            ));
            for pod in 0..4 {
                let ip = if ns == "shop" && svc == 0 && pod == 0 {
                    pod_ip.to_string()
                } else {
                    format!("10.{}.{svc}.{pod}", if ns == "shop" { 1 } else { 2 })
                };
                yaml.push_str(&format!(
                    "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: svc-{svc}-{pod}, namespace: {ns}, labels: {{app: svc-{svc}}}}}\nstatus: {{podIP: {ip}}}\n"
                ));
            }
        }
    }
    yaml
}

/// Writes every object; returns the revision of the last write.
async fn put_all(kv: &NatsConfigKv, yaml: &str) -> u64 {
    let mut revision = 0;
    for parsed in parse_documents("mesh.yaml", yaml) {
        let mut config = parsed.expect("valid").config;
        config.meta.origin = Origin::new("c1", "dir", "");
        let key = config_kv_key(&config.meta.origin, &config.key());
        revision = kv
            .put(&key, encode_config(&config).unwrap().into())
            .await
            .unwrap();
    }
    revision
}

/// A snapshot as an edge reads it: the root manifest, every page of its tree (index and
/// leaf) and the refs of every chunk its leaf pages list, by key.
type Read = (Manifest, Vec<ChunkHash>, Vec<ChunkRef>);

/// Snapshot `version` as an edge reads it, a level of its page tree at a time. `None`
/// while the manifest or one of its pages is missing.
async fn read_snapshot(store: &RedisSnapshotStore, version: u64) -> Option<Read> {
    let manifest = Manifest::decode(&store.get_manifest(version).await.ok()??).unwrap();
    let mut level: Vec<ChunkHash> = manifest.pages.iter().map(|p| p.hash).collect();
    let mut pages = Vec::new();
    let mut refs = Vec::new();
    for depth in (0..=manifest.depth).rev() {
        let bodies = store.get_chunks(&level).await.ok()?;
        let mut below = Vec::new();
        for (hash, body) in level.iter().zip(bodies) {
            let body = body?;
            if depth > 0 {
                let index = IndexPage::decode(hash, &body).unwrap();
                below.extend(index.pages.into_iter().map(|p| p.hash));
            } else {
                refs.extend(Page::decode(hash, &body).unwrap().chunks);
            }
        }
        pages.append(&mut level);
        level = below;
    }
    refs.sort_by(|a, b| a.key.cmp(&b.key));
    Some((manifest, pages, refs))
}

/// Every page and chunk a snapshot needs.
fn blobs(pages: &[ChunkHash], refs: &[ChunkRef]) -> Vec<ChunkHash> {
    let chunks = refs.iter().map(|c| c.hash);
    pages.iter().cloned().chain(chunks).collect()
}

/// The config KV, the bus and the snapshot store on real NATS and Redis.
async fn connect_all(
    nats: &NatsServer,
    redis: &RedisServer,
) -> (Arc<NatsConfigKv>, Arc<NatsBus>, Arc<RedisSnapshotStore>) {
    let client = connect(&nats.url()).await.unwrap();
    let kv = NatsConfigKv::open(client.clone(), NatsConfigKvConfig::default())
        .await
        .unwrap();
    let bus = NatsBus::open(client, NatsBusConfig::default())
        .await
        .unwrap();
    let store = RedisSnapshotStore::connect(RedisConfig::new(redis.url()))
        .await
        .unwrap();
    (Arc::new(kv), Arc::new(bus), Arc::new(store))
}

async fn next_event(
    events: &mut (impl futures::Stream<Item = Result<SnapshotEvent, TransportError>> + Unpin),
) -> SnapshotEvent {
    loop {
        let item = tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("snapshot announced in time")
            .expect("stream open");
        if let Ok(e) = item {
            return e;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builds_full_then_writes_only_the_changed_endpoints() {
    let nats = NatsServer::start();
    let redis = RedisServer::start();
    let (kv, bus, store) = connect_all(&nats, &redis).await;
    let mut events = bus.snapshot_events().await.unwrap();

    // Config and a push request exist before the builder starts: nothing is lost.
    let revision = put_all(&kv, &mesh("10.1.0.0")).await;
    bus.publish_push(&PushRequest::full_everything(
        TriggerReason::GlobalUpdate,
        revision,
        SystemTime::now(),
    ))
    .await
    .unwrap();

    let mut registry = Registry::default();
    let builder = Builder::new(
        BuilderConfig::default(),
        kv.clone(),
        bus.clone(),
        store.clone(),
        &mut registry,
    );
    let drain = Drain::new();
    let task = tokio::spawn(builder.run(drain.watcher()));

    let first = next_event(&mut events).await;
    assert_eq!(first.version, revision);
    assert!(first.changes.full);
    assert_eq!(store.latest().await.unwrap(), Some(revision));
    let (manifest, _, refs) = read_snapshot(&store, revision).await.expect("written");
    assert_eq!(refs.len(), 2 + 10, "2 namespaces + 10 services' endpoints");
    assert_eq!(
        (manifest.depth, manifest.pages.len()),
        (0, 1),
        "12 chunks: one leaf page, no index page"
    );

    // Move one pod: one endpoints chunk changes, and only it is written.
    let moved = put_all(&kv, &mesh("10.9.9.9")).await;
    bus.publish_push(&PushRequest::for_change(
        ConfigKey::new(Kind::Pod, "shop", "svc-0-0"),
        moved,
        SystemTime::now(),
    ))
    .await
    .unwrap();
    let second = next_event(&mut events).await;
    assert!(second.version >= moved);
    assert!(
        !second.changes.full,
        "an endpoint change is not a full push"
    );
    let names: Vec<_> = second
        .changes
        .keys
        .iter()
        .filter_map(ChangeKey::hostname)
        .collect();
    assert_eq!(names, ["svc-0.shop.svc.cluster.local"]);
    let (next, _, next_refs) = read_snapshot(&store, second.version)
        .await
        .expect("written");
    let changed: Vec<_> = next_refs.iter().filter(|c| !refs.contains(c)).collect();
    assert_eq!(changed.len(), 1);
    assert!(
        matches!(&changed[0].key, ChunkKey::Endpoints(s) if s.hostname == "svc-0.shop.svc.cluster.local")
    );
    let body = store.get_chunks(&[changed[0].hash]).await.unwrap();
    let size = body[0].as_ref().unwrap().len();
    assert!(size < 2048, "endpoint chunk is {size} bytes");
    assert_ne!(next.pages, manifest.pages, "the page listing it is new");
    let page = store.get_chunks(&[next.pages[0].hash]).await.unwrap();
    let page = page[0].as_ref().unwrap().len();
    let root = next.encode().unwrap().len();
    println!(
        "one-endpoint change: one {size}-byte chunk, one {page}-byte page, a {root}-byte manifest of {} page(s)",
        next.pages.len()
    );

    // `latest` never moves back.
    assert!(!store.advance_latest(revision).await.unwrap());
    assert_eq!(store.latest().await.unwrap(), Some(second.version));
    drain.signal();
    task.await.unwrap().unwrap();
}

/// Redis restarted empty: the builder notices within its store check and writes the
/// latest snapshot back whole. A change made while Redis is down is written once it
/// returns, within the write backoff (2 s), not after a JetStream redelivery (30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_lost_everything_is_refilled_and_writes_resume_when_it_returns() {
    let nats = NatsServer::start();
    let mut redis = RedisServer::start();
    let (kv, bus, store) = connect_all(&nats, &redis).await;
    let mut events = bus.snapshot_events().await.unwrap();
    let revision = put_all(&kv, &mesh("10.1.0.0")).await;
    bus.publish_push(&PushRequest::full_everything(
        TriggerReason::GlobalUpdate,
        revision,
        SystemTime::now(),
    ))
    .await
    .unwrap();
    let config = BuilderConfig {
        store_check_every: Duration::from_millis(200),
        ..BuilderConfig::default()
    };
    let builder = Builder::new(
        config,
        kv.clone(),
        bus.clone(),
        store.clone(),
        &mut Registry::default(),
    );
    let drain = Drain::new();
    let task = tokio::spawn(builder.run(drain.watcher()));
    let first = next_event(&mut events).await;
    let read = read_snapshot(&store, first.version).await.expect("written");

    // Everything gone: refilled, every page and chunk the manifest needs included.
    redis.stop();
    redis.start_again();
    let restored = wait_for(|| async {
        let Some((_, pages, refs)) = read_snapshot(&store, first.version).await else {
            return false;
        };
        store.latest().await.ok().flatten() == Some(first.version)
            && store
                .missing_chunks(&blobs(&pages, &refs))
                .await
                .is_ok_and(|m| m.is_empty())
    })
    .await;
    assert_eq!(read_snapshot(&store, first.version).await, Some(read));
    println!("Redis restarted empty: snapshot restored in {restored:?}");

    // A change while Redis is down: written once it is back.
    redis.stop();
    let moved = put_all(&kv, &mesh("10.9.9.9")).await;
    bus.publish_push(&PushRequest::for_change(
        ConfigKey::new(Kind::Pod, "shop", "svc-0-0"),
        moved,
        SystemTime::now(),
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    redis.start_again();
    let back = std::time::Instant::now();
    let second = next_event(&mut events).await;
    assert!(second.version >= moved);
    let waited = back.elapsed();
    assert!(
        waited < Duration::from_secs(10),
        "written {waited:?} after Redis returned"
    );
    println!("change made while Redis was down: written {waited:?} after it returned");
    let (_, pages, refs) = read_snapshot(&store, second.version)
        .await
        .expect("every page of the new snapshot is in the (emptied) store");
    assert!(
        store
            .missing_chunks(&blobs(&pages, &refs))
            .await
            .unwrap()
            .is_empty(),
        "every chunk of the new snapshot is in the (emptied) store"
    );

    drain.signal();
    task.await.unwrap().unwrap();
}

/// Polls `check` every 50 ms for up to 20 s; returns how long it took.
async fn wait_for<F, Fut>(check: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = std::time::Instant::now();
    while !check().await {
        assert!(started.elapsed() < Duration::from_secs(20), "not in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}
