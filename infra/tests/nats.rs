//! The NATS adapters against a real `nats-server -js` (one per test), through the
//! conformance checks, plus what only JetStream gives: redelivery, durability across a
//! server restart, and reconnects reported as lag.

mod conformance;

use conformance::{WAIT, bus, kv, membership, next};
use shoal_infra::nats::{
    NatsBus, NatsBusConfig, NatsConfigKv, NatsConfigKvConfig, NatsMembership, NatsMembershipConfig,
    connect,
};
use shoal_infra::testing::NatsServer;
use shoal_proto::transport::{Bus, TransportError};
use std::sync::Arc;
use std::time::Duration;

async fn config_kv(server: &NatsServer) -> Arc<NatsConfigKv> {
    let client = connect(&server.url()).await.unwrap();
    Arc::new(
        NatsConfigKv::open(client, NatsConfigKvConfig::default())
            .await
            .unwrap(),
    )
}

async fn nats_bus(server: &NatsServer, config: NatsBusConfig) -> Arc<NatsBus> {
    let client = connect(&server.url()).await.unwrap();
    Arc::new(NatsBus::open(client, config).await.unwrap())
}

#[tokio::test]
async fn kv_revisions_and_entries() {
    let server = NatsServer::start();
    kv::revisions_and_entries(config_kv(&server).await).await;
}

#[tokio::test]
async fn kv_watch_replays_latest_with_tombstones() {
    let server = NatsServer::start();
    kv::watch_replays_latest_with_tombstones(config_kv(&server).await).await;
}

#[tokio::test]
async fn kv_watch_live_in_revision_order() {
    let server = NatsServer::start();
    kv::watch_live_in_revision_order(config_kv(&server).await).await;
}

#[tokio::test]
async fn kv_reopen_sees_existing_bucket() {
    let server = NatsServer::start();
    let first = config_kv(&server).await;
    use shoal_proto::transport::ConfigKv;
    let revision = first.put("c.Service.ns.a", "v".into()).await.unwrap();
    let second = config_kv(&server).await;
    let entries = second.entries().await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].revision, revision);
}

