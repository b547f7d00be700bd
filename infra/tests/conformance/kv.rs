//! `ConfigKv`: revisions, entries, and watch replay/order.

use super::next;
use bytes::Bytes;
use shoal_proto::transport::{ConfigKv, KvEntry};
use std::sync::Arc;

const A: &str = "c1.VirtualService.default.a";
const B: &str = "c1.VirtualService.default.b";
const C: &str = "c1.DestinationRule.prod.c";
const D: &str = "c2.ServiceEntry.prod.api_2Eexample_2Ecom";

fn entry(key: &str, value: Option<&'static str>, revision: u64) -> KvEntry {
    KvEntry {
        key: key.into(),
        value: value.map(|v| Bytes::from_static(v.as_bytes())),
        revision,
    }
}

/// Every write gets a larger revision; `entries()` holds the latest values (not deletes),
/// in revision order.
pub async fn revisions_and_entries(kv: Arc<dyn ConfigKv>) {
    assert!(
        kv.entries().await.unwrap().is_empty(),
        "a new store is empty"
    );
    let r1 = kv.put(A, Bytes::from_static(b"1")).await.unwrap();
    let r2 = kv.put(B, Bytes::from_static(b"2")).await.unwrap();
    let r3 = kv.put(A, Bytes::from_static(b"3")).await.unwrap();
    let r4 = kv.delete(B).await.unwrap();
    assert!(
        r1 < r2 && r2 < r3 && r3 < r4,
        "revisions increase: {r1} {r2} {r3} {r4}"
    );

    let mut entries = kv.entries().await.unwrap();
    entries.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(entries, vec![entry(A, Some("3"), r3)]);
}

/// A watch first replays the latest entry of every key (deletes included) in revision
/// order (here neither key order nor first-write order), then live changes.
pub async fn watch_replays_latest_with_tombstones(kv: Arc<dyn ConfigKv>) {
    kv.put(A, Bytes::from_static(b"1")).await.unwrap();
    kv.put(B, Bytes::from_static(b"2")).await.unwrap();
    let rc = kv.put(C, Bytes::from_static(b"3")).await.unwrap();
    let rb = kv.delete(B).await.unwrap();
    let ra = kv.put(A, Bytes::from_static(b"5")).await.unwrap();

    let mut watch = kv.watch().await.unwrap();
    assert_eq!(
        next(&mut watch, "replayed c").await.unwrap(),
        entry(C, Some("3"), rc)
    );
    assert_eq!(
        next(&mut watch, "replayed b tombstone").await.unwrap(),
        entry(B, None, rb)
    );
    assert_eq!(
        next(&mut watch, "replayed a").await.unwrap(),
        entry(A, Some("5"), ra)
    );

    let rd = kv.put(D, Bytes::from_static(b"6")).await.unwrap();
    let rdel = kv.delete(A).await.unwrap();
    assert_eq!(
        next(&mut watch, "live d").await.unwrap(),
        entry(D, Some("6"), rd)
    );
    assert_eq!(
        next(&mut watch, "live delete a").await.unwrap(),
        entry(A, None, rdel)
    );
}

/// Live changes reach every watcher with the revisions the writers were given: per key in
/// revision order, ending with the key's last write. What the builders rely on is each
/// key's latest value; a NATS watcher whose ordered consumer is reset (its client starved
/// past a heartbeat) resumes from each key's last message, so it may skip a key's
/// intermediate revisions or see one again, but never an older one after a newer one.
pub async fn watch_live_in_revision_order(kv: Arc<dyn ConfigKv>) {
    let mut first = kv.watch().await.unwrap();
    let mut second = kv.watch().await.unwrap();
    let mut written = Vec::new();
    for i in 0..40u32 {
        let key = [A, B, C, D][(i % 4) as usize];
        let revision = if i % 5 == 4 {
            kv.delete(key).await.unwrap()
        } else {
            kv.put(key, Bytes::from(i.to_string())).await.unwrap()
        };
        written.push((key.to_owned(), revision));
    }
    let last: std::collections::BTreeMap<String, u64> = written.iter().cloned().collect();
    for watch in [&mut first, &mut second] {
        let mut seen = std::collections::BTreeMap::<String, u64>::new();
        while seen != last {
            let got = next(watch, "live change").await.unwrap();
            assert!(
                written.contains(&(got.key.clone(), got.revision)),
                "{got:?} was never written"
            );
            let before = seen.insert(got.key.clone(), got.revision).unwrap_or(0);
            assert!(
                got.revision >= before,
                "{} went back from revision {before} to {}",
                got.key,
                got.revision
            );
        }
    }
}
