//! Per-revision convergence through real streams: a revision is counted concerned when
//! dispatched, sent when pushed, and ACKed, NACKed or gone as the proxy answers.

use super::tests::{Inbound, open, server, svc};
use super::*;
use crate::ads::outbound::Outbound;
use crate::convergence::{RevisionCounts, RevisionState};
use crate::xds::types::CLUSTER;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use shoal_proto::change::{ChangeSet, TriggerReason};
use shoal_proto::model::{NamespaceConfig, Protocol, Service, ServicePort};
use shoal_proto::snapshot::Chunk;
use std::time::{Duration, SystemTime};

const NODE_B: &str = "sidecar~10.0.0.2~w-1.b~b.svc.cluster.local";

/// Snapshot `version` of namespace b with `services` services.
pub(super) fn snapshot(version: u64, services: usize) -> Arc<PushContext> {
    let b = NamespaceConfig {
        namespace: "b".into(),
        services: (0..services)
            .map(|i| Service {
                ports: vec![ServicePort {
                    name: "http".into(),
                    port: 80,
                    protocol: Protocol::Http,
                }],
                ..svc("b", &format!("s{i}"))
            })
            .collect(),
        ..Default::default()
    };
    Arc::new(PushContext::from_chunks(version, [Chunk::Namespace(b)]))
}

pub(super) async fn response(out: &mut Outbound) -> DiscoveryResponse {
    out.next_message::<DiscoveryResponse>()
        .await
        .expect("a response")
        .expect("not an error")
}

/// Answers `resp`: an ACK, or a NACK saying `error`.
pub(super) async fn answer(inbound: &Inbound, resp: &DiscoveryResponse, error: Option<&str>) {
    inbound
        .send(Ok(DiscoveryRequest {
            type_url: CLUSTER.into(),
            version_info: resp.version_info.clone(),
            response_nonce: resp.nonce.clone(),
            error_detail: error.map(|m| RpcStatus {
                code: 3,
                message: m.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
        .into()))
        .await
        .unwrap();
}

fn counts(s: &XdsServer, revision: u64) -> RevisionCounts {
    match s.push_status(Some(&revision.to_string())).unwrap().state {
        RevisionState::Pushed(c) => c,
        other => panic!("revision {revision}: {other:?}"),
    }
}

pub(super) async fn settle() {
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_revision_is_followed_from_dispatch_to_every_answer() {
    let (s, snapshots) = server(XdsConfig::default(), (*snapshot(1, 1)).clone());
    let (inbound, out) = open(&s, NODE_B, CLUSTER).await;
    let mut out = out.unwrap();
    let first = response(&mut out).await;
    answer(&inbound, &first, None).await;
    let (updates_tx, updates) = mpsc::channel(4);
    let dispatcher = s.clone();
    tokio::spawn(async move {
        dispatcher
            .run_dispatcher(updates, std::future::pending())
            .await
    });
    let update = |version: u64, services: usize| {
        let push = snapshot(version, services);
        snapshots.send_replace(push.clone());
        crate::snapshot::SnapshotUpdate {
            push,
            changes: ChangeSet::everything(TriggerReason::ConfigUpdate, SystemTime::now()),
        }
    };

    // Revision 2: pushed, then ACKed.
    updates_tx.send(update(2, 2)).await.unwrap();
    let pushed = response(&mut out).await;
    assert_eq!(pushed.version_info, "2");
    settle().await;
    let c = counts(&s, 2);
    assert_eq!(
        (c.concerned, c.sent, c.acked, c.pending),
        (1, 1, 0, 1),
        "{c:?}"
    );
    answer(&inbound, &pushed, None).await;
    settle().await;
    let c = counts(&s, 2);
    assert_eq!((c.acked, c.nacked, c.pending), (1, 0, 0), "{c:?}");
    // A revision asked for by a lower number is answered by the first pushed after it.
    assert_eq!(counts(&s, 1).version, 2);

    // Revision 3: NACKed, with Envoy's words and the proxy named.
    updates_tx.send(update(3, 3)).await.unwrap();
    let pushed = response(&mut out).await;
    answer(&inbound, &pushed, Some("cluster s2: bad")).await;
    settle().await;
    let c = counts(&s, 3);
    assert_eq!((c.nacked, c.acked, c.pending), (1, 0, 0), "{c:?}");
    assert_eq!(c.nacks[0].proxy, NODE_B);
    assert_eq!(c.nacks[0].message, "cluster s2: bad");

    // Revision 4: the proxy leaves before answering.
    updates_tx.send(update(4, 4)).await.unwrap();
    let _pushed = response(&mut out).await;
    drop((inbound, out));
    settle().await;
    let c = counts(&s, 4);
    assert_eq!((c.sent, c.gone, c.pending), (1, 1, 0), "{c:?}");

    // Latest by default; a revision this edge does not hold yet; a bad query.
    assert_eq!(
        s.push_status(None).unwrap().state,
        RevisionState::Pushed(counts(&s, 4))
    );
    assert_eq!(
        s.push_status(Some("9")).unwrap().state,
        RevisionState::NotYet
    );
    assert!(s.push_status(Some("x")).unwrap_err().contains("\"x\""));
}
