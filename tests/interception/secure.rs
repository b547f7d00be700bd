//! The interception test's mesh with Istio's security: Shoal with its CA (a plug-in
//! intermediate; agents' tokens from a test issuer), one agent stand-in per meshed pod
//! in the root namespace, and each meshed pod captured, its Envoy (uid 1337) fed by its
//! agent over Unix sockets, which reach across network namespaces by path. Pods are
//! labelled `security.istio.io/tlsMode: istio` and run as their own service account,
//! so Shoal's auto mTLS applies between them.
//!
//! ```text
//!  client ns (cli, sa client) ─┐
//!  other ns  (cli, sa other)  ─┼─ bridge ─ server ns (srv, sa server): Envoy ─► backend
//!  outside ns (no sidecar)    ─┘
//!  root ns: shoal (CA + ADS on 127.0.0.1) ◄─ TLS ─ agent stand-ins ◄─ uds ─ each Envoy
//! ```

use crate::bootstrap::{Node, bootstrap};
use crate::mesh::{Agent, Mesh};
use crate::network::{self, Network};
use crate::sidecar::{ADMIN_PORT, Sidecar, eventually, set_mode, start_envoy};
use crate::support::envoy::XdsApi;
use crate::support::process::Proc;
use crate::support::{tool, workspace_root};
use std::path::Path;
use std::time::{Duration, Instant};

/// The meshed client (service account `client` in namespace `cli`).
pub const CLIENT: &str = "client";
/// A second meshed client in `cli`, service account `other`.
pub const OTHER: &str = "other";
/// The meshed server (service account `server` in `srv`), Service `srv/server`.
pub const SERVER: &str = "server";
/// A pod with no sidecar and no capture: a plaintext client.
pub const OUTSIDE: &str = "outside";
pub const SERVER_HOST: &str = "server.srv.svc.cluster.local";
const SERVER_VIP: &str = "10.96.77.10";
const SERVER_HTTP_TARGET: u16 = 8080;
/// The server's line echo: Service port 5000 (`tcp-echo`) targets it.
pub const SERVER_TCP_TARGET: u16 = 8081;
/// A second HTTP server on a port no Service declares (virtualInbound's passthrough).
const UNDECLARED_HTTP: u16 = 7070;
/// Marks a path of [`SecureMesh::expect`] as one to the undeclared port.
pub const UNDECLARED: &str = "undeclared:";
/// A third HTTP server, behind Service port 9000 named `web`: a port not named for a
/// protocol, which both sidecars sniff.
const SNIFFED_HTTP: u16 = 9090;
/// Marks a path of [`SecureMesh::expect`] as one to the sniffed port.
pub const SNIFFED: &str = "sniffed:";
/// The server's virtualInbound listener counts the TLS handshakes it accepted.
pub const INBOUND_HANDSHAKES: &str = "listener.0.0.0.0_15006.ssl.handshake";
const MESHED: &str = "security.istio.io/tlsMode: istio";

pub struct SecureMesh {
    envoys: Vec<(&'static str, Proc)>,
    _agents: Vec<Agent>,
    backends: Vec<Proc>,
    // After the processes: Shoal, then the namespaces once nothing runs in them.
    pub mesh: Mesh,
    net: Network,
}

fn namespace_of(pod: &str) -> &'static str {
    if pod == SERVER { "srv" } else { "cli" }
}

