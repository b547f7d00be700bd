use crate::support::backend::{self, Backend};
use crate::support::envoy::{Envoy, XdsApi, bootstrap};
use crate::support::free_port;
use crate::support::mesh;
use crate::support::process::Proc;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Fixture {
    config_dir: PathBuf,
    service_port: u16,
    _v1: Backend,
    _v2: Backend,
}

pub struct Report {
    first_config: Duration,
    v1: usize,
    v2: usize,
    change_applied: Duration,
    requests_during_change: usize,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "first route after {:.2}s; split v1={} v2={} ({:.1}% v2); VirtualService edit applied by Envoy {} ms after the file write ({} requests during the change, none failed)",
            self.first_config.as_secs_f64(),
            self.v1,
            self.v2,
            100.0 * self.v2 as f64 / (self.v1 + self.v2) as f64,
            self.change_applied.as_millis(),
            self.requests_during_change
        )
    }
}

impl Fixture {
    pub async fn new(config_dir: &Path) -> Fixture {
        let v1 = backend::start("v1", "127.0.0.1").await;
        let v2 = backend::start("v2", "127.0.0.1").await;
        let service_port = free_port();
        mesh::write(config_dir, service_port, v1.addr.port(), v2.addr.port());
        Fixture {
            config_dir: config_dir.to_path_buf(),
            service_port,
            _v1: v1,
            _v2: v2,
        }
    }

    /// A sidecar Envoy of `productpage` speaking `api` to the edges on `xds_ports`.
    pub fn start_envoy(&self, api: XdsApi, xds_ports: &[u16], dir: &Path) -> Envoy {
        let admin_port = free_port();
        Envoy::start(
            "envoy",
            &bootstrap(
                api,
                "127.0.0.1",
                mesh::NAMESPACE,
                "productpage",
                xds_ports,
                admin_port,
            ),
            admin_port,
            dir,
        )
    }