/// JetStream reserves a bucket's and a stream's whole bound when creating it: on a server
/// with less room, opening says what to change, and a bound that fits opens.
#[tokio::test]
async fn a_bound_the_server_has_no_room_for_is_named_and_a_smaller_one_opens() {
    let server = NatsServer::start_with_max_file_store("100MB");
    let client = connect(&server.url()).await.unwrap();
    let kv = NatsConfigKv::open(client.clone(), NatsConfigKvConfig::default()).await;
    let message = kv.err().expect("a 1 GiB bucket on 100 MB").to_string();
    for part in [
        "shoal_config",
        "1073741824 bytes of file storage",
        "max_file_store",
        "--nats-config-max-bytes",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    let bus = NatsBus::open(client.clone(), NatsBusConfig::default()).await;
    let message = bus.err().expect("a 256 MiB stream on 100 MB").to_string();
    assert!(message.contains("--nats-push-max-bytes"), "{message}");

    let small = NatsConfigKvConfig {
        max_bytes: 32 * 1024 * 1024,
        ..Default::default()
    };
    let kv = NatsConfigKv::open(client.clone(), small).await.unwrap();
    use shoal_proto::transport::ConfigKv;
    kv.put("c.Service.ns.a", "v".into()).await.unwrap();
    let small = NatsBusConfig {
        max_bytes: 32 * 1024 * 1024,
        ..Default::default()
    };
    NatsBus::open(client, small).await.unwrap();
}

#[tokio::test]
async fn bus_push_kept_until_consumed() {
    let server = NatsServer::start();
    bus::push_kept_until_consumed(nats_bus(&server, NatsBusConfig::default()).await).await;
}

#[tokio::test]
async fn bus_push_shared_between_consumers() {
    let server = NatsServer::start();
    // Each builder replica has its own connection.
    let publisher = nats_bus(&server, NatsBusConfig::default()).await;
    let (a, b) = (
        nats_bus(&server, NatsBusConfig::default()).await,
        nats_bus(&server, NatsBusConfig::default()).await,
    );
    let shared = Arc::new(SplitBus {
        publisher,
        consumers: std::sync::Mutex::new(vec![a, b]),
    });
    bus::push_shared_between_consumers(shared).await;
}

#[tokio::test]
async fn bus_unacked_push_is_redelivered() {
    let server = NatsServer::start();
    let config = NatsBusConfig {
        ack_wait: Duration::from_secs(1),
        ..Default::default()
    };
    bus::unacked_push_is_redelivered(nats_bus(&server, config).await).await;
}

#[tokio::test]
async fn bus_snapshot_events_fan_out() {
    let server = NatsServer::start();
    bus::snapshot_events_fan_out(nats_bus(&server, NatsBusConfig::default()).await).await;
}

#[tokio::test]
async fn bus_full_push_stream_refuses_instead_of_dropping() {
    let server = NatsServer::start();
    let config = NatsBusConfig {
        max_msgs: 2,
        ..Default::default()
    };
    let bus = nats_bus(&server, config).await;
    bus.publish_push(&bus::request(1)).await.unwrap();
    bus.publish_push(&bus::request(2)).await.unwrap();
    match bus.publish_push(&bus::request(3)).await {
        Err(TransportError::Unavailable("nats", _)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
    let mut requests = bus.push_requests().await.unwrap();
    let first = next(&mut requests, "oldest request").await.unwrap();
    assert_eq!(first.message.revision, 1, "the oldest is kept");
}

#[tokio::test]
async fn bus_push_survives_server_restart() {
    let mut server = NatsServer::start();
    let bus = nats_bus(&server, NatsBusConfig::default()).await;
    bus.publish_push(&bus::request(42)).await.unwrap();
    server.restart();
    let consumer = nats_bus(&server, NatsBusConfig::default()).await;
    let mut requests = consumer.push_requests().await.unwrap();
    let delivery = next(&mut requests, "request after restart").await.unwrap();
    assert_eq!(delivery.message, bus::request(42));
    delivery.acker.ack().await.unwrap();
}

#[tokio::test]
async fn bus_reconnect_is_reported_as_lag() {
    let mut server = NatsServer::start();
    let config = NatsBusConfig {
        reconnect_check: Duration::from_millis(100),
        ..Default::default()
    };
    let bus = nats_bus(&server, config).await;
    let mut events = bus.snapshot_events().await.unwrap();
    server.restart();
    match next(&mut events, "lag after reconnect").await {
        Err(TransportError::Lagged(_)) => {}
        other => panic!("expected Lagged, got {:?}", other.map(|e| e.version)),
    }
    // The subscription is live again after the reconnect.
    let event = shoal_proto::transport::SnapshotEvent {
        version: 3,
        base: 0,
        changes: Default::default(),
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        bus.publish_snapshot(&event).await.unwrap();
        match tokio::time::timeout(
            Duration::from_millis(200),
            futures::StreamExt::next(&mut events),
        )
        .await
        {
            Ok(Some(Ok(got))) => {
                assert_eq!(got, event);
                break;
            }
            Ok(Some(Err(TransportError::Lagged(_)))) | Err(_) => {}
            other => panic!(
                "unexpected {other:?}",
                other = other.map(|o| o.map(|r| r.map(|e| e.version)))
            ),
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no event after reconnect"
        );
    }
}

#[tokio::test]
async fn membership_sorted_and_leave() {
    let server = NatsServer::start();
    let client = connect(&server.url()).await.unwrap();
    let m = NatsMembership::open(client, NatsMembershipConfig::default())
        .await
        .unwrap();
    membership::members_sorted_and_leave(Arc::new(m)).await;
}

#[tokio::test]
async fn membership_watch_replays_then_follows() {
    let server = NatsServer::start();
    let client = connect(&server.url()).await.unwrap();
    let m = NatsMembership::open(client, NatsMembershipConfig::default())
        .await
        .unwrap();
    membership::watch_replays_then_follows(Arc::new(m), Duration::from_secs(15)).await;
}

#[tokio::test]
async fn membership_heartbeat_ttl() {
    let server = NatsServer::start();
    let client = connect(&server.url()).await.unwrap();
    let ttl = Duration::from_secs(1);
    let config = NatsMembershipConfig {
        max_age: ttl,
        ..Default::default()
    };
    let m = NatsMembership::open(client, config).await.unwrap();
    membership::heartbeat_ttl(Arc::new(m), ttl).await;
}

/// The membership bucket lives in memory: a restarted server has lost it. The next
/// heartbeat re-creates it, so members come back and a member that died meanwhile stays
/// out (a ring frozen on the last members would keep it forever).
#[tokio::test]
async fn membership_survives_a_server_restart() {
    use shoal_proto::transport::{Member, Membership};
    let mut server = NatsServer::start();
    let client = connect(&server.url()).await.unwrap();
    let m = NatsMembership::open(client, NatsMembershipConfig::default())
        .await
        .unwrap();
    let member = |id: &str| Member {
        id: id.into(),
        xds_addr: format!("{id}:15010"),
    };
    m.heartbeat(&member("alive")).await.unwrap();
    m.heartbeat(&member("dies")).await.unwrap();
    server.restart();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let beat = m.heartbeat(&member("alive")).await;
        if beat.is_ok()
            && let Ok(members) = m.members().await
        {
            let ids: Vec<String> = members.into_iter().map(|m| m.id).collect();
            assert_eq!(ids, ["alive"]);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no heartbeat after the restart: {beat:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One publisher connection and a consumer connection per `push_requests` call, as in a
/// deployment with several builder replicas.
struct SplitBus {
    publisher: Arc<NatsBus>,
    consumers: std::sync::Mutex<Vec<Arc<NatsBus>>>,
}

#[async_trait::async_trait]
impl Bus for SplitBus {
    async fn publish_push(
        &self,
        request: &shoal_proto::push::PushRequest,
    ) -> shoal_proto::transport::Result<()> {
        self.publisher.publish_push(request).await
    }

    async fn push_requests(
        &self,
    ) -> shoal_proto::transport::Result<
        futures::stream::BoxStream<
            'static,
            shoal_proto::transport::Result<
                shoal_proto::transport::Delivery<shoal_proto::push::PushRequest>,
            >,
        >,
    > {
        let consumer = self.consumers.lock().unwrap().pop().expect("two consumers");
        consumer.push_requests().await
    }

    async fn publish_snapshot(
        &self,
        event: &shoal_proto::transport::SnapshotEvent,
    ) -> shoal_proto::transport::Result<()> {
        self.publisher.publish_snapshot(event).await
    }

    async fn snapshot_events(
        &self,
    ) -> shoal_proto::transport::Result<
        futures::stream::BoxStream<
            'static,
            shoal_proto::transport::Result<shoal_proto::transport::SnapshotEvent>,
        >,
    > {
        self.publisher.snapshot_events().await
    }
}
