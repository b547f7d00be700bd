//! One test's mesh: the all-in-one `shoal` serving a config directory, and one real
//! Envoy bootstrapped from it as a sidecar of pod `client` in [`CLIENT_NS`] with
//! `INTERCEPTION_MODE: NONE`.
//!
//! ```text
//!  test ── write YAML ──► config dir ──watch──► shoal ──ADS (SotW or Delta)──► Envoy
//!  test ── GET http://127.0.0.1:<service port>/  Host: <service FQDN> ──► Envoy ──► backends
//! ```
//! Without interception Shoal gives Envoy an outbound listener on the proxy's own IP
//! (127.0.0.1) at each service port, so a client dials that port and names the
//! service in `Host`, as an application dials `reviews:9080` in a cluster.

pub mod reply;
mod shoal;
pub mod workloads;

use crate::support::envoy::{Envoy, Node, XdsApi, bootstrap_node};
use crate::support::free_port;
use crate::support::process::Proc;
pub use reply::Reply;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;
pub use workloads::{CLIENT_NS, fqdn};

/// How long a config change may take to show in Envoy's routing. Shoal applies a file
/// edit within about 200 ms; the rest is slack for a loaded 2-core machine.
const CONFIG_DEADLINE: Duration = Duration::from_secs(30);

/// What the test's Envoy is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The sidecar of pod `client` in [`CLIENT_NS`].
    Sidecar,
    /// An ingress gateway: a router in [`GATEWAY_NS`] labelled `istio: ingressgateway`.
    IngressGateway,
}

/// Where the ingress gateway runs (and its TLS Secrets are).
pub const GATEWAY_NS: &str = "istio-system";
/// The ingress gateway pod's address (it listens on every address).
pub const GATEWAY_IP: &str = "127.0.0.2";

impl Role {
    fn node(self) -> Node<'static> {
        match self {
            Role::Sidecar => Node {
                kind: "sidecar",
                ip: "127.0.0.1",
                namespace: CLIENT_NS,
                pod: "client",
                labels: "{app: client}",
            },
            // Its own pod address, so that the backends' endpoints (127.0.0.1) are not
            // its service targets: a Service selecting it translates its Gateway ports.
            Role::IngressGateway => Node {
                kind: "router",
                ip: GATEWAY_IP,
                namespace: GATEWAY_NS,
                pod: "istio-ingressgateway",
                labels: "{istio: ingressgateway, app: istio-ingressgateway}",
            },
        }
    }
}

pub struct Mesh {
    config_dir: PathBuf,
    pub envoy: Envoy,
    shoal: Proc,
    client: reqwest::Client,
    // Last: the logs outlive the processes.
    _dir: TempDir,
}

impl Mesh {
    /// Shoal on an empty config directory (but for the client's Namespace), and Envoy
    /// speaking `api` to it as the sidecar of pod `client`.
    pub async fn start(api: XdsApi) -> Mesh {
        Mesh::start_as(api, Role::Sidecar).await
    }

    /// [`Mesh::start`] with Envoy in `role`.
    pub async fn start_as(api: XdsApi, role: Role) -> Mesh {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_dir = dir.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir config");
        let node = role.node();
        for ns in [CLIENT_NS, node.namespace] {
            std::fs::write(
                config_dir.join(format!("{ns}-namespace.yaml")),
                workloads::namespace(ns),
            )
            .expect("write namespace");
        }
        let shoal = shoal::start(&config_dir, dir.path()).await;
        let admin_port = free_port();
        let envoy = Envoy::start(
            "envoy",
            &bootstrap_node(api, &node, &[shoal.xds_port], admin_port),
            admin_port,
            dir.path(),
        );
        Mesh {
            config_dir,
            envoy,
            shoal: shoal.proc,
            client: client(),
            _dir: dir,
        }
    }

    /// Writes (or replaces) `file` in the config directory; Shoal picks it up.
    pub fn write(&self, file: &str, yaml: &str) {
        let path = self.config_dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        write_whole(&path, yaml);
    }

    /// Deletes `file` from the config directory; Shoal drops its objects.
    pub fn remove(&self, file: &str) {
        std::fs::remove_file(self.config_dir.join(file)).expect("remove config");
    }

