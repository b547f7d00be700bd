//! One test's mesh: the all-in-one `shoal` on a config directory, the two grpcio
//! servers, and the grpcio client whose calls the test reads from its output.
//!
//! A secure mesh ([`Mesh::start_secure`]) gives Shoal a plug-in CA made with the test
//! PKI (`tests/security/pki.rs`), writes each workload a certificate from that CA with
//! its SPIFFE ID and names them in its bootstrap's `certificate_providers` (as Istio's
//! agent does), and runs the servers as xDS servers with xDS credentials, every
//! workload labelled `security.istio.io/tlsMode: istio`.

use crate::config::{self, Backend, CertFiles};
use crate::pki::PluginCa;
use crate::support::process::{Proc, wait_http_ok};
use crate::support::{free_port, tool, workspace_root};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// How long a step may take: a client's first xDS exchange, or a config change reaching
/// it. Generous: Python and Shoal share a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(90);

pub struct Mesh {
    config_dir: PathBuf,
    /// The test's files and logs.
    dir_path: PathBuf,
    xds_port: u16,
    /// The node IDs whose xDS must stay un-NACKed: the client's, and the servers' when
    /// they are xDS servers.
    nodes: Vec<String>,
    /// The test's CA, in a secure mesh.
    ca: Option<PluginCa>,
    shoal: Proc,
    /// Shoal's admin port (`/debug/syncz`).
    admin_port: u16,
    servers: Vec<Proc>,
    /// The servers' ports, in order.
    ports: Vec<u16>,
    client: Option<Proc>,
    // Last: the logs outlive the processes.
    _dir: TempDir,
}

impl Mesh {
    /// Shoal serving Service `echo` (two servers) and its DestinationRule, and the
    /// client calling `xds:///echo.<ns>.svc.cluster.local:<port>` with `metadata` (gRPC
    /// request headers).
    pub async fn start(metadata: &[(&str, &str)]) -> Mesh {
        Self::start_with(metadata, &[], false).await
    }

    /// A secure mesh (see the module's docs) with the `config` files written before
    /// Shoal starts.
    pub async fn start_secure(config: &[(&str, &str)]) -> Mesh {
        Self::start_with(&[], config, true).await
    }

    async fn start_with(metadata: &[(&str, &str)], config: &[(&str, &str)], secure: bool) -> Mesh {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_dir = dir.path().join("config");
        std::fs::create_dir_all(&config_dir).expect("mkdir config");
        let service_port = free_port();
        let backends = [
            Backend {
                pod: "echo-v1",
                version: "v1",
                port: free_port(),
            },
            Backend {
                pod: "echo-v2",
                version: "v2",
                port: free_port(),
            },
        ];
        write_whole(
            &config_dir.join("echo.yaml"),
            &config::service(service_port, &backends, secure),
        );
        write_whole(
            &config_dir.join("echo-rule.yaml"),
            &config::destination_rule(),
        );
        for (file, yaml) in config {
            write_whole(&config_dir.join(file), yaml);
        }
        let ca = secure.then(PluginCa::new);
        let mut shoal_args = Vec::new();
        if let Some(ca) = &ca {
            // Shoal is the mesh's CA: the workloads' certificates chain to its root.
            let cacerts = dir.path().join("cacerts");
            ca.write_intermediate(&cacerts, "Shoal test intermediate");
            shoal_args.extend(["--ca-plugin-dir".into(), cacerts.display().to_string()]);
        }
        let (shoal, xds_port, admin_port) = start_shoal(&config_dir, dir.path(), &shoal_args).await;
        let mut mesh = Mesh {
            config_dir,
            dir_path: dir.path().to_path_buf(),
            xds_port,
            nodes: vec![config::node_id("client")],
            ca,
            shoal,
            admin_port,
            servers: Vec::new(),
            ports: backends.iter().map(|b| b.port).collect(),
            client: None,
            _dir: dir,
        };
        for b in &backends {
            let mut args = vec![b.port.to_string(), b.pod.to_string()];
            let mut envs = Vec::new();
            if secure {
                args.push("--xds".into());
                let labels = [("app", "echo"), ("version", b.version), config::TLS_MODE];
                let bootstrap = mesh.bootstrap(b.pod, &labels, config::SERVER_ACCOUNT);
                envs.push(("GRPC_XDS_BOOTSTRAP", bootstrap));
                mesh.nodes.push(config::node_id(b.pod));
            }
            let mut server = python(b.pod, "server.py", &args, &envs, &mesh.dir_path);
            wait_for_log(&mut server, "serving").await;
            mesh.servers.push(server);
        }
        let target = format!("xds:///{}:{service_port}", config::fqdn("echo"));
        let mut args = vec![target];
        args.extend(metadata.iter().map(|(k, v)| format!("{k}={v}")));
        let labels: &[(&str, &str)] = if secure {
            args.insert(0, "--xds-creds".into());
            &[("app", "client"), config::TLS_MODE]
        } else {
            &[]
        };
        let bootstrap = mesh.bootstrap("client", labels, config::CLIENT_ACCOUNT);
        mesh.client = Some(python(
            "client",
            "client.py",
            &args,
            &[("GRPC_XDS_BOOTSTRAP", bootstrap)],
            &mesh.dir_path,
        ));
        mesh
    }

