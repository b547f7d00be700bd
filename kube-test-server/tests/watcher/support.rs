//! Clients and event helpers shared by the watcher tests.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Service;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Config, ResourceExt};
use serde_json::{Value, json};
use shoal_kube_test_server::{Settings, TestApiServer};

/// How long a test waits for one event before failing.
const EVENT_TIMEOUT: Duration = Duration::from_secs(3);

pub type Events<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// A server whose watches get a bookmark every 50 ms.
pub async fn server() -> TestApiServer {
    let settings = Settings {
        bookmark_interval: Duration::from_millis(50),
        ..Settings::default()
    };
    TestApiServer::start_with(settings).await.unwrap()
}

/// A client configured from the server's kubeconfig file, as a deployment would be.
pub async fn client(server: &TestApiServer) -> Client {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = Kubeconfig::read_from(server.kubeconfig(dir.path()).unwrap()).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

pub fn service(namespace: &str, name: &str, app: &str) -> Value {
    json!({
        "metadata": {"namespace": namespace, "name": name, "labels": {"app": app}},
        "spec": {"ports": [{"port": 80}]},
    })
}

pub fn watch_services(api: Api<Service>, config: watcher::Config) -> Events<Service> {
    watcher::watcher(api, config).boxed()
}

/// The next event as a line: `Init`, `InitApply ns/name`, `InitDone`, `Apply ns/name`,
/// `Delete ns/name`, or `Error <code>` for a watch ERROR event.
pub async fn next<K: kube::Resource>(events: &mut Events<K>) -> String {
    let event = tokio::time::timeout(EVENT_TIMEOUT, events.next())
        .await
        .expect("no watcher event in time")
        .expect("the watcher stream ended");
    describe(event)
}

/// The next `count` events, as [`next`] describes them.
pub async fn take<K: kube::Resource>(events: &mut Events<K>, count: usize) -> Vec<String> {
    let mut taken = Vec::with_capacity(count);
    for _ in 0..count {
        taken.push(next(events).await);
    }
    taken
}

/// Asserts nothing more arrives within a short while (no duplicate, no stray event).
pub async fn assert_quiet<K: kube::Resource>(events: &mut Events<K>) {
    let more = tokio::time::timeout(Duration::from_millis(200), events.next()).await;
    if let Ok(Some(event)) = more {
        panic!("unexpected event: {}", describe(event));
    }
}

pub fn describe<K: kube::Resource>(event: Result<Event<K>, watcher::Error>) -> String {
    let key = |object: &K| {
        format!(
            "{}/{}",
            object.namespace().unwrap_or_default(),
            object.name_any()
        )
    };
    match event {
        Ok(Event::Init) => "Init".into(),
        Ok(Event::InitApply(object)) => format!("InitApply {}", key(&object)),
        Ok(Event::InitDone) => "InitDone".into(),
        Ok(Event::Apply(object)) => format!("Apply {}", key(&object)),
        Ok(Event::Delete(object)) => format!("Delete {}", key(&object)),
        Err(watcher::Error::WatchError(status)) => format!("Error {}", status.code),
        Err(other) => format!("Failed {other}"),
    }
}

/// Folds watcher events into the state they describe: key → resourceVersion.
#[derive(Default)]
pub struct Folded {
    pub state: BTreeMap<String, String>,
    relisting: Option<BTreeMap<String, String>>,
    pub relists: usize,
}

impl Folded {
    pub fn apply<K: kube::Resource>(&mut self, event: &Event<K>) {
        let key = |object: &K| {
            format!(
                "{}/{}",
                object.namespace().unwrap_or_default(),
                object.name_any()
            )
        };
        let version = |object: &K| object.resource_version().unwrap_or_default();
        match event {
            Event::Init => self.relisting = Some(BTreeMap::new()),
            Event::InitApply(object) => {
                let relisting = self.relisting.as_mut().expect("InitApply before Init");
                relisting.insert(key(object), version(object));
            }
            Event::InitDone => {
                self.state = self.relisting.take().expect("InitDone before Init");
                self.relists += 1;
            }
            Event::Apply(object) => {
                self.state.insert(key(object), version(object));
            }
            Event::Delete(object) => {
                self.state.remove(&key(object));
            }
        }
    }
}

/// The server's objects of a resource as [`Folded`] keeps them.
pub fn server_state(server: &TestApiServer, resource: &str) -> BTreeMap<String, String> {
    server
        .objects(resource)
        .iter()
        .map(|object| {
            let metadata = &object["metadata"];
            let namespace = metadata["namespace"].as_str().unwrap_or_default();
            let key = format!("{namespace}/{}", metadata["name"].as_str().unwrap());
            (
                key,
                metadata["resourceVersion"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