impl SecureMesh {
    /// The server and each of `clients` meshed and captured, the clients speaking
    /// `client_api` and the server `server_api`; the outside pod too. `None` (with the
    /// reason printed) where this machine cannot make namespaces.
    pub async fn start(
        client_api: XdsApi,
        server_api: XdsApi,
        clients: &[&'static str],
    ) -> Option<SecureMesh> {
        if let Some(why) = network::unsupported() {
            eprintln!("skipping: {why}");
            return None;
        }
        let mut pods = vec![SERVER, OUTSIDE];
        pods.extend_from_slice(clients);
        let net = match Network::create(&pods) {
            Ok(net) => net,
            Err(e) => {
                // A container without CAP_NET_ADMIN cannot make namespaces: say so, pass.
                eprintln!("skipping: cannot create network namespaces: {e}");
                return None;
            }
        };
        let mut meshed = vec![SERVER];
        meshed.extend_from_slice(clients);
        net.capture(&meshed)
            .expect("install Istio's iptables rules");
        let mesh = Mesh::start(&[("mesh.yaml", mesh_yaml(&net, clients))], &[]).await;
        // Envoy runs as uid 1337: it must read its bootstrap and reach the sockets.
        set_mode(mesh.dir.path(), 0o755);
        let python = tool("python3", "SHOAL_PYTHON");
        let script = workspace_root().join("tests/interception/backend.py");
        let backend = |name: &str, http: u16, tcp: u16| {
            Proc::spawn(
                name,
                Path::new("ip"),
                &[
                    "netns".into(),
                    "exec".into(),
                    net.pod(SERVER).netns.clone(),
                    python.display().to_string(),
                    script.display().to_string(),
                    http.to_string(),
                    tcp.to_string(),
                ],
                &[],
                mesh.dir.path(),
            )
        };
        let backends = vec![
            backend("backend", SERVER_HTTP_TARGET, SERVER_TCP_TARGET),
            backend("undeclared", UNDECLARED_HTTP, UNDECLARED_HTTP + 1),
            backend("sniffed", SNIFFED_HTTP, SNIFFED_HTTP + 1),
        ];
        let mut envoys = Vec::new();
        let mut agents = Vec::new();
        for pod in meshed {
            let api = if pod == SERVER {
                server_api
            } else {
                client_api
            };
            let agent = mesh.agent(pod, namespace_of(pod), pod, "1h");
            open_sockets(&agent).await;
            let labels = format!("{{app: {pod}, {MESHED}}}");
            let node = Node {
                kind: "sidecar",
                ip: &net.pod(pod).ip,
                namespace: namespace_of(pod),
                pod,
                service_account: pod,
                labels: &labels,
                api_type: match api {
                    XdsApi::Sotw => "GRPC",
                    XdsApi::Delta => "DELTA_GRPC",
                },
            };
            // The security tests' bootstrap, for a captured pod: Istio's agent writes
            // REDIRECT where the init container installed the rules.
            let yaml = bootstrap(&node, &agent, ADMIN_PORT, None)
                .replace("INTERCEPTION_MODE: NONE", "INTERCEPTION_MODE: REDIRECT");
            let file = mesh.dir.path().join(format!("{pod}-bootstrap.yaml"));
            std::fs::write(&file, yaml).expect("write bootstrap");
            set_mode(&file, 0o644);
            let name = format!("{pod}-envoy");
            envoys.push((
                pod,
                start_envoy(&name, net.pod(pod), &file, mesh.dir.path()),
            ));
            agents.push(agent);
        }
        let m = SecureMesh {
            envoys,
            _agents: agents,
            backends,
            mesh,
            net,
        };
        for (pod, _) in &m.envoys {
            let sidecar = m.sidecar(pod);
            m.eventually("Envoy ready", || async {
                sidecar.admin("/ready").map(|_| ())
            })
            .await;
        }
        Some(m)
    }

    pub fn sidecar(&self, pod: &str) -> Sidecar<'_> {
        let proc = self
            .envoys
            .iter()
            .find_map(|(p, proc)| (*p == pod).then_some(proc))
            .unwrap_or_else(|| panic!("{pod} has no sidecar"));
        Sidecar::new(self.net.pod(pod), proc)
    }

