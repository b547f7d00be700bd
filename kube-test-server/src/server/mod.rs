//! [`TestApiServer`]: the handle tests hold. It owns the listener task and exposes the
//! store (writes go through the hub, so open watches see them) and the fault controls.

mod kubeconfig;
mod listener;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tokio::task::JoinHandle;

use crate::hub::Hub;
use crate::resource::{GroupResource, Registry, ResourceType, shoal_resources};
use crate::selector::Selection;
use crate::store::{Change, DEFAULT_HISTORY_CAPACITY, ObjectKey, Result, Store};

/// How often a watch that allows bookmarks gets one, unless told otherwise.
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(5);
/// How many changes a watch may have queued before it is ended for not reading.
pub const DEFAULT_WATCH_QUEUE_CAPACITY: usize = 1_000;

/// Settings for [`TestApiServer::start_with`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// The resource types served; [`shoal_resources`] by default.
    pub registry: Registry,
    /// Changes kept for watch replay and paginated lists.
    pub history_capacity: usize,
    pub bookmark_interval: Duration,
    pub watch_queue_capacity: usize,
    /// An empty list says `"items": null` rather than `[]`, as some servers answer
    /// (kube-apiserver before 1.5.3 for every kind, metadata-only lists, k3s for some
    /// kinds: kube-rs#1199, #1492). Off by default: a current kube-apiserver writes `[]`.
    pub null_empty_lists: bool,
    /// The issuer whose tokens TokenReview accepts; without one every review is refused.
    pub service_account_issuer: Option<crate::ServiceAccountIssuer>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            registry: shoal_resources(),
            history_capacity: DEFAULT_HISTORY_CAPACITY,
            bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
            watch_queue_capacity: DEFAULT_WATCH_QUEUE_CAPACITY,
            null_empty_lists: false,
            service_account_issuer: None,
        }
    }
}

/// Every route: the resources, and TokenReview.
fn app(hub: &Arc<Hub>, issuer: &Option<Arc<crate::ServiceAccountIssuer>>) -> axum::Router {
    crate::http::router(hub.clone()).merge(crate::token_review::router(issuer.clone()))
}

/// A running test API server on `127.0.0.1`. Dropping it stops the server.
pub struct TestApiServer {
    hub: Arc<Hub>,
    address: SocketAddr,
    listener: Mutex<Option<JoinHandle<()>>>,
    issuer: Option<Arc<crate::ServiceAccountIssuer>>,
}

impl TestApiServer {
    /// Starts a server with the default settings on a free port.
    pub async fn start() -> io::Result<Self> {
        Self::start_with(Settings::default()).await
    }

    pub async fn start_with(settings: Settings) -> io::Result<Self> {
        let store = Store::new(settings.registry, settings.history_capacity);
        let hub = Arc::new(
            Hub::new(
                store,
                settings.bookmark_interval,
                settings.watch_queue_capacity,
            )
            .with_null_empty_lists(settings.null_empty_lists),
        );
        let tcp = listener::bind((Ipv4Addr::LOCALHOST, 0).into())?;
        let address = tcp.local_addr()?;
        let issuer = settings.service_account_issuer.map(Arc::new);
        let task = listener::serve(tcp, app(&hub, &issuer));
        Ok(Self {
            hub,
            address,
            listener: Mutex::new(Some(task)),
            issuer,
        })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A kubeconfig for this server (no auth), as YAML.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::yaml(&self.url())
    }

    /// Writes [`Self::kubeconfig_yaml`] to `dir/kubeconfig` and returns that path.
    pub fn kubeconfig(&self, dir: &Path) -> io::Result<PathBuf> {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, self.kubeconfig_yaml())?;
        Ok(path)
    }

    /// Serves one more resource type (or replaces one with the same group and plural).
    pub fn register(&self, resource: ResourceType) {
        self.hub.register(resource);
    }

    /// Creates an object; `kind` and `apiVersion` may be left out. Returns it as stored.
    pub fn create(&self, resource: impl Into<GroupResource>, object: Value) -> Result<Value> {
        let resource = resource.into();
        written(self.hub.write(|store| store.create(&resource, object)))
    }

    /// Replaces an object; a `metadata.resourceVersion` in it must be the current one.
    pub fn replace(&self, resource: impl Into<GroupResource>, object: Value) -> Result<Value> {
        let resource = resource.into();
        written(self.hub.write(|store| store.replace(&resource, object)))
    }

    /// Creates the object or replaces it, whatever its current version.
    pub fn apply(&self, resource: impl Into<GroupResource>, object: Value) -> Result<Value> {
        let resource = resource.into();
        written(self.hub.write(|store| store.apply(&resource, object)))
    }

    /// Deletes an object (`namespace` is "" for cluster-scoped ones); returns its last state.
    pub fn delete(
        &self,
        resource: impl Into<GroupResource>,
        namespace: &str,
        name: &str,
    ) -> Result<Value> {
        let (resource, key) = (resource.into(), ObjectKey::new(namespace, name));
        written(self.hub.write(|store| store.delete(&resource, &key)))
    }

    pub fn get(
        &self,
        resource: impl Into<GroupResource>,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let (resource, key) = (resource.into(), ObjectKey::new(namespace, name));
        self.hub
            .read(|store| store.get(&resource, &key))
            .map(|object| (*object).clone())
    }

    /// Every current object of a resource, in (namespace, name) order.
    pub fn objects(&self, resource: impl Into<GroupResource>) -> Vec<Value> {
        let resource = resource.into();
        let objects = self
            .hub
            .read(|store| store.select(&resource, &Selection::default()));
        objects.iter().map(|object| (**object).clone()).collect()
    }

    /// The current global resourceVersion (the revision of the last write).
    pub fn revision(&self) -> u64 {
        self.hub.read(Store::revision)
    }

    /// Drops the history: a watch resuming from any earlier resourceVersion gets the
    /// 410 Expired ERROR event, and continue tokens of earlier lists expire.
    pub fn compact(&self) {
        self.hub.compact();
    }

    /// Ends every open watch stream, as a proxy or an apiserver restart does; clients
    /// resume from the last resourceVersion they read.
    pub fn drop_watches(&self) {
        self.hub.drop_watches();
    }

    /// How many watch streams are open now.
    pub fn open_watches(&self) -> usize {
        self.hub.open_watches()
    }

    /// Changes the bookmark interval; open watches take it after their next bookmark.
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.hub.set_bookmark_interval(interval);
    }

    /// Stops listening and drops every connection, waits `pause`, then listens again on
    /// the same port with the same state (objects, revision, history).
    pub async fn restart(&self, pause: Duration) -> io::Result<()> {
        self.stop().await;
        tokio::time::sleep(pause).await;
        let tcp = listener::bind(self.address)?;
        let task = listener::serve(tcp, app(&self.hub, &self.issuer));
        *self.lock_listener() = Some(task);
        Ok(())
    }

    /// Stops listening and drops every connection (and so every watch).
    async fn stop(&self) {
        let task = self.lock_listener().take();
        if let Some(task) = task {
            task.abort();
            // Awaited so the port is free again before a restart binds it.
            let _cancelled = task.await;
        }
        self.hub.drop_watches();
    }

    fn lock_listener(&self) -> std::sync::MutexGuard<'_, Option<JoinHandle<()>>> {
        self.listener.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The object as a write stored it.
fn written(change: Result<Arc<Change>>) -> Result<Value> {
    change.map(|change| (*change.object).clone())
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        if let Some(task) = self.lock_listener().take() {
            task.abort();
        }
    }
}
