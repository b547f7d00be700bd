//! Moving a namespace from istiod to Shoal and back while requests flow, as the README's
//! "Move a mesh from istiod to Shoal" says to: istiod keeps the CA (its plug-in
//! `cacerts`, which Shoal reads too: one root, both sign; b's pods get their
//! certificates from istiod, as the injector's `CA_ADDR` says, a's from Shoal), and a
//! pod's control plane is its agent's `discoveryAddress` (the `proxy.istio.io/config`
//! annotation the injector writes into `PROXY_CONFIG`), so a namespace moves by rolling
//! its pods.
//!
//! Workload `a` (alpha) is served by Shoal throughout; `b` (beta) starts on the istiod
//! stand-in ([`crate::istiod`], named as such: no istiod runs here). Every pod is a real
//! Envoy behind the agent stand-in. Requests go a→b and b→a without pause while beta
//! rolls as a Deployment would: a new `b` pod pointed at Shoal starts and becomes ready,
//! joins the EndpointSlice, the old pod leaves it, is drained and stopped; then the same
//! back to the stand-in. No request may fail, every connection between the sidecars is
//! mTLS (their TLS stats), and neither control plane's config is NACKed.

use crate::bootstrap::Node;
use crate::istiod::model::{Endpoint, Model, Service, Workload};
use crate::istiod::{ISTIOD_SAN, IstiodStandIn};
use crate::k8s::namespace;
use crate::mesh::{Agent, Mesh};
use crate::mtls::get;
use crate::support::envoy::Envoy;
use crate::support::{backend, free_port};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);
const MESHED: &str = "security.istio.io/tlsMode: istio";
const HOST_A: &str = "a.alpha.svc.cluster.local";
const HOST_B: &str = "b.beta.svc.cluster.local";
/// The b pods, in the order they run: on the stand-in, on Shoal, back on the stand-in.
const B_PODS: [(&str, &str); 3] = [
    ("b-0", "127.0.0.3"),
    ("b-1", "127.0.0.4"),
    ("b-2", "127.0.0.5"),
];

#[derive(Clone, Copy)]
struct Ports {
    svc_a: u16,
    svc_b: u16,
    /// a's and b's sidecar inbound ports (the Services' target ports).
    a_in: u16,
    b_in: u16,
}

fn pod(ns: &str, name: &str, app: &str, ip: &str) -> String {
    format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app: {app}, pod: {name}, {MESHED}}}
spec: {{serviceAccountName: {app}}}
status:
  podIP: {ip}
  conditions: [{{type: Ready, status: "True"}}]
"#
    )
}

fn slice(ns: &str, app: &str, port: u16, pods: &[(&str, &str)]) -> String {
    let endpoints: String = pods
        .iter()
        .map(|(name, ip)| {
            format!(
                "- addresses: [{ip}]\n  conditions: {{ready: true}}\n  targetRef: {{kind: Pod, name: {name}, namespace: {ns}}}\n"
            )
        })
        .collect();
    format!(
        r#"apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {app}-slice
  namespace: {ns}
  labels: {{kubernetes.io/service-name: {app}}}
addressType: IPv4
ports: [{{name: http, port: {port}}}]
endpoints: {}
"#,
        if endpoints.is_empty() {
            "[]\n".to_string()
        } else {
            format!("\n{endpoints}")
        }
    )
}

fn service(ns: &str, name: &str, port: u16, target: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  selector: {{app: {name}}}\n  ports: [{{name: http, port: {port}, targetPort: {target}}}]\n"
    )
}

/// A Sidecar binding pod `pod`'s inbound port on its address (no iptables here).
fn sidecar(ns: &str, pod: &str, ip: &str, port: u16, app_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: {pod}, namespace: {ns}}}
spec:
  workloadSelector: {{labels: {{pod: {pod}}}}}
  ingress:
  - port: {{number: {port}, protocol: HTTP, name: http}}
    bind: {ip}
    captureMode: NONE
    defaultEndpoint: 127.0.0.1:{app_port}
"#
    )
}

/// One running b pod: its app, its agent, its Envoy.
struct BPod {
    name: &'static str,
    ip: &'static str,
    envoy: Envoy,
    agent: Agent,
    _app: backend::Backend,
}

impl BPod {
    fn to_a(&self, p: Ports) -> String {
        format!("http://{}:{}/", self.ip, p.svc_a)
    }
}

/// (connections, TLS handshakes) of `envoy`'s clusters toward `host`.
async fn upstream_tls(envoy: &Envoy, host: &str) -> (u64, u64) {
    let url = envoy.admin(&format!("/stats?filter={host}"));
    let text = match reqwest::get(&url).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let mut out = (0, 0);
    for line in text.lines() {
        let Some((name, value)) = line.split_once(": ") else {
            continue;
        };
        let v: u64 = value.trim().parse().unwrap_or(0);
        if name.starts_with("cluster.outbound|") && name.ends_with(".upstream_cx_total") {
            out.0 += v;
        } else if name.starts_with("cluster.outbound|") && name.ends_with(".ssl.handshake") {
            out.1 += v;
        }
    }
    out
}

