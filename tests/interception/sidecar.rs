//! The mesh of the interception test: Shoal in the root namespace on a config
//! directory, the server backend, and one captured Envoy per pod.

use crate::network::{Network, PROXY_UID, Pod};
use crate::support::envoy::XdsApi;
use crate::support::free_port;
use crate::support::process::{Proc, wait_http_ok};
use crate::support::{tool, workspace_root};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tempfile::TempDir;

pub const SERVER_HOST: &str = "server.srv.svc.cluster.local";
/// The Service's virtual IP: nothing answers on it but the client's sidecar.
const SERVER_VIP: &str = "10.96.77.10";
/// The server's HTTP and TCP ports: the Service ports 80 and 5000 target them.
pub const SERVER_HTTP_TARGET: u16 = 8080;
pub const SERVER_TCP_TARGET: u16 = 5001;
/// A second HTTP server on a port no Service declares.
const UNDECLARED_HTTP: u16 = 7070;
pub const ADMIN_PORT: u16 = 15000;
/// How long config may take to reach both sidecars on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(60);

pub struct Mesh {
    client_envoy: Proc,
    server_envoy: Proc,
    backends: Vec<Proc>,
    shoal: Proc,
    // After the processes: the namespaces go once nothing runs in them.
    net: Network,
    _dir: TempDir,
}

/// Which pod's sidecar.
pub struct Sidecar<'a> {
    pod: &'a Pod,
    proc: &'a Proc,
}

impl Mesh {
    pub async fn start(net: Network, client_api: XdsApi, server_api: XdsApi) -> Mesh {
        let dir = tempfile::tempdir().expect("tempdir");
        // Envoy runs as uid 1337: it must read its bootstrap.
        set_mode(dir.path(), 0o755);
        let config = dir.path().join("config");
        std::fs::create_dir_all(&config).expect("mkdir config");
        std::fs::write(config.join("mesh.yaml"), mesh_yaml(&net)).expect("write config");
        // The server's endpoints come once its sidecar is connected, as a pod turns ready
        // after its sidecar started: only endpoints change, yet its inbound side must.
        let endpoints = endpoints_yaml(&net);

        let xds_port = free_port();
        let shoal = start_shoal(&config, &net.root_ip, xds_port, dir.path()).await;
        let python = tool("python3", "SHOAL_PYTHON");
        let script = workspace_root().join("tests/interception/backend.py");
        let backend = |name: &str, http: u16, tcp: u16| {
            Proc::spawn(
                name,
                Path::new("ip"),
                &[
                    "netns".into(),
                    "exec".into(),
                    net.pod("server").netns.clone(),
                    python.display().to_string(),
                    script.display().to_string(),
                    http.to_string(),
                    tcp.to_string(),
                ],
                &[],
                dir.path(),
            )
        };
        let backends = vec![
            backend("backend", SERVER_HTTP_TARGET, SERVER_TCP_TARGET),
            backend("undeclared", UNDECLARED_HTTP, UNDECLARED_HTTP + 1),
        ];
        let envoy = |name: &str, pod: &Pod, app: &str, ns: &str, api: XdsApi| {
            let bootstrap = dir.path().join(format!("{name}.yaml"));
            std::fs::write(
                &bootstrap,
                captured_bootstrap(api, &pod.ip, ns, app, &net.root_ip, xds_port),
            )
            .expect("write bootstrap");
            set_mode(&bootstrap, 0o644);
            start_envoy(name, pod, &bootstrap, dir.path())
        };
        let client_envoy = envoy(
            "client-envoy",
            net.pod("client"),
            "client",
            "cli",
            client_api,
        );
        let server_envoy = envoy(
            "server-envoy",
            net.pod("server"),
            "server",
            "srv",
            server_api,
        );
        let mesh = Mesh {
            client_envoy,
            server_envoy,
            backends,
            shoal,
            net,
            _dir: dir,
        };
        for sidecar in [mesh.client_envoy(), mesh.server_envoy()] {
            mesh.eventually("Envoy ready", || async {
                sidecar.admin("/ready").map(|_| ())
            })
            .await;
        }
        let tmp = config.join("endpoints.yaml.tmp");
        std::fs::write(&tmp, endpoints).expect("write endpoints");
        std::fs::rename(&tmp, config.join("endpoints.yaml")).expect("rename endpoints");
        mesh
    }