    /// `GET path` from `from`'s application: to the Service by name at its VIP (through
    /// the pod's sidecar), or, from the outside pod, to the server pod IP. `200 <body>`,
    /// another status alone, or why no response came.
    pub fn request(&self, from: &str, path: &str) -> String {
        if from == OUTSIDE {
            let ip = &self.net.pod(SERVER).ip;
            return self.curl(from, &[&format!("http://{ip}:{SERVER_HTTP_TARGET}{path}")]);
        }
        let resolve = format!("{SERVER_HOST}:80:{SERVER_VIP}");
        let url = format!("http://{SERVER_HOST}{path}");
        self.curl(from, &["--resolve", &resolve, &url])
    }

    /// `GET path` from `from`'s application to the server pod's port that no Service
    /// declares (out through a sidecar's PassthroughCluster, in through virtualInbound's
    /// passthrough chains); as [`SecureMesh::request`].
    pub fn request_undeclared(&self, from: &str, path: &str) -> String {
        let ip = &self.net.pod(SERVER).ip;
        self.curl(from, &[&format!("http://{ip}:{UNDECLARED_HTTP}{path}")])
    }

    /// `GET path` from `from`'s application to the Service's sniffed port 9000 (from the
    /// outside pod, to the server pod IP); as [`SecureMesh::request`].
    pub fn request_sniffed(&self, from: &str, path: &str) -> String {
        if from == OUTSIDE {
            let ip = &self.net.pod(SERVER).ip;
            return self.curl(from, &[&format!("http://{ip}:{SNIFFED_HTTP}{path}")]);
        }
        let resolve = format!("{SERVER_HOST}:9000:{SERVER_VIP}");
        let url = format!("http://{SERVER_HOST}:9000{path}");
        self.curl(from, &["--resolve", &resolve, &url])
    }

    /// `curl args` in `from`: `200 <body>`, another status alone, or why no response came.
    fn curl(&self, from: &str, args: &[&str]) -> String {
        let mut all = vec!["--max-time", "5", "-sS", "-w", "\n%{http_code}"];
        all.extend_from_slice(args);
        match self.net.pod(from).run("curl", &all) {
            Ok(out) => match out.rsplit_once('\n') {
                Some((body, "200")) => format!("200 {}", body.trim()),
                Some((_, code)) => code.to_string(),
                None => out,
            },
            Err(e) => format!("no response: {e}"),
        }
    }

    /// One line to the server's echo from `from`'s application: to the Service's TCP
    /// port at its VIP, or, from the outside pod, to the server pod IP. The echo, or why
    /// none came (a refused connection is closed without one).
    pub fn tcp(&self, from: &str, line: &str) -> Result<String, String> {
        let (ip, port) = if from == OUTSIDE {
            (self.net.pod(SERVER).ip.as_str(), SERVER_TCP_TARGET)
        } else {
            (SERVER_VIP, 5000)
        };
        let python = tool("python3", "SHOAL_PYTHON");
        let code = format!(
            "import socket; s = socket.create_connection(('{ip}', {port}), timeout=5); \
             s.sendall(b'{line}\\n'); print(s.makefile().readline().strip())"
        );
        let echo = self
            .net
            .pod(from)
            .run(&python.display().to_string(), &["-c", &code])?;
        match echo.trim() {
            "" => Err("no echo".into()),
            echo => Ok(echo.to_string()),
        }
    }

    /// Waits until each `(from, path)` request ends with a status starting `want`; a
    /// path starting with [`UNDECLARED`] goes to the undeclared port, one starting with
    /// [`SNIFFED`] to the sniffed port.
    pub async fn expect(&self, what: &str, cases: &[(&str, &str, &str)]) {
        self.eventually(what, || async {
            for (from, path, want) in cases {
                let got = if let Some(path) = path.strip_prefix(UNDECLARED) {
                    self.request_undeclared(from, path)
                } else if let Some(path) = path.strip_prefix(SNIFFED) {
                    self.request_sniffed(from, path)
                } else {
                    self.request(from, path)
                };
                if !got.starts_with(want) {
                    return Err(format!("{from} GET {path}: {got}, want {want}"));
                }
            }
            Ok(())
        })
        .await;
    }

