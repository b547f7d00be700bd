//! The all-in-one `shoal` serving the test mesh to one real Envoy that ACKed every type:
//! what the Prometheus and `shoal status` tests start from.

use crate::support::envoy::{Envoy, XdsApi, bootstrap};
use crate::support::process::{Proc, wait_http_ok};
use crate::support::{free_port, mesh, tiers};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

pub(crate) struct Served {
    pub dir: TempDir,
    /// The mesh's YAML, which `shoal` watches.
    pub config_dir: PathBuf,
    /// `shoal`'s `--http-addr` port, and its URL.
    pub http: u16,
    pub admin: String,
    /// `shoal`'s plaintext xDS port (where CSDS answers too).
    pub xds: u16,
    shoal: Proc,
    envoy: Envoy,
}

impl Served {
    pub async fn start() -> Served {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_dir = dir.path().join("config");
        // No traffic flows: the backends' ports need not answer.
        mesh::write(&config_dir, free_port(), free_port(), free_port());
        let (http, xds) = (free_port(), free_port());
        let shoal = start_shoal(&config_dir, http, xds, dir.path()).await;
        let admin = format!("http://127.0.0.1:{http}");
        let envoy_admin = free_port();
        let node = bootstrap(
            XdsApi::Sotw,
            "127.0.0.1",
            mesh::NAMESPACE,
            "productpage",
            &[xds],
            envoy_admin,
        );
        let envoy = Envoy::start("envoy", &node, envoy_admin, dir.path());
        let polled = admin.as_str();
        eventually("Envoy ACKs every type", SYNC, || async move {
            let states = type_states(polled).await;
            let synced = states.iter().all(|(_, state)| state["state"] == "SYNCED");
            (!states.is_empty() && synced).then_some(())
        })
        .await;
        Served {
            dir,
            config_dir,
            http,
            admin,
            xds,
            shoal,
            envoy,
        }
    }

    /// Envoy's own admin `/config_dump?include_eds`.
    pub async fn envoy_config_dump(&self) -> Value {
        reqwest::get(self.envoy.admin("/config_dump?include_eds"))
            .await
            .expect("Envoy's admin")
            .json()
            .await
            .expect("JSON")
    }

    /// Stops Envoy, then `shoal`, which must still be running.
    pub fn stop(mut self) {
        self.envoy.proc.stop(Duration::from_secs(5));
        self.shoal.assert_running();
        self.shoal.stop(Duration::from_secs(5));
    }
}

/// How long shoal, Envoy and Prometheus get to reach each state.
pub(crate) const SYNC: Duration = Duration::from_secs(30);

/// The all-in-one on `config_dir`: plaintext ADS on `xds`, admin (`/metrics`) on `http`.
pub(crate) async fn start_shoal(config_dir: &Path, http: u16, xds: u16, dir: &Path) -> Proc {
    let shoal = tiers::shoal(config_dir, xds, http, &[], &[], dir);
    let ready = format!("http://127.0.0.1:{http}/healthz/ready");
    assert!(wait_http_ok(&ready, SYNC).await, "shoal not ready");
    shoal
}

/// The test mesh's VirtualService with a first route Envoy cannot load.
pub(crate) fn virtual_service_envoy_rejects() -> String {
    let route = format!(
        "  - name: greek\n    match:\n    - uri:\n        regex: \"{REGEX_ENVOY_REJECTS}\"\n    \
         route:\n    - destination:\n        host: reviews\n        subset: v2\n"
    );
    mesh::virtual_service(80).replace("  http:\n", &format!("  http:\n{route}"))
}

/// A regex whose RE2 program (124) is over Envoy's default limit (100): Envoy NACKs the
/// routes that carry it. Istio's validation accepts it (istiod's bootstrap raises the
/// limit; the test's Envoy keeps the default).
const REGEX_ENVOY_REJECTS: &str = "/(alpha|beta|gamma|delta|epsilon|zeta|eta|theta|iota|kappa|lambda|mu|nu|xi|omicron|pi|rho|sigma|tau|upsilon|phi|chi|psi|omega)+/[0-9]{3,9}";

/// Each xDS type of the one proxy in the edge's `/debug/syncz`, with its state.
pub(crate) async fn type_states(admin: &str) -> Vec<(String, Value)> {
    let Ok(response) = reqwest::get(format!("{admin}/debug/syncz")).await else {
        return Vec::new();
    };
    let syncz: Value = response.json().await.unwrap_or_default();
    syncz[0]["types"]
        .as_object()
        .map(|types| types.iter().map(|(t, s)| (t.clone(), s.clone())).collect())
        .unwrap_or_default()
}

/// Polls `check` every 200 ms until it gives a value; panics naming `what` after `timeout`.
pub(crate) async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