    pub fn client_envoy(&self) -> Sidecar<'_> {
        Sidecar {
            pod: self.net.pod("client"),
            proc: &self.client_envoy,
        }
    }

    pub fn server_envoy(&self) -> Sidecar<'_> {
        Sidecar {
            pod: self.net.pod("server"),
            proc: &self.server_envoy,
        }
    }

    /// `GET path` from the client application to the Service, by name at its VIP.
    pub async fn client_http(&self, path: &str) -> Result<String, String> {
        let url = format!("http://{SERVER_HOST}{path}");
        let resolve = format!("{SERVER_HOST}:80:{SERVER_VIP}");
        curl(self.net.pod("client"), &["--resolve", &resolve, &url])
    }

    /// `GET /` from the client application straight to the server pod's undeclared port.
    pub async fn client_http_direct(&self) -> Result<String, String> {
        let url = format!("http://{}:{UNDECLARED_HTTP}/", self.net.pod("server").ip);
        curl(self.net.pod("client"), &[&url])
    }

    /// One line to the Service's TCP port from the client application; the echo.
    pub async fn client_tcp(&self, line: &str) -> Result<String, String> {
        let python = tool("python3", "SHOAL_PYTHON");
        let code = format!(
            "import socket; s = socket.create_connection(('{SERVER_VIP}', 5000), timeout=5); \
             s.sendall(b'{line}\\n'); print(s.makefile().readline().strip())"
        );
        let echo = self
            .net
            .pod("client")
            .run(&python.display().to_string(), &["-c", &code])?;
        if echo.trim().is_empty() {
            return Err("no echo".into());
        }
        Ok(echo)
    }

    /// Polls `check` until it passes, then returns its value; panics after
    /// [`DEADLINE`] with the last failure and the logs.
    pub async fn eventually<T>(
        &self,
        what: &str,
        check: impl AsyncFnMut() -> Result<T, String>,
    ) -> T {
        eventually(what, || self.logs(), check).await
    }

    /// Waits until `stat` of `sidecar` is positive.
    pub async fn expect_stat(&self, sidecar: Sidecar<'_>, stat: &str) {
        expect_stat(sidecar, stat, || self.logs()).await;
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        for p in [&self.client_envoy, &self.server_envoy, &self.shoal]
            .into_iter()
            .chain(&self.backends)
        {
            out.push_str(&format!(
                "---- {} (last 30 lines) ----\n{}\n",
                p.name,
                p.tail(30)
            ));
        }
        out
    }

    /// Ends the test: Shoal still runs, and neither Envoy rejected any config.
    pub async fn finish(mut self) {
        self.shoal.assert_running();
        for sidecar in [self.client_envoy(), self.server_envoy()] {
            let stats = sidecar
                .admin("/stats?filter=update_rejected")
                .expect("stats");
            let rejected: Vec<&str> = stats.lines().filter(|l| !l.ends_with(": 0")).collect();
            assert!(
                rejected.is_empty(),
                "{} rejected config: {rejected:?}\n{}",
                sidecar.proc.name,
                self.logs()
            );
        }
        self.client_envoy.stop(Duration::from_secs(2));
        self.server_envoy.stop(Duration::from_secs(2));
        self.shoal.stop(Duration::from_secs(5));
    }
}

