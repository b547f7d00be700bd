//! The registry end to end on a temp dir with a real notify watcher, through the whole
//! ingest (KV writer, debouncer, publisher) on the in-process twins.

use crate::{Ingest, IngestConfig, IngestError, IngestHandle};
use futures::StreamExt;
use prometheus_client::registry::Registry;
use shoal_infra::memory::{MemoryBus, MemoryConfigKv};
use shoal_infra::runtime::Drain;
use shoal_proto::config::{Config, ConfigKey, Kind, Origin, Spec};
use shoal_proto::push::PushRequest;
use shoal_proto::transport::{Bus, ConfigKv, config_kv_key};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const CLUSTER: &str = "c1";

fn vs(name: &str, host: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  hosts: [{host}]\n  http:\n  - route:\n    - destination:\n        host: {host}\n"
    )
}

/// A VirtualService Istio rejects: its one HTTP route has no route, redirect,
/// directResponse or delegate.
fn vs_without_destination(name: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  hosts: [x]\n  http:\n  - timeout: 1s\n"
    )
}

fn key(name: &str) -> ConfigKey {
    ConfigKey::new(Kind::VirtualService, "shop", name)
}

fn host_of(config: &Config) -> &str {
    match &config.spec {
        Spec::VirtualService(vs) => &vs.hosts[0],
        _ => panic!("not a VirtualService"),
    }
}

struct Env {
    dir: tempfile::TempDir,
    kv: Arc<MemoryConfigKv>,
    pushes: Arc<Mutex<Vec<PushRequest>>>,
    handle: IngestHandle,
    metrics: Registry,
    drain: Drain,
    task: JoinHandle<Result<(), IngestError>>,
}

impl Env {
    /// A temp dir holding `files`, and a KV holding `kv` (`(origin, key, host)`).
    async fn start(files: &[(&str, &str)], kv_entries: &[(Origin, ConfigKey, &str)]) -> Env {
        Env::start_with(files, kv_entries, |_| {}).await
    }

    async fn start_with(
        files: &[(&str, &str)],
        kv_entries: &[(Origin, ConfigKey, &str)],
        tune: impl FnOnce(&mut IngestConfig),
    ) -> Env {
        let kv = Arc::new(MemoryConfigKv::default());
        for (origin, key, host) in kv_entries {
            let config = parsed(&vs(&key.name, host), origin.clone());
            let value = shoal_proto::transport::encode_config(&config).unwrap();
            kv.put(&config_kv_key(origin, key), value.into())
                .await
                .unwrap();
        }
        Env::start_on(files, kv, tune).await
    }

