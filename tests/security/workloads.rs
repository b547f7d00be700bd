//! Two workloads, each a real Envoy behind an agent stand-in: certificates from Shoal's
//! CA (the plug-in intermediate as issuer), xDS on the secure port authenticated by their
//! tokens, real HTTP between them (Shoal's routes, and mTLS with the issued
//! certificates), and a CA rotation that reaches both without a failed request. Workload
//! `a` speaks SotW ADS, `b` Delta: the agent proxies both.

use crate::bootstrap::{Mtls, Node, bootstrap};
use crate::k8s::{Workload, namespace, service};
use crate::mesh::{Mesh, spiffe};
use crate::probe::{issued_by, presented_chain, serial_hex, uri_sans};
use crate::support::envoy::Envoy;
use crate::support::{backend, free_port};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

async fn get(client: &reqwest::Client, url: &str, host: Option<&str>) -> Result<String, String> {
    let mut req = client.get(url);
    if let Some(h) = host {
        req = req.header("host", h);
    }
    let resp = req.send().await.map_err(|e| format!("GET {url}: {e}"))?;
    let status = resp.status();
    let body = resp.text().await.map_err(|e| e.to_string())?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(format!("GET {url}: {status}: {body}"))
    }
}

/// The chain `port` presents to a client presenting `as_spiffe` (from the root).
async fn chain_of(mesh: &Mesh, port: u16, as_spiffe: &str) -> Result<Vec<Vec<u8>>, String> {
    let client = mesh.ca.client(as_spiffe);
    let chain = presented_chain(port, "workload.test", Some(&client)).await?;
    if chain.len() < 2 {
        return Err(format!(
            "a chain of {} certificate(s), no intermediate",
            chain.len()
        ));
    }
    Ok(chain)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_get_certificates_from_shoal_route_over_15012_and_survive_a_ca_rotation() {
    let _serial = crate::SERIAL.lock().await;
    let (a_app, b_app) = (
        backend::start("a", "127.0.0.1").await,
        backend::start("b", "127.0.0.1").await,
    );
    let (svc_a, svc_b) = (free_port(), free_port());
    let config = vec![
        (
            "ns.yaml",
            format!("{}---\n{}", namespace("alpha"), namespace("beta")),
        ),
        (
            "a.yaml",
            service(
                "alpha",
                "a",
                "http",
                svc_a,
                &[Workload::new("a-0", "v1", a_app.addr.port())],
            ),
        ),
        (
            "b.yaml",
            service(
                "beta",
                "b",
                "http",
                svc_b,
                &[Workload::new("b-0", "v1", b_app.addr.port())],
            ),
        ),
    ];
    let mesh = Mesh::start(&config, &[]).await;
    let first = mesh.cacerts.join("ca-cert.pem");
    let first_intermediate = {
        let pem = std::fs::read_to_string(&first).unwrap();
        x509_parser::pem::parse_x509_pem(pem.as_bytes())
            .unwrap()
            .1
            .contents
    };
    // A 20 s certificate, renewed at half-life: the rotation shows within seconds.
    let agent_a = mesh.agent("a", "alpha", "a", "20s");
    let agent_b = mesh.agent("b", "beta", "b", "20s");
    let (id_a, id_b) = (spiffe("alpha", "a"), spiffe("beta", "b"));
    let [admin_a, admin_b, in_a, in_b, to_b, to_a] = [0; 6].map(|_| free_port());
    let env_a = Envoy::start(
        "a-envoy",
        &bootstrap(
            &Node {
                kind: "sidecar",
                ip: "127.0.0.2",
                namespace: "alpha",
                pod: "a-0",
                service_account: "a",
                labels: "{app: a}",
                api_type: "GRPC",
            },
            &agent_a,
            admin_a,
            Some(&Mtls {
                in_port: in_a,
                app_port: a_app.addr.port(),
                peer_spiffe: &id_b,
                to_peer_port: to_b,
                peer_in_port: in_b,
            }),
        ),
        admin_a,
        mesh.dir.path(),
    );
    let env_b = Envoy::start(
        "b-envoy",
        &bootstrap(
            &Node {
                kind: "sidecar",
                ip: "127.0.0.3",
                namespace: "beta",
                pod: "b-0",
                service_account: "b",
                labels: "{app: b}",
                api_type: "DELTA_GRPC",
            },
            &agent_b,
            admin_b,
            Some(&Mtls {
                in_port: in_b,
                app_port: b_app.addr.port(),
                peer_spiffe: &id_a,
                to_peer_port: to_a,
                peer_in_port: in_a,
            }),
        ),
        admin_b,
        mesh.dir.path(),
    );
    let logs = || {
        format!(
            "--- a agent ---\n{}\n--- b agent ---\n{}\n--- a envoy ---\n{}\n--- b envoy ---\n{}",
            agent_a.proc.tail(20),
            agent_b.proc.tail(20),
            env_a.proc.tail(20),
            env_b.proc.tail(20)
        )
    };
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();

    // 1. Each Envoy holds its workload certificate from Shoal's CA (Envoy's /certs), the
    //    plug-in intermediate its issuer (the chain the Envoy presents).
    for (env, id, port, peer) in [(&env_a, &id_a, in_a, &id_b), (&env_b, &id_b, in_b, &id_a)] {
        mesh.eventually(&format!("{id} in /certs; {}", logs()), LONG, async || {
            let certs = get(&http, &env.admin("/certs"), None).await?;
            let chain = chain_of(&mesh, port, peer).await?;
            let serial = serial_hex(&chain[0]);
            if !certs.contains(id.as_str()) || !certs.contains(&serial) {
                return Err(format!("/certs lacks {id} or serial {serial}: {certs}"));
            }
            if uri_sans(&chain[0]) != vec![id.to_string()] {
                return Err(format!("the leaf names {:?}", uri_sans(&chain[0])));
            }
            if !issued_by(&chain[0], &first_intermediate) || chain[1] != first_intermediate {
                return Err("the leaf is not issued by the plug-in intermediate".into());
            }
            Ok(())
        })
        .await;
    }

    // 2. Their ADS streams are on the secure port, authenticated by their tokens: the
    //    edge's /debug/syncz shows each proxy with its SPIFFE ID and `jwt`.
    let (node_a, node_b) = (
        "sidecar~127.0.0.2~a-0.alpha~alpha.svc.cluster.local",
        "sidecar~127.0.0.3~b-0.beta~beta.svc.cluster.local",
    );
    mesh.eventually("both proxies in /debug/syncz", LONG, async || {
        let syncz = mesh.syncz().await;
        let (who_a, who_b) = (format!("\"{id_a}\""), format!("\"{id_b}\""));
        for needle in [node_a, node_b, &who_a, &who_b, "\"auth_method\":\"jwt\""] {
            if !syncz.contains(needle) {
                return Err(format!("/debug/syncz lacks {needle}: {syncz}"));
            }
        }
        Ok(())
    })
    .await;

    // 3. Real HTTP: Shoal's outbound routes (each Envoy on its own pod address), and the
    //    mTLS legs made with the certificates the agents obtained.
    let (host_a, host_b) = ("a.alpha.svc.cluster.local", "b.beta.svc.cluster.local");
    let routes = [
        (format!("http://127.0.0.2:{svc_b}/"), Some(host_b), "b"),
        (format!("http://127.0.0.3:{svc_a}/"), Some(host_a), "a"),
        (format!("http://127.0.0.1:{to_b}/"), None, "b"),
        (format!("http://127.0.0.1:{to_a}/"), None, "a"),
    ];
    for (url, host, want) in &routes {
        mesh.eventually(
            &format!("{url} answered by {want}; {}", logs()),
            LONG,
            async || {
                let body = get(&http, url, *host).await?;
                if body == *want {
                    Ok(())
                } else {
                    Err(format!("answered by {body}"))
                }
            },
        )
        .await;
    }

    // 4. CA rotation: a new intermediate under the same root; both workloads renew from
    //    it while requests flow both ways over mTLS, none failing.
    let stop = Arc::new(AtomicBool::new(false));
    let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let first_failure = Arc::new(std::sync::Mutex::new(None::<String>));
    let loop_task = {
        let (stop, sent, failed, first_failure, http) = (
            stop.clone(),
            sent.clone(),
            failed.clone(),
            first_failure.clone(),
            http.clone(),
        );
        let urls = [
            (format!("http://127.0.0.1:{to_b}/"), "b"),
            (format!("http://127.0.0.1:{to_a}/"), "a"),
        ];
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                for (url, want) in &urls {
                    sent.fetch_add(1, Ordering::Relaxed);
                    match get(&http, url, None).await {
                        Ok(body) if body == *want => {}
                        other => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            first_failure
                                .lock()
                                .unwrap()
                                .get_or_insert(format!("{url}: {other:?}"));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let second = mesh
        .ca
        .write_intermediate(&mesh.cacerts, "Shoal test intermediate 2");
    for (env, id, port, peer) in [(&env_a, &id_a, in_a, &id_b), (&env_b, &id_b, in_b, &id_a)] {
        mesh.eventually(
            &format!("{id} renewed from the new intermediate; {}", logs()),
            LONG,
            async || {
                let chain = chain_of(&mesh, port, peer).await?;
                if !issued_by(&chain[0], &second.cert_der) {
                    return Err("still issued by the first intermediate".into());
                }
                let certs = get(&http, &env.admin("/certs"), None).await?;
                let serial = serial_hex(&chain[0]);
                if certs.contains(&serial) {
                    Ok(())
                } else {
                    Err(format!("/certs lacks {serial}"))
                }
            },
        )
        .await;
    }
    // And a renewal after the rotation, requests still flowing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    loop_task.await.unwrap();
    let (sent, failed) = (sent.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("CA rotation: {sent} requests over mTLS, {failed} failed");
    assert!(sent > 20, "the request loop sent only {sent}");
    assert_eq!(
        failed,
        0,
        "{failed} of {sent} requests failed during the CA rotation; first: {:?}\n{}",
        first_failure.lock().unwrap(),
        logs()
    );
    drop((env_a, env_b, agent_a, agent_b));
}
