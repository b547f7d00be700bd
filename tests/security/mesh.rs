//! One test's mesh: the all-in-one `shoal` with istiod's plug-in CA and a JWT issuer,
//! and workloads, each a real Envoy fed by an agent stand-in (named as such: Istio's
//! pilot-agent is not run here).
//!
//! ```text
//!  TestIssuer ─ token file ─► agent-stand-in ─ CreateCertificate (TLS, Bearer) ─┐
//!                              │  SDS (uds) ▲ ADS proxy (uds → TLS, Bearer) ────┼─► shoal :secure
//!                              ▼            │                                   │   (CA + ADS)
//!                            Envoy ─────────┘                 cacerts dir ──────┘
//! ```

use crate::pki::PluginCa;
use crate::support::envoy::Envoy;
use crate::support::free_port;
use crate::support::process::{Proc, wait_http_ok};
use shoal_test_support::jwt::TestIssuer;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The name agents verify on the edge's serving certificate (istiod's).
pub const ISTIOD_SAN: &str = "istiod.istio-system.svc";
pub const TRUST_DOMAIN: &str = "cluster.local";

pub struct Mesh {
    pub ca: PluginCa,
    /// The root agents pin: the plug-in root, or what istio-ca-root-cert publishes.
    pub root_pem: String,
    pub issuer: TestIssuer,
    pub shoal: Proc,
    pub secure_port: u16,
    pub http_port: u16,
    pub cacerts: PathBuf,
    // Last: the logs outlive the processes.
    pub dir: TempDir,
}

impl Mesh {
    /// Shoal on `config` (file name, YAML), its CA a fresh plug-in intermediate, tokens
    /// verified against the test issuer's JWKS file. Extra `args` go to `shoal`.
    pub async fn start(config: &[(&str, String)], args: &[&str]) -> Mesh {
        Self::start_with(config, args, None).await
    }

    /// As [`Mesh::start`], but with an API server (the kube-test-server, whose
    /// TokenReview must accept `issuer`'s tokens) instead of the plug-in files and the
    /// JWKS: the CA's root kept in `istio-ca-secret`, tokens reviewed, and the root
    /// published as istio-ca-root-cert, which agents then pin as pods mounting it do.
    pub async fn start_on_kubernetes(
        config: &[(&str, String)],
        api: &shoal_kube_test_server::TestApiServer,
        issuer: TestIssuer,
    ) -> Mesh {
        let mut mesh = Self::start_with(config, &[], Some((api, issuer))).await;
        mesh.eventually(
            "istio-ca-root-cert published in istio-system",
            Duration::from_secs(20),
            async || {
                api.get("configmaps", "istio-system", "istio-ca-root-cert")
                    .and_then(|cm| cm["data"]["root-cert.pem"].as_str().map(|_| ()))
                    .ok_or_else(|| "not yet".to_string())
            },
        )
        .await;
        let cm = api
            .get("configmaps", "istio-system", "istio-ca-root-cert")
            .unwrap();
        mesh.root_pem = cm["data"]["root-cert.pem"].as_str().unwrap().to_string();
        mesh
    }

    async fn start_with(
        config: &[(&str, String)],
        args: &[&str],
        kubernetes: Option<(&shoal_kube_test_server::TestApiServer, TestIssuer)>,
    ) -> Mesh {
        let dir = tempfile::Builder::new()
            .prefix("sec")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let config_dir = dir.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir config");
        for (file, yaml) in config {
            std::fs::write(config_dir.join(file), yaml).expect("write config");
        }
        let ca = PluginCa::new();
        let cacerts = dir.path().join("cacerts");
        ca.write_intermediate(&cacerts, "Shoal test intermediate 1");
        let (http_port, secure_port) = (free_port(), free_port());
        let mut argv: Vec<String> = vec![
            "--config-dir".into(),
            config_dir.display().to_string(),
            "--secure-xds-addr".into(),
            format!("127.0.0.1:{secure_port}"),
            "--http-addr".into(),
            format!("127.0.0.1:{http_port}"),
            "--ca-plugin-poll".into(),
            "1s".into(),
        ];
        let issuer = match kubernetes {
            None => {
                let issuer = TestIssuer::new("https://issuer.shoal.test");
                let jwks = dir.path().join("jwks.json");
                issuer.write_jwks(&jwks).expect("write JWKS");
                argv.extend([
                    "--ca-plugin-dir".into(),
                    cacerts.display().to_string(),
                    "--jwt-issuer".into(),
                    issuer.issuer().to_string(),
                    "--jwks-file".into(),
                    jwks.display().to_string(),
                ]);
                issuer
            }
            Some((api, issuer)) => {
                let kubeconfig = api.kubeconfig(dir.path()).expect("write kubeconfig");
                argv.extend([
                    // No plug-in files: the CA is read from (or created in) the Secrets.
                    "--ca-plugin-dir".into(),
                    dir.path().join("no-cacerts").display().to_string(),
                    "--kubeconfig".into(),
                    kubeconfig.display().to_string(),
                    "--ca-from-kubernetes".into(),
                    "--publish-root-cert".into(),
                ]);
                issuer
            }
        };
        argv.extend(args.iter().map(|a| a.to_string()));
        let mut shoal = Proc::spawn(
            "shoal",
            Path::new(env!("CARGO_BIN_EXE_shoal")),
            &argv,
            &[("RUST_LOG", "info".to_string())],
            dir.path(),
        );
        let ready = wait_http_ok(
            &format!("http://127.0.0.1:{http_port}/healthz/ready"),
            Duration::from_secs(30),
        )
        .await;
        if !ready {
            shoal.assert_running();
            panic!("shoal not ready within 30 s:\n{}", shoal.tail(40));
        }
        Mesh {
            root_pem: ca.root_pem.clone(),
            ca,
            issuer,
            shoal,
            secure_port,
            http_port,
            cacerts,
            dir,
        }
    }

