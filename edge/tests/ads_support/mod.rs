//! A real ADS server on 127.0.0.1:0 over a small mesh, for the ADS integration tests.
#![allow(dead_code)]

use prometheus_client::registry::Registry;
use shoal_edge::ads::{XdsConfig, XdsServer};
use shoal_edge::snapshot::SnapshotUpdate;
use shoal_edge::xds::Generator;
use shoal_proto::change::{ChangeKey, ChangeSet, TriggerReason};
use shoal_proto::model::{
    Endpoint, ExportTo, NamespaceConfig, Protocol, Resolution, Service, ServiceEndpoints,
    ServicePort,
};
use shoal_proto::push_context::PushContext;
use shoal_proto::snapshot::Chunk;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub const NS: &str = "shop";
pub const REVIEWS: &str = "reviews.shop.svc.cluster.local";
pub const RATINGS: &str = "ratings.shop.svc.cluster.local";
pub const DETAILS: &str = "details.shop.svc.cluster.local";
pub const NODE_ID: &str = "sidecar~10.1.0.5~web-1.shop~shop.svc.cluster.local";

pub fn service(name: &str, port: u32) -> Service {
    Service {
        hostname: format!("{name}.{NS}.svc.cluster.local"),
        namespace: NS.into(),
        name: name.into(),
        ports: vec![ServicePort {
            name: "http".into(),
            port,
            protocol: Protocol::Http,
        }],
        addresses: vec![],
        resolution: Resolution::ClientSideLb,
        mesh_external: false,
        export_to: ExportTo::default(),
        labels: Default::default(),
        clusters: vec!["c1".into()],
        external_name: String::new(),
    }
}

pub fn endpoints(svc: &Service, ips: &[&str]) -> Chunk {
    let port = svc.ports[0].port;
    Chunk::Endpoints(ServiceEndpoints {
        service: svc.key(),
        endpoints: ips
            .iter()
            .map(|ip| Endpoint {
                address: ip.to_string(),
                port,
                service_port: port,
                labels: Default::default(),
                cluster: "c1".into(),
                network: String::new(),
                locality: String::new(),
                weight: 1,
                healthy: true,
                service_account: "default".into(),
            })
            .collect(),
    })
}

pub fn namespace(services: Vec<Service>) -> Chunk {
    Chunk::Namespace(NamespaceConfig {
        namespace: NS.into(),
        services,
        ..Default::default()
    })
}

/// Version 1: reviews and ratings on :9080, with endpoints.
pub fn mesh_v1() -> PushContext {
    let (reviews, ratings) = (service("reviews", 9080), service("ratings", 9080));
    PushContext::from_chunks(
        1,
        [
            endpoints(&reviews, &["10.2.0.1"]),
            endpoints(&ratings, &["10.2.0.2"]),
            namespace(vec![reviews, ratings]),
        ],
    )
}

pub fn service_key(host: &str) -> ChangeKey {
    ChangeKey::service(NS, host)
}

pub struct Harness {
    pub server: XdsServer,
    pub addr: SocketAddr,
    pub registry: Registry,
    snapshots: watch::Sender<Arc<PushContext>>,
    updates: mpsc::Sender<SnapshotUpdate>,
    drain: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Harness {
    pub async fn start(push: PushContext) -> Harness {
        Harness::start_at(push, "127.0.0.1:0".parse().unwrap()).await
    }

    /// Listens on `addr` (an edge's address taken over by another edge).
    pub async fn start_at(push: PushContext, addr: SocketAddr) -> Harness {
        Harness::start_with(XdsConfig::default(), push, addr).await
    }

    /// An edge with `config`, listening on `addr`.
    pub async fn start_with(config: XdsConfig, push: PushContext, addr: SocketAddr) -> Harness {
        let (snapshots, snapshots_rx) = watch::channel(Arc::new(push));
        let mut registry = Registry::default();
        let server = XdsServer::new(
            config,
            Arc::new(Generator::new()),
            snapshots_rx,
            &mut registry,
        );
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (drain, _) = watch::channel(false);
        let drained = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|d| *d).await;
        };
        let (updates, updates_rx) = mpsc::channel(16);
        let grpc = tonic::transport::Server::builder()
            .add_service(server.ads_service())
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                drained(drain.subscribe()),
            );
        let dispatcher = {
            let server = server.clone();
            let drained = drained(drain.subscribe());
            async move { server.run_dispatcher(updates_rx, drained).await }
        };
        let tasks = vec![
            tokio::spawn(async move { grpc.await.unwrap() }),
            tokio::spawn(dispatcher),
        ];
        Harness {
            server,
            addr,
            registry,
            snapshots,
            updates,
            drain,
            tasks,
        }
    }

    /// Publishes `push` as the snapshot watch does, then tells the dispatcher.
    pub async fn update(&self, push: PushContext, full: bool, changed: &[ChangeKey]) {
        let push = Arc::new(push);
        self.snapshots.send_replace(push.clone());
        let keys = changed.iter().cloned().collect::<BTreeSet<_>>();
        self.updates
            .send(SnapshotUpdate {
                push,
                changes: ChangeSet::of(full, keys, TriggerReason::Unknown, SystemTime::now()),
            })
            .await
            .unwrap();
    }

    pub fn latest(&self) -> Arc<PushContext> {
        self.snapshots.borrow().clone()
    }

    pub fn metrics(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).unwrap();
        out
    }

    /// The value of the unlabelled metric `name`.
    pub fn metric(&self, name: &str) -> f64 {
        let metrics = self.metrics();
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
    }

    /// Drains: streams close, the server and the dispatcher stop.
    pub async fn shutdown(self) {
        self.drain.send_replace(true);
        for t in self.tasks {
            tokio::time::timeout(std::time::Duration::from_secs(10), t)
                .await
                .expect("server stops after drain")
                .unwrap();
        }
    }
}