    /// Writes `yaml` as `file` in Shoal's config directory (whole, by rename).
    pub fn apply(&self, file: &str, yaml: &str) {
        let config = self.mesh.dir.path().join("config");
        let tmp = config.join(format!(".{file}.tmp"));
        std::fs::write(&tmp, yaml).expect("write config");
        std::fs::rename(&tmp, config.join(file)).expect("rename config");
    }

    pub async fn eventually<T>(
        &self,
        what: &str,
        check: impl AsyncFnMut() -> Result<T, String>,
    ) -> T {
        eventually(what, || self.logs(), check).await
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        let procs = self.envoys.iter().map(|(_, p)| p);
        for p in procs.chain(&self.backends).chain([&self.mesh.shoal]) {
            out.push_str(&format!(
                "---- {} (last 30 lines) ----\n{}\n",
                p.name,
                p.tail(30)
            ));
        }
        out
    }

    /// Ends the test: Shoal still runs, and no Envoy rejected any config.
    pub fn finish(mut self) {
        self.mesh.shoal.assert_running();
        for (pod, _) in &self.envoys {
            let stats = self
                .sidecar(pod)
                .admin("/stats?filter=update_rejected")
                .expect("stats");
            let rejected: Vec<&str> = stats.lines().filter(|l| !l.ends_with(": 0")).collect();
            assert!(
                rejected.is_empty(),
                "{pod}'s Envoy rejected config: {rejected:?}\n{}",
                self.logs()
            );
        }
        for (_, proc) in &mut self.envoys {
            proc.stop(Duration::from_secs(2));
        }
    }
}

/// Waits for `agent`'s SDS and xDS sockets and lets Envoy's uid connect to them (the
/// agent runs as root here; in a pod both run as 1337).
async fn open_sockets(agent: &Agent) {
    let started = Instant::now();
    for socket in [agent.sds_socket(), agent.xds_socket()] {
        while !socket.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} not made within 30 s:\n{}",
                socket.display(),
                agent.proc.tail(20)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        set_mode(&socket, 0o777);
    }
}

/// The cluster as Kubernetes holds it: Namespaces `cli` and `srv`, the meshed Pods
/// (each its own service account), Service `srv/server` (HTTP 80 → 8080, TCP 5000 → 8081) and its
/// endpoints. The outside pod is no Pod of the mesh's.
fn mesh_yaml(net: &Network, clients: &[&str]) -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: cli}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {name: srv}\n",
    );
    for pod in clients.iter().chain([&SERVER]) {
        let (ns, ip) = (namespace_of(pod), &net.pod(pod).ip);
        yaml.push_str(&format!(
            r#"---
apiVersion: v1
kind: Pod
metadata: {{name: {pod}, namespace: {ns}, labels: {{app: {pod}, {MESHED}}}}}
spec: {{serviceAccountName: {pod}}}
status:
  podIP: {ip}
  conditions: [{{type: Ready, status: "True"}}]
"#
        ));
    }
    let server_ip = &net.pod(SERVER).ip;
    yaml.push_str(&format!(
        r#"---
apiVersion: v1
kind: Service
metadata: {{name: server, namespace: srv}}
spec:
  clusterIP: {SERVER_VIP}
  selector: {{app: server}}
  ports:
  - {{name: http, port: 80, targetPort: {SERVER_HTTP_TARGET}}}
  - {{name: tcp-echo, port: 5000, targetPort: {SERVER_TCP_TARGET}}}
  - {{name: web, port: 9000, targetPort: {SNIFFED_HTTP}}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: server-abc
  namespace: srv
  labels: {{kubernetes.io/service-name: server}}
addressType: IPv4
ports:
- {{name: http, port: {SERVER_HTTP_TARGET}}}
- {{name: tcp-echo, port: {SERVER_TCP_TARGET}}}
- {{name: web, port: {SNIFFED_HTTP}}}
endpoints:
- addresses: [{server_ip}]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: server, namespace: srv}}
"#
    ));
    yaml
}