    pub fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client")
    }

    /// `GET /reviews` through Envoy's outbound listener: the backend's name, or why not.
    pub async fn get(
        &self,
        client: &reqwest::Client,
        user: Option<&str>,
    ) -> Result<String, String> {
        let mut req = client
            .get(format!("http://127.0.0.1:{}/reviews", self.service_port))
            .header("host", mesh::HOST);
        if let Some(u) = user {
            req = req.header("end-user", u);
        }
        let resp = req.send().await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp.text().await.map_err(|e| e.to_string())?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!("{status}: {body}"))
        }
    }

    /// Runs the scenario through `envoy` ([`Fixture::start_envoy`]) against edges whose
    /// admin servers are `edge_https` (the proxy's owner shows it in `/debug/syncz`);
    /// `tiers` are checked to still be running at the end. `ingest_http` serves
    /// `/debug/rejections` and `/metrics` of the ingest (an edge's port for the all-in-one).
    pub async fn run(
        &self,
        envoy: &Envoy,
        edge_https: &[u16],
        ingest_http: u16,
        tiers: &mut [&mut Proc],
    ) -> Report {
        let client = Fixture::client();

        // First config: Envoy routes once the whole path has run.
        let started = Instant::now();
        loop {
            if self.get(&client, None).await.is_ok() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "Envoy never routed to reviews; envoy log:\n{}",
                envoy.proc.tail(40)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let first_config = started.elapsed();

        // The 80/20 split, over 400 requests.
        let (mut v1, mut v2) = (0, 0);
        for _ in 0..400 {
            match self.get(&client, None).await.as_deref() {
                Ok("v1") => v1 += 1,
                Ok("v2") => v2 += 1,
                other => panic!("unexpected response {other:?}"),
            }
        }
        let share = 100.0 * v2 as f64 / 400.0;
        assert!(
            (14.0..=26.0).contains(&share),
            "v2 share {share:.1}% is not 20 ± 6 (v1={v1}, v2={v2})"
        );

        // Header match: jason always gets v2.
        for _ in 0..50 {
            assert_eq!(self.get(&client, Some("jason")).await.as_deref(), Ok("v2"));
        }

        // Edit the VirtualService to 100% v2; no request may fail meanwhile.
        let vs_path = self.config_dir.join("routing/virtual-service.yaml");
        std::fs::write(&vs_path, mesh::virtual_service(0)).expect("edit");
        let written = Instant::now();
        let mut streak_start: Option<Duration> = None;
        let mut streak = 0;
        let mut requests = 0;
        while streak < 30 {
            let body = self.get(&client, None).await;
            requests += 1;
            match body.as_deref() {
                Ok("v2") => {
                    if streak == 0 {
                        streak_start = Some(written.elapsed());
                    }
                    streak += 1;
                }
                Ok("v1") => streak = 0,
                other => panic!("request failed during the change: {other:?}"),
            }
            assert!(
                written.elapsed() < Duration::from_secs(10),
                "Envoy did not apply the edit within 10 s"
            );
        }
        let change_applied = streak_start.expect("streak");
        assert!(
            change_applied < Duration::from_secs(2),
            "edit applied after {change_applied:?}, more than 2 s"
        );

        // Bad input: an edit Istio would reject and a file that is not YAML are reported
        // with file, object and reason, counted, and change nothing that is served.
        std::fs::write(&vs_path, mesh::virtual_service_zero_weights()).expect("bad edit");
        std::fs::write(
            self.config_dir.join("broken.yaml"),
            "apiVersion: v1\nkind: Service\nmetadata: [unclosed\n",
        )
        .expect("broken file");
        let rejections_url = format!("http://127.0.0.1:{ingest_http}/debug/rejections");
        let reported = Instant::now();
        let rejections = loop {
            let list: serde_json::Value = reqwest::get(&rejections_url)
                .await
                .expect("rejections")
                .json()
                .await
                .expect("rejections json");
            if list.as_array().is_some_and(|l| l.len() >= 2) {
                break list;
            }
            assert!(
                reported.elapsed() < Duration::from_secs(5),
                "rejections not reported: {list}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let text = rejections.to_string();
        assert!(
            text.contains("virtual-service.yaml")
                && text.contains("VirtualService bookinfo/reviews")
                && text.contains("total weight"),
            "{text}"
        );
        assert!(text.contains("broken.yaml"), "{text}");
        let metrics = reqwest::get(format!("http://127.0.0.1:{ingest_http}/metrics"))
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics body");
        assert!(
            metrics.lines().any(|l| l
                .starts_with("shoal_ingest_config_rejected_total{kind=\"VirtualService\"}")
                && !l.ends_with(" 0")),
            "rejection not counted:\n{metrics}"
        );
        // The earlier valid VirtualService (100% v2) stays served.
        tokio::time::sleep(Duration::from_millis(500)).await;
        for _ in 0..50 {
            assert_eq!(self.get(&client, None).await.as_deref(), Ok("v2"));
        }

        // Envoy never rejected anything we sent.
        let stats = reqwest::get(envoy.admin("/stats?filter=update_rejected"))
            .await
            .expect("envoy stats")
            .text()
            .await
            .expect("stats body");
        for line in stats.lines() {
            let value: u64 = line
                .rsplit(": ")
                .next()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            assert_eq!(value, 0, "Envoy rejected config: {line}");
        }
        let mut syncz = Vec::new();
        for http in edge_https {
            let edge: serde_json::Value =
                reqwest::get(format!("http://127.0.0.1:{http}/debug/syncz"))
                    .await
                    .expect("syncz")
                    .json()
                    .await
                    .expect("syncz json");
            syncz.extend(edge.as_array().expect("syncz is a list").iter().cloned());
        }
        let ours = syncz
            .iter()
            .find(|p| {
                p["proxy"]
                    .as_str()
                    .is_some_and(|id| id.contains("productpage.bookinfo"))
            })
            .unwrap_or_else(|| panic!("no edge's syncz has the proxy: {syncz:?}"));
        let types = ours["types"].as_object().expect("types");
        for (type_name, status) in types {
            assert!(
                status["nack"].is_null(),
                "Envoy NACKed {type_name}: {status}"
            );
        }
        for t in ["cds", "eds", "lds", "rds"] {
            let state = types.get(t).map(|s| s["state"].clone());
            assert_eq!(
                state.as_ref().and_then(|s| s.as_str()),
                Some("SYNCED"),
                "{t} not acknowledged: {ours}"
            );
        }
        for t in tiers.iter_mut() {
            t.assert_running();
        }
        Report {
            first_config,
            v1,
            v2,
            change_applied,
            requests_during_change: requests,
        }
    }
}
