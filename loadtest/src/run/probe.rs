//! Before the clock starts: wait until an edge serves the mesh, so the initial sync is
//! measured against the whole config and not an edge that has not built it yet (an edge
//! can be ready before its first snapshot).
//!
//! One probe proxy, in the namespace of the mesh's last service, connects and waits for
//! that service's cluster in its CDS.

use crate::client::{Expect, Shared, SotwClient, Target};
use crate::proxy::{Identity, transport};
use crate::secure::{SERVICE_ACCOUNT, Security};
use crate::wire::{self, SotwResponse, framing::Framer};
use bytes::Bytes;
use prost::Message;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
#[error("{addr} did not serve cluster {cluster} within {timeout:?} (last error: {last})")]
pub struct ProbeError {
    addr: String,
    cluster: String,
    timeout: Duration,
    last: String,
}

/// Waits until a proxy in `namespace` connected to `addr` receives `cluster`.
pub async fn wait_for_cluster(
    addr: &str,
    namespace: &str,
    cluster: &str,
    timeout: Duration,
    security: &Security,
) -> Result<(), ProbeError> {
    let deadline = Instant::now() + timeout;
    let mut last = String::from("none");
    while Instant::now() < deadline {
        let left = deadline - Instant::now();
        match tokio::time::timeout(left, probe(addr, namespace, cluster, security)).await {
            Ok(Ok(true)) => return Ok(()),
            Ok(Ok(false)) => last = "stream ended".into(),
            Ok(Err(e)) => last = e,
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(ProbeError {
        addr: addr.into(),
        cluster: cluster.into(),
        timeout,
        last,
    })
}

/// One probe stream: `Ok(true)` once the cluster arrives.
async fn probe(
    addr: &str,
    namespace: &str,
    cluster: &str,
    security: &Security,
) -> Result<bool, String> {
    let channel = transport::connect(addr, Duration::from_secs(5), &security.dial)
        .await
        .map_err(|e| e.to_string())?;
    let identity = Identity {
        index: usize::MAX >> 16,
        namespace: namespace.into(),
        service_account: SERVICE_ACCOUNT.into(),
        ip: "100.127.255.254".into(),
    };
    let authorization = security.authorization(namespace, SERVICE_ACCOUNT);
    let shared = Shared::new(Target {
        expect: Expect::Cluster(cluster.into()),
        ..Target::default()
    });
    let mut client = SotwClient::new(shared, identity.node());
    let mut out = Vec::new();
    client.start(&mut out);
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    for req in out.drain(..) {
        let _ = tx.try_send(wire::grpc_frame(&req));
    }
    let mut body = transport::open(channel, wire::SOTW_PATH, rx, authorization)
        .await
        .map_err(|e| e.to_string())?;
    let mut framer = Framer::new(256 * 1024 * 1024);
    let mut messages = Vec::new();
    while let Some(frame) = transport::next_frame(&mut body).await {
        let Ok(data) = frame.map_err(|e| e.to_string())?.into_data() else {
            return Ok(false);
        };
        framer
            .push(data, |m| messages.push(m))
            .map_err(|e| e.to_string())?;
        for m in messages.drain(..) {
            let resp = SotwResponse::decode(m).map_err(|e| e.to_string())?;
            client.on_response(resp, &mut out);
            if client.expects_change() {
                return Ok(true);
            }
            for req in out.drain(..) {
                tx.send(wire::grpc_frame(&req))
                    .await
                    .map_err(|_| "request stream closed".to_string())?;
            }
        }
    }
    Ok(false)
}
