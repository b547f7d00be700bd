//! One test's mesh: the all-in-one `shoal` on a config directory, the two grpcio
//! servers, and the grpcio client whose calls the test reads from its output.

use crate::config::{self, Backend};
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
    shoal: Proc,
    /// Shoal's admin port (`/debug/syncz`).
    admin_port: u16,
    servers: Vec<Proc>,
    client: Proc,
    // Last: the logs outlive the processes.
    _dir: TempDir,
}

impl Mesh {
    /// Shoal serving Service `echo` (two servers) and its DestinationRule, and the
    /// client calling `xds:///echo.<ns>.svc.cluster.local:<port>` with `metadata` (gRPC
    /// request headers).
    pub async fn start(metadata: &[(&str, &str)]) -> Mesh {
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
            &config::service(service_port, &backends),
        );
        write_whole(
            &config_dir.join("echo-rule.yaml"),
            &config::destination_rule(),
        );
        let (shoal, xds_port, admin_port) = start_shoal(&config_dir, dir.path()).await;
        let mut servers = Vec::new();
        for b in &backends {
            let args = [b.port.to_string(), b.pod.to_string()];
            let mut server = python(b.pod, "server.py", &args, &[], dir.path());
            wait_for_log(&mut server, "serving").await;
            servers.push(server);
        }
        let bootstrap = dir.path().join("grpc-bootstrap.json");
        std::fs::write(&bootstrap, config::grpc_bootstrap(xds_port)).expect("write bootstrap");
        let target = format!("xds:///{}:{service_port}", config::fqdn("echo"));
        let mut args = vec![target];
        args.extend(metadata.iter().map(|(k, v)| format!("{k}={v}")));
        let client = python(
            "client",
            "client.py",
            &args,
            &[("GRPC_XDS_BOOTSTRAP", bootstrap.display().to_string())],
            dir.path(),
        );
        Mesh {
            config_dir,
            shoal,
            admin_port,
            servers,
            client,
            _dir: dir,
        }
    }

    /// Writes (or replaces) `file` in the config directory; Shoal picks it up.
    pub fn write(&self, file: &str, yaml: &str) {
        write_whole(&self.config_dir.join(file), yaml);
    }

    /// The client's calls so far, in order: `ok <server>` or `err <code> <details>`.
    pub fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.client.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("ok ") || l.starts_with("err "))
            .map(str::to_string)
            .collect()
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

    /// Waits until Shoal's `/debug/syncz` shows the client's last LDS, RDS, CDS and EDS
    /// responses acknowledged; a NACK (gRPC rejecting a resource) fails the test.
    async fn wait_for_client_synced(&self) {
        let url = format!("http://127.0.0.1:{}/debug/syncz", self.admin_port);
        let started = Instant::now();
        loop {
            let syncz: serde_json::Value = match reqwest::get(&url).await {
                Ok(r) => r.json().await.unwrap_or_default(),
                Err(e) => serde_json::Value::String(e.to_string()),
            };
            let client = syncz
                .as_array()
                .and_then(|conns| conns.iter().find(|c| c["proxy"] == config::node_id()));
            if let Some(types) = client.map(|c| &c["types"]) {
                for t in ["lds", "rds", "cds", "eds"] {
                    assert!(
                        types[t]["nack"].is_null(),
                        "the client rejected {t}: {}\n{}",
                        types[t]["nack"],
                        self.logs()
                    );
                }
                if ["lds", "rds", "cds", "eds"]
                    .iter()
                    .all(|t| types[t]["state"] == "SYNCED")
                {
                    return;
                }
            }
            assert!(
                started.elapsed() < DEADLINE,
                "the client did not acknowledge its config within {DEADLINE:?}: {syncz}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn logs(&self) -> String {
        let mut out = format!(
            "---- client log (last 40 lines) ----\n{}\n---- shoal log (last 40 lines) ----\n{}",
            self.client.tail(40),
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
    pub async fn finish(mut self) {
        self.shoal.assert_running();
        self.wait_for_client_synced().await;
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
        self.client.stop(Duration::from_secs(2));
        for s in &mut self.servers {
            s.stop(Duration::from_secs(2));
        }
        self.shoal.stop(Duration::from_secs(5));
    }
}

/// `shoal --config-dir config_dir`, once ready, and its xDS and admin ports.
async fn start_shoal(config_dir: &Path, log_dir: &Path) -> (Proc, u16, u16) {
    let (http_port, xds_port) = (free_port(), free_port());
    let mut proc = Proc::spawn(
        "shoal",
        Path::new(env!("CARGO_BIN_EXE_shoal")),
        &[
            "--config-dir".into(),
            config_dir.display().to_string(),
            "--plaintext-xds-addr".into(),
            format!("127.0.0.1:{xds_port}"),
            // The secure listener is always on: a free port, not 15012.
            "--secure-xds-addr".into(),
            "127.0.0.1:0".into(),
            "--http-addr".into(),
            format!("127.0.0.1:{http_port}"),
        ],
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