    /// Writes `pod`'s bootstrap (and in a secure mesh its certificate as `account`);
    /// returns its path.
    fn bootstrap(&self, pod: &str, labels: &[(&str, &str)], account: &str) -> String {
        let certs = self.ca.as_ref().map(|ca| {
            let dir = self.dir_path.join("certs").join(pod);
            std::fs::create_dir_all(&dir).expect("mkdir certs");
            let (cert, key) = ca.client(&config::spiffe(account));
            let files = CertFiles {
                cert_chain: dir.join("cert-chain.pem").display().to_string(),
                key: dir.join("key.pem").display().to_string(),
                root: dir.join("root-cert.pem").display().to_string(),
            };
            std::fs::write(&files.cert_chain, cert).expect("write cert");
            std::fs::write(&files.key, key).expect("write key");
            std::fs::write(&files.root, &ca.root_pem).expect("write root");
            files
        });
        let path = self.dir_path.join(format!("{pod}-bootstrap.json"));
        let text = config::grpc_bootstrap(self.xds_port, pod, labels, certs.as_ref());
        std::fs::write(&path, text).expect("write bootstrap");
        path.display().to_string()
    }

    /// A second client, without xDS, with insecure credentials, dialing `target`
    /// (`host:port`) directly; [`calls_of`] reads its calls.
    pub fn plain_client(&self, name: &str, target: &str) -> Proc {
        python(
            name,
            "client.py",
            &[target.to_string()],
            &[],
            &self.dir_path,
        )
    }

    /// The servers' ports, in order (echo-v1, echo-v2).
    pub fn server_ports(&self) -> &[u16] {
        &self.ports
    }

    fn client(&self) -> &Proc {
        self.client.as_ref().expect("the client runs")
    }

    /// Writes (or replaces) `file` in the config directory; Shoal picks it up.
    pub fn write(&self, file: &str, yaml: &str) {
        write_whole(&self.config_dir.join(file), yaml);
    }

    /// The client's calls so far, in order: `ok <server>` or `err <code> <details>`.
    pub fn calls(&self) -> Vec<String> {
        calls_of(self.client())
    }

