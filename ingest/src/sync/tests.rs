use super::*;
use crate::metrics::EventLabels;
use crate::retry::RetryConfig;
use crate::testing::Flaky;
use bytes::Bytes;
use shoal_infra::memory::MemoryConfigKv;
use shoal_proto::config::{ConfigMeta, Kind, Origin, Spec, istio};
use shoal_proto::push::PushRequest;
use shoal_proto::store::ConfigStore;
use shoal_proto::transport::{ConfigKv, KvEntry, config_kv_key, decode_config};
use std::time::Duration;
use tokio::sync::mpsc;

/// The directory source of cluster `c1`.
fn c1() -> Origin {
    Origin::new("c1", "dir", "")
}

fn vs(name: &str, host: &str) -> Config {
    Config {
        meta: ConfigMeta {
            name: name.into(),
            namespace: "shop".into(),
            origin: c1(),
            ..Default::default()
        },
        spec: Spec::VirtualService(istio::VirtualService {
            hosts: vec![host.into()],
            ..Default::default()
        }),
    }
}

fn change(config: &Config) -> Change {
    Change {
        key: config.key(),
        config: Some(Box::new(config.clone())),
        at: SystemTime::now(),
    }
}

fn delete(key: ConfigKey) -> Change {
    Change {
        key,
        config: None,
        at: SystemTime::now(),
    }
}

struct Harness {
    kv: Arc<Flaky<MemoryConfigKv>>,
    writer: WriterHandle,
    pushes: mpsc::Receiver<PushRequest>,
    task: tokio::task::JoinHandle<Result<(), SyncError>>,
    metrics: Metrics,
}

fn start(failures: u32) -> Harness {
    let kv = Flaky::new(MemoryConfigKv::default(), failures);
    let metrics = Metrics::unregistered();
    let (tx, rx) = mpsc::channel(4);
    let (push_tx, pushes) = mpsc::channel(16);
    let writer = KvWriter {
        kv: kv.clone(),
        origin: c1(),
        pushes: push_tx,
        metrics: metrics.clone(),
        retry: RetryConfig {
            min: Duration::from_millis(10),
            max: Duration::from_millis(40),
        },
        pipeline: 8,
    };
    let task = tokio::spawn(writer.run(rx));
    Harness {
        kv,
        writer: WriterHandle::new(tx),
        pushes,
        task,
        metrics,
    }
}

async fn kv_value(kv: &dyn ConfigKv, key: &ConfigKey) -> Option<(Config, u64)> {
    let wanted = config_kv_key(&c1(), key);
    kv.entries()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.key == wanted)
        .map(|e| {
            (
                decode_config(e.value.as_ref().unwrap()).unwrap(),
                e.revision,
            )
        })
}