/// Requests a→b and b→a without pause, counting them.
struct Traffic {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    failures: Arc<Mutex<Vec<String>>>,
    /// The URL of b's outbound listener toward a: the b pod the caller runs in.
    b_to_a: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Traffic {
    fn start(http: reqwest::Client, a_to_b: String, b_to_a: String) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let b_to_a = Arc::new(Mutex::new(b_to_a));
        let task = {
            let (stop, sent, failures, b_to_a) =
                (stop.clone(), sent.clone(), failures.clone(), b_to_a.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let from_b = b_to_a.lock().unwrap().clone();
                    for (url, host, want) in [(&a_to_b, HOST_B, "b-"), (&from_b, HOST_A, "a")] {
                        sent.fetch_add(1, Ordering::Relaxed);
                        match get(&http, url, host).await {
                            Ok(body) if body.starts_with(want) => {}
                            other => failures.lock().unwrap().push(format!("{url}: {other:?}")),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        Traffic {
            stop,
            sent,
            failures,
            b_to_a,
            task,
        }
    }

    async fn finish(self) -> (u64, Vec<String>) {
        let Traffic {
            stop,
            sent,
            failures,
            task,
            ..
        } = self;
        stop.store(true, Ordering::Relaxed);
        task.await.unwrap();
        let failures = failures.lock().unwrap().clone();
        (sent.load(Ordering::Relaxed), failures)
    }
}

struct World {
    mesh: Mesh,
    istiod: IstiodStandIn,
    ports: Ports,
    http: reqwest::Client,
    env_a: Envoy,
    _agent_a: Agent,
    _app_a: backend::Backend,
}

impl World {
    fn discovery(&self, on_shoal: bool) -> String {
        if on_shoal {
            format!("127.0.0.1:{}", self.mesh.secure_port)
        } else {
            self.istiod.addr.to_string()
        }
    }

    /// Starts b pod `i`, its agent pointed at Shoal or at the stand-in, and waits until
    /// it is ready: its inbound answers (the kubelet's probe) and it reaches a over mTLS.
    async fn start_b(&self, i: usize, on_shoal: bool) -> BPod {
        let (name, ip) = B_PODS[i];
        let app = backend::start(name, "127.0.0.1").await;
        let p = self.ports;
        // Both control planes see the pod as Kubernetes shows it; each serves its own.
        if on_shoal {
            self.apply(
                &format!("{name}-sidecar.yaml"),
                &sidecar("beta", name, ip, p.b_in, app.addr.port()),
            );
        } else {
            self.istiod.update(|m| {
                m.workloads.push(Workload {
                    ip: ip.into(),
                    port: p.b_in,
                    app_port: app.addr.port(),
                    service_port: p.svc_b,
                })
            });
        }
        // The injector writes `CA_ADDR` (istiod's) into every pod: the annotation moves
        // its xDS, and istiod keeps signing its certificate.
        let istiod = self.istiod.addr.to_string();
        let agent = self.mesh.agent_at(
            name,
            "beta",
            "b",
            "1h",
            &self.discovery(on_shoal),
            Some(&istiod),
        );
        let labels = format!("{{app: b, pod: {name}, {MESHED}}}");
        let envoy = self.mesh.envoy(
            &format!("{name}-envoy"),
            &Node {
                kind: "sidecar",
                ip,
                namespace: "beta",
                pod: name,
                service_account: "b",
                labels: &labels,
                api_type: if on_shoal { "DELTA_GRPC" } else { "GRPC" },
            },
            &agent,
        );
        let pod = BPod {
            name,
            ip,
            envoy,
            agent,
            _app: app,
        };
        let probe = format!("http://{ip}:{}/", p.b_in);
        self.mesh
            .eventually(&format!("{name} ready"), LONG, async || {
                let own = get(&self.http, &probe, HOST_B).await;
                let a = get(&self.http, &pod.to_a(p), HOST_A).await;
                if own.as_deref() == Ok(name) && a.as_deref() == Ok("a") {
                    return Ok(());
                }
                Err(format!(
                    "probe {own:?}, a answered {a:?}\n--- envoy ---\n{}\n--- agent ---\n{}",
                    pod.envoy.proc.tail(20),
                    pod.agent.proc.tail(20)
                ))
            })
            .await;
        // Served by the control plane its agent names.
        let node = format!("~{name}.beta~");
        if on_shoal {
            let syncz = self.mesh.syncz().await;
            assert!(syncz.contains(&node), "{name} is served by Shoal: {syncz}");
        } else {
            let streams = self.istiod.streams();
            assert!(
                streams.iter().any(|s| s.contains(&node)),
                "{name} is served by the stand-in: {streams:?}"
            );
        }
        pod
    }

    /// Writes `yaml` as `file` in Shoal's config directory at once (written beside it,
    /// then renamed): Shoal never reads a half-written EndpointSlice.
    fn apply(&self, file: &str, yaml: &str) {
        let tmp = self.mesh.dir.path().join(format!("{file}.tmp"));
        std::fs::write(&tmp, yaml).unwrap();
        std::fs::rename(&tmp, self.mesh.dir.path().join("config").join(file)).unwrap();
    }

    /// b's endpoints, in Kubernetes (Shoal's config) and in the stand-in's model.
    fn set_b_endpoints(&self, pods: &[&BPod]) {
        let p = self.ports;
        let named: Vec<(&str, &str)> = pods.iter().map(|b| (b.name, b.ip)).collect();
        self.apply("b-slice.yaml", &slice("beta", "b", p.b_in, &named));
        self.istiod.update(|m| {
            m.service_mut(HOST_B).unwrap().endpoints = pods
                .iter()
                .map(|b| Endpoint {
                    ip: b.ip.into(),
                    port: p.b_in,
                    service_account: "b".into(),
                    meshed: true,
                })
                .collect();
        });
    }

    /// Waits until a's Envoy balances b over exactly `pods`.
    async fn a_sees(&self, pods: &[&BPod]) {
        let want: Vec<String> = pods
            .iter()
            .map(|b| format!("{}:{}", b.ip, self.ports.b_in))
            .collect();
        self.mesh
            .eventually(
                &format!("a's endpoints of b are {want:?}"),
                LONG,
                async || {
                    let clusters = get(&self.http, &self.env_a.admin("/clusters"), "admin").await?;
                    let mut seen: Vec<String> = clusters
                        .lines()
                        .filter(|l| l.contains(HOST_B) && l.ends_with("::health_flags::healthy"))
                        .filter_map(|l| l.split("::").nth(1).map(str::to_string))
                        .collect();
                    seen.sort();
                    seen.dedup();
                    if seen == want {
                        Ok(())
                    } else {
                        Err(format!("a sees {seen:?}"))
                    }
                },
            )
            .await;
    }

    /// Rolls beta from `old` to a new pod `next` (on Shoal or on the stand-in) as a
    /// Deployment does: surge, ready, in the endpoints, old out, drained, stopped. The
    /// b→a callers move to the new pod once it is ready (the old pod's callers end with
    /// it). Returns the new pod and the old one's (connections, handshakes) toward a.
    async fn roll(
        &self,
        traffic: &Traffic,
        old: BPod,
        next: usize,
        on_shoal: bool,
    ) -> (BPod, (u64, u64)) {
        let new = self.start_b(next, on_shoal).await;
        self.set_b_endpoints(&[&old, &new]);
        self.a_sees(&[&old, &new]).await;
        *traffic.b_to_a.lock().unwrap() = new.to_a(self.ports);
        self.set_b_endpoints(&[&new]);
        self.a_sees(&[&new]).await;
        // SIGTERM: the agent drains Envoy's inbound listeners, waits, then stops it.
        let drain = self
            .http
            .post(old.envoy.admin("/drain_listeners?inboundonly&graceful"))
            .send()
            .await;
        assert!(drain.is_ok(), "drain {}: {drain:?}", old.name);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let old_tls = upstream_tls(&old.envoy, HOST_A).await;
        drop(old);
        (new, old_tls)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_moves_from_istiod_to_shoal_and_back_while_requests_flow() {
    let _serial = crate::SERIAL.lock().await;
    let p = Ports {
        svc_a: free_port(),
        svc_b: free_port(),
        a_in: free_port(),
        b_in: free_port(),
    };
    let app_a = backend::start("a", "127.0.0.1").await;
    let (b0_name, b0_ip) = B_PODS[0];
    let mut config = vec![
        (
            "ns.yaml",
            format!("{}---\n{}", namespace("alpha"), namespace("beta")),
        ),
        (
            "a.yaml",
            format!(
                "{}---\n{}---\n{}---\n{}",
                service("alpha", "a", p.svc_a, p.a_in),
                pod("alpha", "a-0", "a", "127.0.0.2"),
                slice("alpha", "a", p.a_in, &[("a-0", "127.0.0.2")]),
                sidecar("alpha", "a-0", "127.0.0.2", p.a_in, app_a.addr.port()),
            ),
        ),
        ("b.yaml", service("beta", "b", p.svc_b, p.b_in)),
        (
            "b-slice.yaml",
            slice("beta", "b", p.b_in, &[(b0_name, b0_ip)]),
        ),
    ];
    // The three b pods as Kubernetes lists them (each created in turn; Shoal and the
    // stand-in serve only the pods whose agents ask them).
    let pods: String = B_PODS
        .iter()
        .map(|(name, ip)| format!("{}---\n", pod("beta", name, "b", ip)))
        .collect();
    config.push(("b-pods.yaml", pods));
    let mesh = Mesh::start(&config, &[]).await;

    // istiod's model of the same cluster: a in alpha, b in beta (b-0's endpoint).
    let model = Model {
        services: vec![
            Service {
                host: HOST_A.into(),
                namespace: "alpha".into(),
                port: p.svc_a,
                endpoints: vec![Endpoint {
                    ip: "127.0.0.2".into(),
                    port: p.a_in,
                    service_account: "a".into(),
                    meshed: true,
                }],
            },
            Service {
                host: HOST_B.into(),
                namespace: "beta".into(),
                port: p.svc_b,
                endpoints: vec![Endpoint {
                    ip: b0_ip.into(),
                    port: p.b_in,
                    service_account: "b".into(),
                    meshed: true,
                }],
            },
        ],
        workloads: Vec::new(),
    };
    let jwks = mesh.dir.path().join("jwks.json");
    let istiod = IstiodStandIn::start(&mesh.cacerts, mesh.issuer.issuer(), &jwks, model).await;
    assert_eq!(crate::mesh::ISTIOD_SAN, ISTIOD_SAN);

    let agent_a = mesh.agent("a-0", "alpha", "a", "1h");
    let labels_a = format!("{{app: a, pod: a-0, {MESHED}}}");
    let env_a = mesh.envoy(
        "a-envoy",
        &Node {
            kind: "sidecar",
            ip: "127.0.0.2",
            namespace: "alpha",
            pod: "a-0",
            service_account: "a",
            labels: &labels_a,
            api_type: "GRPC",
        },
        &agent_a,
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let world = World {
        mesh,
        istiod,
        ports: p,
        http,
        env_a,
        _agent_a: agent_a,
        _app_a: app_a,
    };

    // beta on the stand-in: b-0, its certificate from istiod's CA (the stand-in).
    let b0 = world.start_b(0, false).await;
    let a_to_b = format!("http://127.0.0.2:{}/", p.svc_b);
    world
        .mesh
        .eventually("a → b-0", LONG, async || {
            get(&world.http, &a_to_b, HOST_B).await.map(|_| ())
        })
        .await;
    let traffic = Traffic::start(world.http.clone(), a_to_b, b0.to_a(p));
    tokio::time::sleep(Duration::from_secs(1)).await;

    // beta moves to Shoal, then back to the stand-in.
    let (b1, b0_tls) = world.roll(&traffic, b0, 1, true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let b1_tls_now = upstream_tls(&b1.envoy, HOST_A).await;
    let (b2, b1_tls) = world.roll(&traffic, b1, 2, false).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let (sent, failures) = traffic.finish().await;
    let b2_tls = upstream_tls(&b2.envoy, HOST_A).await;
    let a_tls = upstream_tls(&world.env_a, HOST_B).await;
    let a_listener = format!("listener.127.0.0.2_{}", p.a_in);
    let a_in = (
        world
            .env_a
            .stat(&format!("{a_listener}.downstream_cx_total"))
            .await,
        world
            .env_a
            .stat(&format!("{a_listener}.ssl.handshake"))
            .await,
    );
    eprintln!(
        "migration: {sent} requests, {} failed; connections/handshakes: a→b {a_tls:?}, \
         b-0→a {b0_tls:?}, b-1→a {b1_tls:?} ({b1_tls_now:?} mid-way), b-2→a {b2_tls:?}, \
         into a {a_in:?}",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {sent} requests failed during the move; first: {:?}\n--- shoal ---\n{}",
        failures.len(),
        failures.first(),
        world.mesh.shoal.tail(30)
    );
    assert!(sent > 100, "the request loop sent only {sent}");
    // Every sidecar-to-sidecar connection was mTLS: as many handshakes as connections,
    // on every client, and into a (whose only clients are b's sidecars).
    for (what, (cx, hs)) in [
        ("a → b", a_tls),
        ("b-0 → a", b0_tls),
        ("b-1 → a", b1_tls),
        ("b-2 → a", b2_tls),
        ("into a", a_in),
    ] {
        assert!(
            cx > 0 && hs == cx,
            "{what}: {cx} connections, {hs} TLS handshakes"
        );
    }
    assert_eq!(
        world.istiod.nacks(),
        Vec::<String>::new(),
        "the stand-in's config NACKed"
    );
    let syncz = world.mesh.syncz().await;
    assert!(!syncz.contains("NACKED"), "Shoal's config NACKed: {syncz}");
    drop(b2);
}