    /// A request to `host` through Envoy's outbound listener on `port`.
    pub fn request(
        &self,
        method: reqwest::Method,
        port: u16,
        host: &str,
        path: &str,
    ) -> reqwest::RequestBuilder {
        self.client
            .request(method, format!("http://127.0.0.1:{port}{path}"))
            .header("host", host)
    }

    /// `GET path` to `host` through Envoy's listener on `port`.
    pub async fn get(&self, port: u16, host: &str, path: &str) -> Result<Reply, String> {
        Reply::fetch(self.request(reqwest::Method::GET, port, host, path)).await
    }

    /// Sends `request` (from [`Mesh::request`]).
    pub async fn send(&self, request: reqwest::RequestBuilder) -> Result<Reply, String> {
        Reply::fetch(request).await
    }

    /// [`Mesh::send`] where no answer at all fails the test.
    pub async fn must_send(&self, request: reqwest::RequestBuilder) -> Reply {
        match Reply::fetch(request).await {
            Ok(r) => r,
            Err(e) => panic!("{e}\n{}", self.logs()),
        }
    }

    /// [`Mesh::get`] where no answer at all fails the test.
    pub async fn must_get(&self, port: u16, host: &str, path: &str) -> Reply {
        self.must_send(self.request(reqwest::Method::GET, port, host, path))
            .await
    }

    /// Polls `check` until it passes; panics after [`CONFIG_DEADLINE`] with `what` was
    /// awaited, the last failure, and the logs.
    pub async fn eventually(&self, what: &str, mut check: impl AsyncFnMut() -> Result<(), String>) {
        let started = Instant::now();
        loop {
            let last = match check().await {
                Ok(()) => return,
                Err(e) => e,
            };
            assert!(
                started.elapsed() < CONFIG_DEADLINE,
                "waited {CONFIG_DEADLINE:?} for {what}; last: {last}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Writes `file` and waits until `check` passes.
    pub async fn apply(
        &self,
        file: &str,
        yaml: &str,
        what: &str,
        check: impl AsyncFnMut() -> Result<(), String>,
    ) {
        self.write(file, yaml);
        self.eventually(what, check).await;
    }

    /// The tails of Envoy's and Shoal's logs, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "---- envoy log (last 40 lines) ----\n{}\n---- shoal log (last 40 lines) ----\n{}",
            self.envoy.proc.tail(40),
            self.shoal.tail(40)
        )
    }

    /// A counter or gauge from Envoy's `/stats` (0 when absent).
    pub async fn stat(&self, name: &str) -> u64 {
        self.envoy.stat(name).await
    }

    /// Envoy's `/config_dump`, for the few checks traffic cannot make safely.
    pub async fn config_dump(&self, resource: &str) -> String {
        let url = self
            .envoy
            .admin(&format!("/config_dump?resource={resource}"));
        match reqwest::get(&url).await {
            Ok(resp) => resp.text().await.unwrap_or_default(),
            Err(e) => format!("config_dump unavailable: {e}"),
        }
    }

    /// Ends the test: Shoal must still be running and Envoy must have accepted every
    /// config it was sent; both are then stopped.
    pub async fn finish(mut self) {
        self.shoal.assert_running();
        let stats = reqwest::get(self.envoy.admin("/stats?filter=update_rejected"))
            .await
            .expect("envoy stats")
            .text()
            .await
            .expect("stats body");
        let rejected: Vec<&str> = stats.lines().filter(|l| !l.ends_with(": 0")).collect();
        assert!(
            rejected.is_empty(),
            "Envoy rejected config: {rejected:?}\n{}",
            self.logs()
        );
        self.envoy.proc.stop(Duration::from_secs(2));
        self.shoal.stop(Duration::from_secs(5));
    }
}

/// Each request on a new connection: after a config change a kept-alive connection
/// would go on through a listener Envoy is draining, and show the old config.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// Writes through a temporary file and a rename, so the watcher never reads half a file.
fn write_whole(path: &Path, contents: &str) {
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, contents).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config");
}

/// `Ok` when `ok`, else `Err` with what was seen instead (for [`Mesh::eventually`]).
pub fn expect(ok: bool, seen: impl std::fmt::Display) -> Result<(), String> {
    if ok { Ok(()) } else { Err(seen.to_string()) }
}
