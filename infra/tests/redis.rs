//! The Redis snapshot store against a real `redis-server` (one per test), through the
//! conformance checks, plus key layout and error mapping.

mod conformance;

use conformance::store;
use shoal_infra::redis::{RedisConfig, RedisSnapshotStore};
use shoal_infra::testing::RedisServer;
use shoal_proto::transport::{SnapshotStore, TransportError};
use std::sync::Arc;

async fn open(server: &RedisServer) -> Arc<RedisSnapshotStore> {
    let config = RedisConfig::new(server.url()).with_prefix("test");
    Arc::new(RedisSnapshotStore::connect(config).await.unwrap())
}

#[tokio::test]
async fn chunks_missing_put_get() {
    let server = RedisServer::start();
    store::chunks_missing_put_get(open(&server).await).await;
}

#[tokio::test]
async fn many_chunks_round_trip() {
    let server = RedisServer::start();
    store::many_chunks_round_trip(open(&server).await).await;
}

#[tokio::test]
async fn chunk_ttl_and_refresh() {
    let server = RedisServer::start();
    store::chunk_ttl_and_refresh(open(&server).await).await;
}

#[tokio::test]
async fn manifests_with_ttl() {
    let server = RedisServer::start();
    store::manifests_with_ttl(open(&server).await).await;
}

#[tokio::test]
async fn latest_only_moves_forward() {
    let server = RedisServer::start();
    store::latest_only_moves_forward(open(&server).await).await;
}

#[tokio::test]
async fn latest_concurrent_advances() {
    let server = RedisServer::start();
    store::latest_concurrent_advances(open(&server).await).await;
}

#[tokio::test]
async fn prefixes_isolate_stores_and_keys_follow_the_layout() {
    let server = RedisServer::start();
    let a = open(&server).await;
    let b = RedisSnapshotStore::connect(RedisConfig::new(server.url()).with_prefix("other"))
        .await
        .unwrap();
    assert!(a.advance_latest(3).await.unwrap());
    assert_eq!(b.latest().await.unwrap(), None);
    a.put_manifest(3, "m".into(), std::time::Duration::from_secs(60))
        .await
        .unwrap();

    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    keys.sort();
    assert_eq!(keys, ["test:latest", "test:snap:3"]);
}

#[tokio::test]
async fn corrupt_latest_is_a_codec_error() {
    let server = RedisServer::start();
    let store = open(&server).await;
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let () = redis::cmd("SET")
        .arg("test:latest")
        .arg("not-a-number")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(
        store.latest().await,
        Err(TransportError::Codec(_))
    ));
}

#[tokio::test]
async fn unreachable_redis_is_unavailable() {
    let port = shoal_infra::testing::free_port();
    let mut config = RedisConfig::new(format!("redis://127.0.0.1:{port}"));
    config.connection_timeout = std::time::Duration::from_millis(200);
    config.connect_retries = 1;
    let store = RedisSnapshotStore::connect_lazy(config).unwrap();
    match store.latest().await {
        Err(TransportError::Unavailable("redis", _)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}