/// Polls `check` until it passes, then returns its value; panics after [`DEADLINE`]
/// with the last failure and `logs()`.
pub async fn eventually<T>(
    what: &str,
    logs: impl Fn() -> String,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let started = Instant::now();
    loop {
        let last = match check().await {
            Ok(v) => return v,
            Err(e) => e,
        };
        assert!(
            started.elapsed() < DEADLINE,
            "waited {DEADLINE:?} for {what}; last: {last}\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `stat` of `sidecar` is positive.
pub async fn expect_stat(sidecar: Sidecar<'_>, stat: &str, logs: impl Fn() -> String) {
    let name = sidecar.proc.name.clone();
    let what = format!("{stat} > 0 in {name}");
    eventually(&what, logs, || async {
        let value = sidecar.stat(stat)?;
        if value > 0 {
            Ok(())
        } else {
            Err(format!("{stat} = {value}"))
        }
    })
    .await;
}

impl<'a> Sidecar<'a> {
    pub fn new(pod: &'a Pod, proc: &'a Proc) -> Self {
        Sidecar { pod, proc }
    }

    /// GET of Envoy's admin `path`, from inside its pod (admin listens on loopback).
    pub fn admin(&self, path: &str) -> Result<String, String> {
        curl(self.pod, &[&format!("http://127.0.0.1:{ADMIN_PORT}{path}")])
    }

    /// A counter from `/stats`, 0 when absent.
    pub fn stat(&self, name: &str) -> Result<u64, String> {
        let body = self.admin(&format!("/stats?filter={}", name.replace('|', "%7C")))?;
        Ok(body
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0))
    }
}

pub fn curl(pod: &Pod, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["-sS", "--fail", "--max-time", "5"];
    all.extend_from_slice(args);
    pod.run("curl", &all)
}

pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// `shoal` with its xDS server on the address the pods reach the root namespace at.
async fn start_shoal(config: &Path, ip: &str, xds_port: u16, log_dir: &Path) -> Proc {
    let http_port = free_port();
    let mut proc = Proc::spawn(
        "shoal",
        Path::new(env!("CARGO_BIN_EXE_shoal")),
        &[
            "--config-dir".into(),
            config.display().to_string(),
            "--plaintext-xds-addr".into(),
            format!("{ip}:{xds_port}"),
            // The secure listener is always on: a free port, not 15012.
            "--secure-xds-addr".into(),
            "127.0.0.1:0".into(),
            "--http-addr".into(),
            format!("127.0.0.1:{http_port}"),
        ],
        &[("RUST_LOG", "info".to_string())],
        log_dir,
    );
    let url = format!("http://127.0.0.1:{http_port}/healthz/ready");
    if !wait_http_ok(&url, Duration::from_secs(30)).await {
        proc.assert_running();
        panic!("shoal not ready within 30 s:\n{}", proc.tail(40));
    }
    proc
}

/// Envoy in `pod`'s namespace as uid/gid 1337, whose traffic iptables lets out.
pub fn start_envoy(name: &str, pod: &Pod, bootstrap: &Path, log_dir: &Path) -> Proc {
    let envoy: PathBuf = tool("envoy", "SHOAL_ENVOY");
    let id = PROXY_UID.to_string();
    Proc::spawn(
        name,
        Path::new("ip"),
        &[
            "netns".into(),
            "exec".into(),
            pod.netns.clone(),
            "setpriv".into(),
            format!("--reuid={id}"),
            format!("--regid={id}"),
            "--clear-groups".into(),
            envoy.display().to_string(),
            "-c".into(),
            bootstrap.display().to_string(),
            "--use-dynamic-base-id".into(),
            "--concurrency".into(),
            "1".into(),
            "--log-level".into(),
            "warn".into(),
            "--drain-time-s".into(),
            "1".into(),
        ],
        &[],
        log_dir,
    )
}

/// A sidecar bootstrap as Istio's agent writes it for a captured pod: the node names
/// the pod IP, `INTERCEPTION_MODE: REDIRECT`, ADS to Shoal.
fn captured_bootstrap(
    api: XdsApi,
    pod_ip: &str,
    namespace: &str,
    app: &str,
    xds_ip: &str,
    xds_port: u16,
) -> String {
    let api_type = match api {
        XdsApi::Sotw => "GRPC",
        XdsApi::Delta => "DELTA_GRPC",
    };
    format!(
        r#"node:
  id: sidecar~{pod_ip}~{app}.{namespace}~{namespace}.svc.cluster.local
  cluster: {app}.{namespace}
  metadata:
    NAMESPACE: {namespace}
    INTERCEPTION_MODE: REDIRECT
    LABELS: {{app: {app}}}
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: {ADMIN_PORT}}}}}
dynamic_resources:
  ads_config:
    api_type: {api_type}
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services: [{{envoy_grpc: {{cluster_name: xds-grpc}}}}]
  cds_config: {{ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 1s}}
  lds_config: {{ads: {{}}, resource_api_version: V3, initial_fetch_timeout: 1s}}
static_resources:
  clusters:
  - name: xds-grpc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: xds-grpc
      endpoints:
      - lb_endpoints:
        - endpoint: {{address: {{socket_address: {{address: {xds_ip}, port_value: {xds_port}}}}}}}
"#
    )
}

/// The cluster as Kubernetes holds it, but for endpoints: Namespaces `cli` and `srv`,
/// the client and server Pods, and Service `srv/server` (ClusterIP, HTTP 80 → 8080, TCP
/// 5000 → 5001).
fn mesh_yaml(net: &Network) -> String {
    let (client_ip, server_ip) = (&net.pod("client").ip, &net.pod("server").ip);
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata: {{name: cli}}
---
apiVersion: v1
kind: Namespace
metadata: {{name: srv}}
---
apiVersion: v1
kind: Pod
metadata: {{name: client, namespace: cli, labels: {{app: client}}}}
status:
  podIP: {client_ip}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: server, namespace: srv, labels: {{app: server}}}}
status:
  podIP: {server_ip}
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: v1
kind: Service
metadata: {{name: server, namespace: srv}}
spec:
  clusterIP: {SERVER_VIP}
  selector: {{app: server}}
  ports:
  - {{name: http, port: 80, targetPort: {SERVER_HTTP_TARGET}}}
  - {{name: tcp-echo, port: 5000, targetPort: {SERVER_TCP_TARGET}}}
"#
    )
}

/// The server Pod's EndpointSlice: the Service's endpoints at the pod IP.
fn endpoints_yaml(net: &Network) -> String {
    let server_ip = &net.pod("server").ip;
    format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: server-abc
  namespace: srv
  labels: {{kubernetes.io/service-name: server}}
addressType: IPv4
ports:
- {{name: http, port: {SERVER_HTTP_TARGET}}}
- {{name: tcp-echo, port: {SERVER_TCP_TARGET}}}
endpoints:
- addresses: [{server_ip}]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: server, namespace: srv}}
"#
    )
}