    /// A temp dir holding `files`, and the ingest on `kv` as it is.
    async fn start_on(
        files: &[(&str, &str)],
        kv: Arc<MemoryConfigKv>,
        tune: impl FnOnce(&mut IngestConfig),
    ) -> Env {
        shoal_infra::runtime::init_tracing();
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            write(&dir.path().join(path), text);
        }
        let bus = Arc::new(MemoryBus::default());
        let pushes = Arc::new(Mutex::new(Vec::new()));
        let mut stream = bus.push_requests().await.unwrap();
        let seen = pushes.clone();
        tokio::spawn(async move {
            while let Some(Ok(delivery)) = stream.next().await {
                seen.lock().unwrap().push(delivery.message);
            }
        });
        let mut config = IngestConfig::new(dir.path(), CLUSTER);
        config.network = "net-1".into();
        config.debounce_after = Duration::from_millis(20);
        config.debounce_max = Duration::from_millis(500);
        config.resync_interval = Duration::ZERO;
        tune(&mut config);
        let mut metrics = Registry::default();
        let ingest = Ingest::new(config, kv.clone(), bus, &mut metrics);
        let handle = ingest.handle();
        let drain = Drain::new();
        let task = tokio::spawn(ingest.run(drain.watcher()));
        let env = Env {
            dir,
            kv,
            pushes,
            handle,
            metrics,
            drain,
            task,
        };
        wait_for("ready", || async { env.handle.is_ready() }).await;
        env
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        write(&self.path(rel), text);
    }

    /// This cluster's directory objects in the KV.
    async fn objects(&self) -> BTreeMap<ConfigKey, Config> {
        crate::testing::owned_objects(&*self.kv, &dir(CLUSTER)).await
    }

    async fn host(&self, name: &str) -> Option<String> {
        self.objects()
            .await
            .get(&key(name))
            .map(|c| host_of(c).to_string())
    }

    async fn wait_host(&self, name: &str, want: Option<&str>) {
        wait_for(&format!("{name} to be {want:?}"), || async {
            self.host(name).await.as_deref() == want
        })
        .await;
    }

    fn pushes(&self) -> Vec<PushRequest> {
        self.pushes.lock().unwrap().clone()
    }

    /// Waits for a push naming `key` and returns it.
    async fn wait_push(&self, key: &ConfigKey) -> PushRequest {
        let mut found = None;
        wait_for(&format!("a push naming {key}"), || {
            found = self
                .pushes()
                .into_iter()
                .rev()
                .find(|p| p.changes.keys.contains(&key.clone().into()));
            std::future::ready(found.is_some())
        })
        .await;
        found.unwrap()
    }

    fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.metrics).unwrap();
        text
    }

    async fn stop(self) {
        assert!(self.drain.signal_and_wait(Duration::from_secs(5)).await);
        self.task.await.unwrap().unwrap();
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn parsed(yaml: &str, origin: Origin) -> Config {
    let mut config = shoal_proto::config::parse::parse_documents("t", yaml)
        .remove(0)
        .unwrap()
        .config;
    config.meta.origin = origin;
    config
}

/// The origin of `cluster`'s directory objects.
fn dir(cluster: &str) -> Origin {
    Origin::new(cluster, super::SOURCE, "")
}

async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn startup_loads_reconciles_and_pushes_once() {
    let files = [
        (
            "a.yaml",
            &*format!(
                "{}---\n{}",
                vs("r1", "one"),
                vs_without_destination("broken")
            ),
        ),
        (
            "sub/ns.yml",
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n",
        ),
    ];
    let kv = [
        (dir(CLUSTER), key("gone"), "stale"),
        (dir(CLUSTER), key("broken"), "earlier"),
        (dir("c2"), key("gone"), "other-cluster"),
        (
            Origin::new(CLUSTER, "kubernetes", ""),
            key("gone"),
            "other-source",
        ),
    ];
    let env = Env::start(&files, &kv).await;
    wait_for("the start-up push", || async { !env.pushes().is_empty() }).await;

    let objects = env.objects().await;
    let names: Vec<_> = objects.keys().map(|k| k.to_string()).collect();
    assert_eq!(
        names,
        [
            "Namespace /shop",
            "VirtualService shop/broken",
            "VirtualService shop/r1"
        ]
    );
    assert_eq!(
        host_of(&objects[&key("broken")]),
        "earlier",
        "kept while rejected"
    );
    for c in objects.values() {
        let origin = &c.meta.origin;
        assert_eq!(
            (origin.cluster.as_str(), origin.source.as_str()),
            (CLUSTER, super::SOURCE),
            "{}",
            c.key()
        );
    }
    let other = config_kv_key(&dir("c2"), &key("gone"));
    let entries = env.kv.entries().await.unwrap();
    assert!(
        entries.iter().any(|e| e.key == other),
        "other clusters untouched"
    );
    let other_source = config_kv_key(&Origin::new(CLUSTER, "kubernetes", ""), &key("gone"));
    assert!(
        entries
            .iter()
            .any(|e| e.key == other_source && e.value.is_some()),
        "another source of this cluster untouched"
    );

    let latest = entries.iter().map(|e| e.revision).max().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let pushes = env.pushes();
    assert_eq!(pushes.len(), 1, "one push at start-up: {pushes:?}");
    assert!(pushes[0].changes.full && pushes[0].changes.keys.is_empty());
    assert!(
        pushes[0].revision >= latest,
        "{} < {latest}",
        pushes[0].revision
    );

    let rejections = env.handle.rejections_json();
    let list = rejections.as_array().unwrap();
    assert_eq!(list.len(), 1, "{rejections}");
    assert_eq!(list[0]["object"], "VirtualService shop/broken");
    assert_eq!(list[0]["kind"], "VirtualService");
    assert_eq!(list[0]["line"], 13);
    assert!(list[0]["file"].as_str().unwrap().ends_with("a.yaml"));
    let text = env.metrics_text();
    assert!(
        text.contains("shoal_ingest_config_rejected_total{kind=\"VirtualService\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("shoal_ingest_config_rejected_objects 1"),
        "{text}"
    );
    assert!(
        text.contains("shoal_ingest_pushes_published_total{type=\"full\"} 1"),
        "{text}"
    );

    // The broken object removed from its file: its kept KV value goes too.
    env.write("a.yaml", &vs("r1", "one"));
    env.wait_host("broken", None).await;
    env.wait_push(&key("broken")).await;
    wait_for("no rejections", || async {
        env.handle.rejections().list().is_empty()
    })
    .await;
    env.stop().await;
}

#[tokio::test]
async fn add_edit_and_remove_a_file() {
    let env = Env::start(&[], &[]).await;
    env.write("a.yaml", &vs("r", "one"));
    env.wait_host("r", Some("one")).await;
    let push = env.wait_push(&key("r")).await;
    assert!(push.changes.full);
    let revision = |env: &Env| {
        let kv = env.kv.clone();
        async move {
            let k = config_kv_key(&dir(CLUSTER), &key("r"));
            kv.entries()
                .await
                .unwrap()
                .into_iter()
                .find(|e| e.key == k)
                .map(|e| e.revision)
        }
    };
    assert_eq!(Some(push.revision), revision(&env).await);

    env.write("a.yaml", &vs("r", "two"));
    env.wait_host("r", Some("two")).await;
    let rev = revision(&env).await.unwrap();
    wait_for("the edit's push", || async {
        env.pushes()
            .iter()
            .any(|p| p.revision == rev && p.changes.keys.contains(&key("r").into()))
    })
    .await;

    std::fs::remove_file(env.path("a.yaml")).unwrap();
    env.wait_host("r", None).await;
    wait_for("the delete's push", || async {
        env.pushes()
            .iter()
            .filter(|p| p.changes.keys.contains(&key("r").into()))
            .count()
            >= 3
    })
    .await;
    let text = env.metrics_text();
    for event in ["add", "update", "delete"] {
        let line = format!(
            "shoal_ingest_config_events_total{{kind=\"VirtualService\",event=\"{event}\"}} 1"
        );
        assert!(text.contains(&line), "{line} in {text}");
    }
    env.stop().await;
}

#[tokio::test]
async fn malformed_edit_keeps_the_old_version_and_counts_the_rejection() {
    let env = Env::start(&[("a.yaml", &vs("r", "good"))], &[]).await;
    env.wait_host("r", Some("good")).await;

    env.write("a.yaml", &vs_without_destination("r"));
    wait_for("the rejection", || async {
        env.handle.rejections().list().len() == 1
    })
    .await;
    let rejection = &env.handle.rejections().list()[0];
    assert_eq!(rejection.object, "VirtualService shop/r");
    assert!(
        rejection.reason.contains("route, redirect"),
        "{}",
        rejection.reason
    );
    assert_eq!(env.host("r").await.as_deref(), Some("good"));

    // Broken YAML: nothing can be named, everything the file had is kept.
    env.write(
        "a.yaml",
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: [\n",
    );
    wait_for("the syntax error", || async {
        env.handle
            .rejections()
            .list()
            .first()
            .is_some_and(|r| r.kind == "unknown")
    })
    .await;
    assert_eq!(env.host("r").await.as_deref(), Some("good"));
    let text = env.metrics_text();
    assert!(
        text.contains("shoal_ingest_config_rejected_total{kind=\"VirtualService\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("shoal_ingest_config_rejected_total{kind=\"unknown\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("shoal_ingest_config_rejected_objects 1"),
        "{text}"
    );

    // Fixed: served again, nothing rejected.
    env.write("a.yaml", &vs("r", "fixed"));
    env.wait_host("r", Some("fixed")).await;
    wait_for("no rejections", || async {
        env.handle.rejections().list().is_empty()
    })
    .await;
    assert!(
        env.metrics_text()
            .contains("shoal_ingest_config_rejected_objects 0")
    );
    env.stop().await;
}

/// `vs(name, host)` with a field Shoal does not implement: served, with a warning.
fn vs_with_ignored_field(name: &str, host: &str) -> String {
    format!("{}    mirrorPolicy: {{}}\n", vs(name, host))
}

#[tokio::test]
async fn warnings_show_in_the_metric_and_debug_warnings_until_fixed() {
    let env = Env::start(&[("a.yaml", &vs_with_ignored_field("r", "one"))], &[]).await;
    env.wait_host("r", Some("one")).await;
    let warnings = env.handle.warnings_json();
    let path = env.path("a.yaml").display().to_string();
    assert_eq!(
        warnings,
        serde_json::json!([{
            "file": path,
            "line": 1,
            "kind": "VirtualService",
            "object": "VirtualService shop/r",
            "warning": "fields not supported by Shoal, ignored: spec.http[0].mirrorPolicy",
        }])
    );
    let text = env.metrics_text();
    assert!(
        text.contains("shoal_ingest_config_warnings{kind=\"VirtualService\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("shoal_ingest_config_warnings{kind=\"DestinationRule\"} 0"),
        "{text}"
    );

    // A second object with a warning in another file, then the first fixed.
    env.write("b.yaml", &vs_with_ignored_field("s", "two"));
    env.wait_host("s", Some("two")).await;
    wait_for("two warnings", || async {
        env.handle.warnings().list().len() == 2
    })
    .await;
    assert!(
        env.metrics_text()
            .contains("shoal_ingest_config_warnings{kind=\"VirtualService\"} 2")
    );
    env.write("a.yaml", &vs("r", "fixed"));
    env.wait_host("r", Some("fixed")).await;
    wait_for("one warning left", || async {
        env.handle.warnings().list().len() == 1
    })
    .await;
    assert_eq!(
        env.handle.warnings().list()[0].object,
        "VirtualService shop/s"
    );
    assert!(
        env.metrics_text()
            .contains("shoal_ingest_config_warnings{kind=\"VirtualService\"} 1")
    );

    // Its file removed: no warning left.
    std::fs::remove_file(env.path("b.yaml")).unwrap();
    env.wait_host("s", None).await;
    wait_for("no warnings", || async {
        env.handle.warnings().list().is_empty()
    })
    .await;
    assert!(
        env.metrics_text()
            .contains("shoal_ingest_config_warnings{kind=\"VirtualService\"} 0")
    );
    env.stop().await;
}

/// A document of a kind Shoal does not read (a Deployment from a kubectl dump) is a
/// warning (`/debug/warnings`, the metric, the log), not dropped without a word.
#[tokio::test]
async fn documents_of_kinds_shoal_does_not_read_are_warned_about() {
    let deployment =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\n";
    let text = format!("{}---\n{deployment}", vs("r", "x"));
    let env = Env::start(&[("dump.yaml", &text)], &[]).await;
    env.wait_host("r", Some("x")).await;
    wait_for("the warning", || async {
        env.handle.warnings().list().len() == 1
    })
    .await;
    let warning = &env.handle.warnings().list()[0];
    assert_eq!(warning.object, "apps/v1 Deployment shop/web");
    assert_eq!((warning.kind, warning.line), ("other", 13));
    assert!(warning.warning.contains("ignored"), "{warning:?}");
    assert!(
        env.metrics_text()
            .contains("shoal_ingest_config_warnings{kind=\"other\"} 1")
    );
    env.write("dump.yaml", &vs("r", "x"));
    wait_for("no warning", || async {
        env.handle.warnings().list().is_empty()
    })
    .await;
    env.stop().await;
}

#[tokio::test]
async fn deleting_files_and_directories_removes_their_objects() {
    let files = [
        ("keep.yaml", &*vs("keep", "k")),
        (
            "a.yaml",
            &*format!("{}---\n{}", vs("a1", "x"), vs("a2", "y")),
        ),
    ];
    let env = Env::start(&files, &[]).await;
    env.wait_host("a2", Some("y")).await;
    std::fs::remove_file(env.path("a.yaml")).unwrap();
    env.wait_host("a1", None).await;
    env.wait_host("a2", None).await;

    // A directory created with files in it, then removed whole.
    env.write("team/sub/b.yaml", &vs("b", "z"));
    env.wait_host("b", Some("z")).await;
    std::fs::remove_dir_all(env.path("team")).unwrap();
    env.wait_host("b", None).await;
    // A directory moved in from elsewhere.
    let staged = tempfile::tempdir().unwrap();
    write(&staged.path().join("c.yaml"), &vs("c", "w"));
    std::fs::rename(staged.path(), env.path("moved")).unwrap_or_else(|_| {
        // Different file systems: copy instead.
        write(&env.path("moved/c.yaml"), &vs("c", "w"));
    });
    env.wait_host("c", Some("w")).await;
    assert_eq!(env.host("keep").await.as_deref(), Some("k"));
    env.stop().await;
}

#[tokio::test]
async fn same_key_in_two_files() {
    let env = Env::start(&[("a.yaml", &vs("r", "from-a"))], &[]).await;
    env.wait_host("r", Some("from-a")).await;
    env.write("b.yaml", &vs("r", "from-b"));
    env.wait_host("r", Some("from-b")).await;
    env.write("a.yaml", &vs("r", "from-a2"));
    env.wait_host("r", Some("from-a2")).await;
    std::fs::remove_file(env.path("a.yaml")).unwrap();
    env.wait_host("r", Some("from-b")).await;
    std::fs::remove_file(env.path("b.yaml")).unwrap();
    env.wait_host("r", None).await;
    env.stop().await;
}

#[tokio::test]
async fn editor_write_rename_replace() {
    let env = Env::start(&[("a.yaml", &vs("r", "one"))], &[]).await;
    env.wait_host("r", Some("one")).await;
    // Written beside, then renamed over the original (vim, kubectl, atomic writers).
    env.write(".a.yaml.tmp", &vs("r", "two"));
    std::fs::rename(env.path(".a.yaml.tmp"), env.path("a.yaml")).unwrap();
    env.wait_host("r", Some("two")).await;
    // Backup-rename style: the original moved away, a new file written in its place.
    std::fs::rename(env.path("a.yaml"), env.path("a.yaml~")).unwrap();
    env.write("a.yaml", &vs("r", "three"));
    env.wait_host("r", Some("three")).await;
    env.stop().await;
}

/// A ConfigMap mounted as kubelet writes it: visible symlinks through `..data` to a
/// hidden timestamped directory, swapped whole on an update. Only hidden entries change,
/// so the directory is rescanned; the files behind the new `..data` have new stamps.
#[tokio::test]
async fn a_configmap_mount_swapped_by_kubelet() {
    use std::os::unix::fs::symlink;
    let env = Env::start(
        &[
            ("mount/..2026_11_29_01/a.yaml", &vs("a", "one")),
            ("mount/..2026_11_29_01/b.yaml", &vs("b", "one")),
        ],
        &[],
    )
    .await;
    let mount = env.path("mount");
    symlink("..2026_11_29_01", mount.join("..data")).unwrap();
    symlink("..data/a.yaml", mount.join("a.yaml")).unwrap();
    symlink("..data/b.yaml", mount.join("b.yaml")).unwrap();
    env.wait_host("a", Some("one")).await;
    env.wait_host("b", Some("one")).await;

    env.write("mount/..2026_11_29_02/a.yaml", &vs("a", "two"));
    env.write("mount/..2026_11_29_02/b.yaml", &vs("b", "two"));
    symlink("..2026_11_29_02", mount.join("..data_tmp")).unwrap();
    std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
    std::fs::remove_dir_all(mount.join("..2026_11_29_01")).unwrap();
    env.wait_host("a", Some("two")).await;
    env.wait_host("b", Some("two")).await;
    env.stop().await;
}

#[tokio::test]
async fn unnamed_failure_at_start_keeps_kv_keys_until_it_parses() {
    let broken = format!("{}---\nkind: [\n", vs("r", "one"));
    let env = Env::start(
        &[("a.yaml", &broken)],
        &[(dir(CLUSTER), key("old"), "earlier")],
    )
    .await;
    wait_for("the start-up push", || async { !env.pushes().is_empty() }).await;
    assert_eq!(
        env.host("old").await.as_deref(),
        Some("earlier"),
        "may be the broken doc"
    );
    assert_eq!(env.host("r").await.as_deref(), Some("one"));
    env.write("a.yaml", &vs("r", "one"));
    env.wait_host("old", None).await;
    env.wait_push(&key("old")).await;
    env.stop().await;
}

fn pod_locality(objects: &BTreeMap<ConfigKey, Config>, name: &str) -> String {
    match &objects[&ConfigKey::new(Kind::Pod, "shop", name)].spec {
        Spec::Pod(pod) => pod.node_locality.clone(),
        other => panic!("not a Pod: {other:?}"),
    }
}

/// Nodes in the directory give their Pods a locality, as the Kubernetes registry does,
/// and a Node's edit (or removal) moves its Pods' endpoints with it.
#[tokio::test]
async fn pods_take_the_locality_of_their_node_in_the_directory() {
    let node = |name: &str, region: &str| {
        format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    topology.kubernetes.io/region: {region}\n    topology.kubernetes.io/zone: {region}-a\n"
        )
    };
    let pod = |name: &str, node: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n  nodeName: {node}\nstatus:\n  podIP: 10.0.0.1\n"
        )
    };
    let nodes = format!("{}---\n{}", node("n1", "r1"), node("n2", "r2"));
    let pods = format!("{}---\n{}", pod("p1", "n1"), pod("p2", "n2"));
    let env = Env::start(&[("nodes.yaml", &nodes), ("pods.yaml", &pods)], &[]).await;
    let objects = env.objects().await;
    assert_eq!(pod_locality(&objects, "p1"), "r1/r1-a");
    assert_eq!(pod_locality(&objects, "p2"), "r2/r2-a");

    env.write(
        "nodes.yaml",
        &format!("{}---\n{}", node("n1", "r3"), node("n2", "r2")),
    );
    wait_for("p1 to move to r3", || async {
        pod_locality(&env.objects().await, "p1") == "r3/r3-a"
    })
    .await;
    std::fs::remove_file(env.path("nodes.yaml")).unwrap();
    wait_for("the pods to lose their localities", || async {
        let objects = env.objects().await;
        pod_locality(&objects, "p1").is_empty() && pod_locality(&objects, "p2").is_empty()
    })
    .await;
    env.stop().await;
}

#[tokio::test]
async fn workloads_get_the_cluster_network() {
    let pods = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  namespace: shop\nstatus:\n  podIP: 10.0.0.1\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p2\n  namespace: shop\n  labels:\n    topology.istio.io/network: net-2\nstatus:\n  podIP: 10.0.0.2\n";
    let env = Env::start(&[("pods.yaml", pods)], &[]).await;
    let objects = env.objects().await;
    let network = |name: &str| {
        objects[&ConfigKey::new(Kind::Pod, "shop", name)]
            .meta
            .labels[crate::source::NETWORK_LABEL]
            .clone()
    };
    assert_eq!(network("p1"), "net-1");
    assert_eq!(network("p2"), "net-2");
    env.stop().await;
}

#[tokio::test]
async fn config_dir_removed_keeps_config_and_is_watched_again_when_back() {
    let env = Env::start_with(&[("a.yaml", &vs("r", "one"))], &[], |c| {
        c.resync_interval = Duration::from_secs(1);
    })
    .await;
    env.wait_host("r", Some("one")).await;
    std::fs::remove_dir_all(env.dir.path()).unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        env.host("r").await.as_deref(),
        Some("one"),
        "kept while the dir is gone"
    );

    env.write("a.yaml", &vs("r", "two"));
    env.wait_host("r", Some("two")).await;
    // Followed again after it came back.
    env.write("b.yaml", &vs("b", "new"));
    env.wait_host("b", Some("new")).await;
    env.stop().await;
}

#[tokio::test]
async fn startup_deletes_its_clusters_keys_of_the_format_before_sources() {
    let kv = Arc::new(MemoryConfigKv::default());
    let legacy = format!("{CLUSTER}.VirtualService.shop.r");
    let other_cluster = "c2.VirtualService.shop.r";
    for k in [legacy.as_str(), other_cluster] {
        kv.put(k, bytes::Bytes::from_static(b"{}")).await.unwrap();
    }
    let env = Env::start_on(&[("a.yaml", &vs("r", "one"))], kv, |_| {}).await;
    wait_for("the start-up push", || async { !env.pushes().is_empty() }).await;
    let live: Vec<String> = env
        .kv
        .entries()
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.value.is_some())
        .map(|e| e.key)
        .collect();
    assert!(!live.contains(&legacy), "{live:?}");
    assert!(live.iter().any(|k| k == other_cluster), "{live:?}");
    assert_eq!(env.host("r").await.as_deref(), Some("one"));
    env.stop().await;
}

#[tokio::test]
async fn the_mesh_config_is_read_in_the_system_namespace_only() {
    let mesh = |ns: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: istio\n  namespace: {ns}\ndata:\n  mesh: 'rootNamespace: mesh-root'\n"
        )
    };
    let (system, shop) = (mesh("mesh-system"), mesh("shop"));
    let env = Env::start_with(
        &[
            ("system.yaml", system.as_str()),
            ("shop.yaml", shop.as_str()),
        ],
        &[],
        |config| config.system_namespace = "mesh-system".into(),
    )
    .await;
    let mesh_configs: Vec<String> = env
        .objects()
        .await
        .into_keys()
        .filter(|k| k.kind == Kind::MeshConfig)
        .map(|k| k.to_string())
        .collect();
    assert_eq!(mesh_configs, ["MeshConfig mesh-system/istio"]);
    env.stop().await;
}