    /// The edge's `/debug/syncz` (this host may read it).
    pub async fn syncz(&self) -> String {
        let url = format!("http://127.0.0.1:{}/debug/syncz", self.http_port);
        match reqwest::get(&url).await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(e) => format!("GET {url}: {e}"),
        }
    }

    /// The root agents pin, as `XDS_ROOT_CA` (the operator's copy of the plug-in root, or
    /// istio-ca-root-cert's).
    ///
    /// Written whole under another name and renamed over it: an agent started just before
    /// may be reading it (a plain write truncated it under that agent, which then found no
    /// certificate in it and exited).
    pub fn root_file(&self) -> PathBuf {
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let path = self.dir.path().join("root-cert.pem");
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self.dir.path().join(format!(".root-cert.pem.{n}"));
        std::fs::write(&tmp, &self.root_pem).expect("write root");
        std::fs::rename(&tmp, &path).expect("rename root");
        path
    }

    /// An agent stand-in for `namespace/service_account`, with `token` in its token file,
    /// working under `<dir>/<name>` (its sockets there), asking for `secret_ttl`.
    pub fn agent(&self, name: &str, namespace: &str, sa: &str, secret_ttl: &str) -> Agent {
        let shoal = format!("127.0.0.1:{}", self.secure_port);
        self.agent_at(name, namespace, sa, secret_ttl, &shoal, None)
    }

    /// As [`Mesh::agent`], its `discoveryAddress` `discovery` (the injector's
    /// `proxy.istio.io/config` picks the control plane) and its `CA_ADDR` `ca` (the
    /// injector sets it; without it the agent asks the discovery address).
    pub fn agent_at(
        &self,
        name: &str,
        namespace: &str,
        sa: &str,
        secret_ttl: &str,
        discovery: &str,
        ca: Option<&str>,
    ) -> Agent {
        let work = self.dir.path().join(name);
        std::fs::create_dir_all(&work).expect("mkdir agent");
        let token = work.join("istio-token");
        std::fs::write(&token, self.issuer.istio_token(namespace, sa)).expect("write token");
        let root = self.root_file();
        let mut env = vec![
            (
                "PROXY_CONFIG",
                format!(r#"{{"discoveryAddress": "{discovery}"}}"#),
            ),
            ("ISTIOD_SAN", ISTIOD_SAN.into()),
            ("XDS_ROOT_CA", root.display().to_string()),
            ("CA_ROOT_CA", root.display().to_string()),
            ("POD_NAMESPACE", namespace.into()),
            ("SERVICE_ACCOUNT", sa.into()),
            ("TRUST_DOMAIN", TRUST_DOMAIN.into()),
            ("SECRET_TTL", secret_ttl.into()),
            ("RUST_LOG", "info".into()),
        ];
        if let Some(ca) = ca {
            env.push(("CA_ADDR", ca.into()));
        }
        let proc = Proc::spawn(
            &format!("{name}-agent"),
            &crate::support::workspace_binary("agent-stand-in"),
            &[
                "--work-dir".into(),
                work.display().to_string(),
                "--token-path".into(),
                token.display().to_string(),
            ],
            &env,
            self.dir.path(),
        );
        Agent { proc, work }
    }

    /// A real Envoy for `node`, fed by `agent` (ADS and SDS through its sockets), its
    /// admin on a free port; no static listeners.
    pub fn envoy(&self, name: &str, node: &crate::bootstrap::Node<'_>, agent: &Agent) -> Envoy {
        let admin = free_port();
        Envoy::start(
            name,
            &crate::bootstrap::bootstrap(node, agent, admin, None),
            admin,
            self.dir.path(),
        )
    }

    /// Polls `check` until it passes or `timeout`; panics with its last error and logs.
    pub async fn eventually(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl AsyncFnMut() -> Result<(), String>,
    ) {
        let deadline = Instant::now() + timeout;
        loop {
            match check().await {
                Ok(()) => return,
                Err(e) if Instant::now() > deadline => {
                    panic!(
                        "{what}: not within {timeout:?}: {e}\n--- shoal ---\n{}",
                        self.shoal.tail(40)
                    )
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
    }
}

pub fn spiffe(namespace: &str, sa: &str) -> String {
    format!("spiffe://{TRUST_DOMAIN}/ns/{namespace}/sa/{sa}")
}

pub struct Agent {
    pub proc: Proc,
    pub work: PathBuf,
}

impl Agent {
    pub fn xds_socket(&self) -> PathBuf {
        self.work.join("etc/istio/proxy/XDS")
    }

    pub fn sds_socket(&self) -> PathBuf {
        self.work.join("var/run/secrets/workload-spiffe-uds/socket")
    }
}
