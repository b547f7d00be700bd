//! `SnapshotStore`: chunks, TTLs, manifests and the forward-only `latest`.

use bytes::Bytes;
use shoal_proto::snapshot::ChunkHash;
use shoal_proto::transport::SnapshotStore;
use std::sync::Arc;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

fn chunk(i: usize) -> (ChunkHash, Bytes) {
    let bytes = Bytes::from(format!("chunk-{i}-{}", "x".repeat(i % 50)));
    (ChunkHash::of(&bytes), bytes)
}

pub async fn chunks_missing_put_get(store: Arc<dyn SnapshotStore>) {
    let chunks: Vec<_> = (0..3).map(chunk).collect();
    let hashes: Vec<_> = chunks.iter().map(|(h, _)| *h).collect();
    assert_eq!(store.missing_chunks(&hashes).await.unwrap(), hashes);

    store.put_chunks(&chunks[..2], LONG).await.unwrap();
    assert_eq!(
        store.missing_chunks(&hashes).await.unwrap(),
        vec![hashes[2]]
    );
    let got = store.get_chunks(&hashes).await.unwrap();
    assert_eq!(
        got,
        vec![Some(chunks[0].1.clone()), Some(chunks[1].1.clone()), None]
    );
    assert!(store.get_chunks(&[]).await.unwrap().is_empty());
    assert!(store.missing_chunks(&[]).await.unwrap().is_empty());
}

/// More chunks than one batch: order is kept across batches.
pub async fn many_chunks_round_trip(store: Arc<dyn SnapshotStore>) {
    let chunks: Vec<_> = (0..1300).map(chunk).collect();
    let hashes: Vec<_> = chunks.iter().map(|(h, _)| *h).collect();
    store.put_chunks(&chunks, LONG).await.unwrap();
    assert!(store.missing_chunks(&hashes).await.unwrap().is_empty());
    let got = store.get_chunks(&hashes).await.unwrap();
    let want: Vec<_> = chunks.into_iter().map(|(_, b)| Some(b)).collect();
    assert_eq!(got, want);
    store.refresh_chunks(&hashes, LONG).await.unwrap();
}

/// Chunks expire after their TTL unless refreshed; a refresh does not revive a missing one.
pub async fn chunk_ttl_and_refresh(store: Arc<dyn SnapshotStore>) {
    let (kept, dropped, absent) = (chunk(1), chunk(2), chunk(3));
    let short = Duration::from_millis(400);
    store
        .put_chunks(&[kept.clone(), dropped.clone()], short)
        .await
        .unwrap();
    store
        .refresh_chunks(&[kept.0, absent.0], LONG)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let all = [kept.0, dropped.0, absent.0];
    assert_eq!(
        store.missing_chunks(&all).await.unwrap(),
        vec![dropped.0, absent.0]
    );
    assert_eq!(
        store.get_chunks(&all).await.unwrap(),
        vec![Some(kept.1), None, None]
    );
}

pub async fn manifests_with_ttl(store: Arc<dyn SnapshotStore>) {
    assert_eq!(store.get_manifest(7).await.unwrap(), None);
    store
        .put_manifest(7, Bytes::from_static(b"manifest-7"), LONG)
        .await
        .unwrap();
    store
        .put_manifest(
            8,
            Bytes::from_static(b"manifest-8"),
            Duration::from_millis(300),
        )
        .await
        .unwrap();
    assert_eq!(
        store.get_manifest(7).await.unwrap(),
        Some(Bytes::from_static(b"manifest-7"))
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(store.get_manifest(8).await.unwrap(), None);
    assert!(store.get_manifest(7).await.unwrap().is_some());
}

/// `latest` moves only forward, across the whole u64 range.
pub async fn latest_only_moves_forward(store: Arc<dyn SnapshotStore>) {
    assert_eq!(store.latest().await.unwrap(), None);
    assert!(store.advance_latest(5).await.unwrap());
    assert!(!store.advance_latest(3).await.unwrap(), "backwards");
    assert!(
        !store.advance_latest(5).await.unwrap(),
        "not strictly greater"
    );
    assert_eq!(store.latest().await.unwrap(), Some(5));
    assert!(store.advance_latest(9).await.unwrap());
    assert!(
        store.advance_latest(10).await.unwrap(),
        "10 > 9 numerically"
    );
    assert!(!store.advance_latest(9).await.unwrap());
    assert!(store.advance_latest(u64::MAX - 1).await.unwrap());
    assert!(
        store.advance_latest(u64::MAX).await.unwrap(),
        "exact near u64::MAX"
    );
    assert!(!store.advance_latest(u64::MAX - 1).await.unwrap());
    assert_eq!(store.latest().await.unwrap(), Some(u64::MAX));
}

/// Racing writers: `latest` ends at the largest version, whatever the interleaving.
pub async fn latest_concurrent_advances(store: Arc<dyn SnapshotStore>) {
    let mut tasks = Vec::new();
    for version in [13u64, 4, 20, 1, 17, 8, 19, 2, 11, 6, 15, 3] {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.advance_latest(version).await.unwrap()
        }));
    }
    let mut moved = 0;
    for task in tasks {
        moved += usize::from(task.await.unwrap());
    }
    assert!(moved >= 1);
    assert_eq!(store.latest().await.unwrap(), Some(20));
}