    /// Polls the client's calls until `done` accepts them; panics after [`DEADLINE`]
    /// with what was awaited, the last calls and the logs.
    pub async fn wait_for_calls(&self, what: &str, done: impl Fn(&[String]) -> bool) {
        let started = Instant::now();
        loop {
            let calls = self.calls();
            if done(&calls) {
                return;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "waited {DEADLINE:?} for {what}; last calls: {:?}\n{}",
                &calls[calls.len().saturating_sub(10)..],
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until Shoal's `/debug/syncz` shows the last responses of every type each
    /// workload asked for acknowledged (the client's LDS, RDS, CDS and EDS; an xDS
    /// server's LDS); a NACK (gRPC rejecting a resource) fails the test.
    async fn wait_for_synced(&self) {
        let url = format!("http://127.0.0.1:{}/debug/syncz", self.admin_port);
        let started = Instant::now();
        loop {
            let syncz: serde_json::Value = match reqwest::get(&url).await {
                Ok(r) => r.json().await.unwrap_or_default(),
                Err(e) => serde_json::Value::String(e.to_string()),
            };
            let mut synced = 0;
            for node in &self.nodes {
                let conn = syncz
                    .as_array()
                    .and_then(|conns| conns.iter().find(|c| c["proxy"] == *node));
                let Some(types) = conn.map(|c| &c["types"]) else {
                    continue;
                };
                let wanted: &[&str] = if *node == config::node_id("client") {
                    &["lds", "rds", "cds", "eds"]
                } else {
                    &["lds"]
                };
                for t in wanted {
                    assert!(
                        types[t]["nack"].is_null(),
                        "{node} rejected {t}: {}\n{}",
                        types[t]["nack"],
                        self.logs()
                    );
                }
                if wanted.iter().all(|t| types[t]["state"] == "SYNCED") {
                    synced += 1;
                }
            }
            if synced == self.nodes.len() {
                return;
            }
            assert!(
                started.elapsed() < DEADLINE,
                "the workloads did not acknowledge their config within {DEADLINE:?}: {syncz}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn logs(&self) -> String {
        let mut out = format!(
            "---- client log (last 40 lines) ----\n{}\n---- shoal log (last 40 lines) ----\n{}",
            self.client().tail(40),
            self.shoal.tail(40)
        );
        for s in &self.servers {
            out.push_str(&format!("\n---- {} log ----\n{}", s.name, s.tail(10)));
        }
        out
    }

    /// Ends the test: Shoal must still be running, the client must have accepted every
    /// type of config it was sent, and once its first call succeeded none may have failed
    /// (config changes make before they break); then everything is stopped.
    pub async fn finish(self) {
        let calls = self.calls();
        let failed: Vec<&String> = calls
            .iter()
            .skip_while(|c| !c.starts_with("ok "))
            .filter(|c| c.starts_with("err "))
            .collect();
        assert!(
            failed.is_empty(),
            "{} calls failed after the first success: {:?}\n{}",
            failed.len(),
            &failed[..failed.len().min(5)],
            self.logs()
        );
        self.stop().await;
    }

    /// Ends the test without judging the calls: Shoal must still be running, and every
    /// workload must have accepted the config it was sent; then everything is stopped.
    pub async fn stop(mut self) {
        self.shoal.assert_running();
        self.wait_for_synced().await;
        if let Some(c) = &mut self.client {
            c.stop(Duration::from_secs(2));
        }
        for s in &mut self.servers {
            s.stop(Duration::from_secs(2));
        }
        self.shoal.stop(Duration::from_secs(5));
    }
}

/// The calls `proc` (a client) made so far, in order: `ok <answer>` or
/// `err <code> <details>`.
pub fn calls_of(proc: &Proc) -> Vec<String> {
    std::fs::read_to_string(&proc.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("ok ") || l.starts_with("err "))
        .map(str::to_string)
        .collect()
}

/// `shoal --config-dir config_dir` (and `extra` arguments), once ready, and its xDS
/// and admin ports.
async fn start_shoal(config_dir: &Path, log_dir: &Path, extra: &[String]) -> (Proc, u16, u16) {
    let (http_port, xds_port) = (free_port(), free_port());
    let mut args: Vec<String> = vec![
        "--config-dir".into(),
        config_dir.display().to_string(),
        "--plaintext-xds-addr".into(),
        format!("127.0.0.1:{xds_port}"),
        // The secure listener is always on: a free port, not 15012.
        "--secure-xds-addr".into(),
        "127.0.0.1:0".into(),
        "--http-addr".into(),
        format!("127.0.0.1:{http_port}"),
    ];
    args.extend_from_slice(extra);
    let mut proc = Proc::spawn(
        "shoal",
        Path::new(env!("CARGO_BIN_EXE_shoal")),
        &args,
        &[("RUST_LOG", "info".to_string())],
        log_dir,
    );
    let ready = wait_http_ok(
        &format!("http://127.0.0.1:{http_port}/healthz/ready"),
        Duration::from_secs(30),
    )
    .await;
    if !ready {
        proc.assert_running();
        panic!("shoal not ready within 30 s:\n{}", proc.tail(40));
    }
    (proc, xds_port, http_port)
}

/// One of this test's Python scripts, run by the project's Python.
fn python(
    name: &str,
    script: &str,
    args: &[String],
    envs: &[(&str, String)],
    log_dir: &Path,
) -> Proc {
    let script = workspace_root().join("tests/grpc_proxyless").join(script);
    let mut all_args = vec![script.display().to_string()];
    all_args.extend_from_slice(args);
    let mut all_envs = vec![("PYTHONUNBUFFERED", "1".to_string())];
    all_envs.extend(envs.iter().cloned());
    Proc::spawn(
        name,
        &tool("python", "SHOAL_PYTHON"),
        &all_args,
        &all_envs,
        log_dir,
    )
}

/// Waits until `proc` logs `line`; panics (with its log) if it exits or takes too long.
async fn wait_for_log(proc: &mut Proc, line: &str) {
    let started = Instant::now();
    loop {
        let log = std::fs::read_to_string(&proc.log).unwrap_or_default();
        if log.lines().any(|l| l.starts_with(line)) {
            return;
        }
        proc.assert_running();
        assert!(
            started.elapsed() < DEADLINE,
            "{} did not log {line:?} within {DEADLINE:?}:\n{}",
            proc.name,
            proc.tail(20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Replaces a config file at once, so that Shoal never reads half of it.
fn write_whole(path: &Path, contents: &str) {
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, contents).expect("write config");
    std::fs::rename(&tmp, path).expect("rename config");
}