#[tokio::test(start_paused = true)]
async fn writes_then_pushes_with_the_write_revision() {
    let mut h = start(0);
    let a = vs("a", "a.example.com");
    h.writer.send(change(&a), true).await.unwrap();
    let push = h.pushes.recv().await.unwrap();
    assert_eq!(push.changes.keys, [a.key().into()].into());
    assert!(push.changes.full);
    // The KV already holds the change at the revision the push names.
    let (stored, revision) = kv_value(&*h.kv, &a.key()).await.unwrap();
    assert_eq!(stored, a);
    assert_eq!(push.revision, revision);

    h.writer.send(delete(a.key()), true).await.unwrap();
    let push = h.pushes.recv().await.unwrap();
    assert!(kv_value(&*h.kv, &a.key()).await.is_none());
    assert_eq!(push.revision, revision + 1);
    assert_eq!(h.writer.flush().await.unwrap(), revision + 1);
    let puts = h
        .metrics
        .kv_writes
        .get_or_create(&crate::metrics::OpLabel { op: "put" });
    assert_eq!(puts.get(), 1);

    drop(h.writer);
    h.task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn unavailable_kv_is_retried_and_nothing_is_dropped() {
    let mut h = start(5);
    let configs: Vec<_> = (0..6).map(|i| vs(&format!("v{i}"), "h")).collect();
    for c in &configs {
        h.writer.send(change(c), true).await.unwrap();
    }
    let mut revisions = Vec::new();
    for c in &configs {
        let push = h.pushes.recv().await.unwrap();
        assert_eq!(
            push.changes.keys,
            [c.key().into()].into(),
            "pushes in change order"
        );
        revisions.push(push.revision);
    }
    assert_eq!(revisions, [1, 2, 3, 4, 5, 6]);
    assert_eq!(h.kv.inner.entries().await.unwrap().len(), 6);
    let retries = h
        .metrics
        .retries
        .get_or_create(&crate::metrics::OpLabel { op: "kv_put" });
    assert_eq!(retries.get(), 5);
    drop(h.writer);
    h.task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn unpublished_changes_are_written_without_pushes() {
    let mut h = start(0);
    h.writer.send(change(&vs("a", "h")), false).await.unwrap();
    h.writer.send(change(&vs("b", "h")), false).await.unwrap();
    assert_eq!(h.writer.flush().await.unwrap(), 2);
    assert!(h.pushes.try_recv().is_err());
    drop(h.writer);
    h.task.await.unwrap().unwrap();
    // The writer is gone: its handle reports it.
}

/// Unpublished writes are pipelined, yet a key written twice lands in order, a pushed
/// change waits for every earlier write, and a flush reports the highest revision.
#[tokio::test(start_paused = true)]
async fn pipelined_writes_keep_each_keys_order_and_pushes_follow_them() {
    let mut h = start(0);
    for i in 0..20 {
        h.writer
            .send(change(&vs(&format!("vs-{i}"), "h")), false)
            .await
            .unwrap();
    }
    h.writer
        .send(change(&vs("vs-3", "second")), false)
        .await
        .unwrap();
    let pushed = vs("pushed", "h");
    h.writer.send(change(&pushed), true).await.unwrap();
    assert_eq!(h.writer.flush().await.unwrap(), 22);
    let (config, _) = kv_value(&*h.kv, &vs("vs-3", "").key()).await.unwrap();
    let shoal_proto::config::Spec::VirtualService(spec) = &config.spec else {
        panic!("not a VirtualService");
    };
    assert_eq!(spec.hosts, ["second"], "the later write of a key wins");
    let push = h.pushes.recv().await.unwrap();
    assert_eq!(push.revision, 22, "the push follows every earlier write");
    assert!(h.pushes.try_recv().is_err());
    drop(h.writer);
    h.task.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn writer_stops_when_the_debouncer_is_gone() {
    let h = start(0);
    drop(h.pushes);
    h.writer.send(change(&vs("a", "h")), true).await.unwrap();
    assert!(matches!(
        h.task.await.unwrap(),
        Err(SyncError::DebouncerGone)
    ));
    assert!(matches!(
        h.writer.send(change(&vs("b", "h")), true).await,
        Err(SyncError::WriterGone)
    ));
}

#[test]
fn store_events_are_buffered_in_order_and_counted() {
    let metrics = Metrics::unregistered();
    let buffer = EventBuffer::default();
    let mut store = ConfigStore::new();
    store.register_event_handler(None, buffer.handler(metrics.clone()));
    store.apply(vs("a", "one"));
    store.apply(vs("a", "one")); // unchanged: no event
    store.apply(vs("a", "two"));
    store.delete(Kind::VirtualService, "shop", "a").unwrap();
    let changes = buffer.drain();
    let key = ConfigKey::new(Kind::VirtualService, "shop", "a");
    let keys: Vec<_> = changes.iter().map(|c| &c.key).collect();
    assert_eq!(keys, [&key, &key, &key]);
    assert!(buffer.drain().is_empty());
    for event in ["add", "update", "delete"] {
        let labels = EventLabels {
            kind: "VirtualService",
            event,
        };
        assert_eq!(
            metrics.config_events.get_or_create(&labels).get(),
            1,
            "{event}"
        );
    }
}

fn entry(origin: &Origin, key: &ConfigKey, revision: u64, deleted: bool) -> KvEntry {
    KvEntry {
        key: config_kv_key(origin, key),
        value: (!deleted).then(|| Bytes::from_static(b"{}")),
        revision,
    }
}

#[test]
fn reconcile_plan() {
    let key = |n: &str| ConfigKey::new(Kind::VirtualService, "shop", n);
    let entries = vec![
        entry(&c1(), &key("held"), 3, false),
        entry(&c1(), &key("stale"), 5, false),
        entry(&c1(), &key("broken"), 2, false),
        entry(&Origin::new("c2", "dir", ""), &key("stale"), 9, false),
        entry(
            &Origin::new("c1", "kubernetes", ""),
            &key("other-source"),
            4,
            false,
        ),
        entry(&c1(), &key("tombstone"), 11, true),
        KvEntry {
            key: "c1.VirtualService.shop.before-sources".into(),
            value: Some(Bytes::from_static(b"{}")),
            revision: 6,
        },
        KvEntry {
            key: "c2.VirtualService.shop.before-sources".into(),
            value: Some(Bytes::from_static(b"{}")),
            revision: 7,
        },
        KvEntry {
            key: "not a shoal key".into(),
            value: Some(Bytes::new()),
            revision: 1,
        },
    ];
    let plan = plan(
        &entries,
        &c1(),
        |k| k.name == "held",
        |k| k.name == "broken",
    );
    assert_eq!(plan.delete, [key("stale")]);
    assert_eq!(plan.keep, [key("broken")]);
    assert_eq!(
        plan.delete_legacy,
        ["c1.VirtualService.shop.before-sources"]
    );
    assert_eq!(plan.latest, 11);
}
