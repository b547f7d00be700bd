//! State-of-the-world ADS, as istiod answers it: each request that is not the ACK of
//! what was last sent (new names, or a version older than the model's) is answered with
//! the current resources of its type; a model change pushes every type the proxy has
//! asked for; a NACK is recorded (the test asserts there is none) and not answered.
//! Delta ADS is refused (UNIMPLEMENTED): the stand-in's proxies speak SotW.

use super::model::Model;
use super::{any, clusters, listeners};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryService;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::protobuf::Any;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const ENDPOINTS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

/// The model and its version (bumped on every change: it is the responses' version).
pub type Versioned = (u64, Arc<Model>);

pub struct Ads {
    pub model: watch::Receiver<Versioned>,
    /// `node id: type: error` of every NACK.
    pub nacks: Arc<Mutex<Vec<String>>>,
    /// Node IDs of the streams opened, in order.
    pub streams: Arc<Mutex<Vec<String>>>,
}

/// What was last sent of one type on a stream.
#[derive(Default)]
struct Sent {
    names: Vec<String>,
    version: String,
    nonce: String,
}

/// The pod address in a sidecar's node ID (`sidecar~<ip>~<pod>.<ns>~<ns>.svc...`).
fn node_ip(node: &Node) -> String {
    node.id.split('~').nth(1).unwrap_or_default().to_string()
}

fn resources(type_url: &str, model: &Model, ip: &str, names: &[String]) -> Vec<Any> {
    match type_url {
        CLUSTER => clusters::clusters(model, ip).iter().map(any).collect(),
        ENDPOINTS => clusters::endpoints(model, names).iter().map(any).collect(),
        LISTENER => listeners::listeners(model, ip).iter().map(any).collect(),
        // Routes are inline in the listeners; nothing else is served.
        _ => Vec::new(),
    }
}

struct Session {
    node: Option<Node>,
    sent: BTreeMap<String, Sent>,
    nonce: u64,
    tx: mpsc::Sender<Result<DiscoveryResponse, Status>>,
}

impl Session {
    async fn send(&mut self, type_url: &str, (version, model): &Versioned) -> bool {
        let ip = self.node.as_ref().map(node_ip).unwrap_or_default();
        self.nonce += 1;
        let sent = self.sent.entry(type_url.to_string()).or_default();
        sent.version = version.to_string();
        sent.nonce = self.nonce.to_string();
        let response = DiscoveryResponse {
            version_info: sent.version.clone(),
            resources: resources(type_url, model, &ip, &sent.names),
            type_url: type_url.into(),
            nonce: sent.nonce.clone(),
            ..Default::default()
        };
        self.tx.send(Ok(response)).await.is_ok()
    }
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        req: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let mut inbound = req.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let mut model = self.model.clone();
        let (nacks, streams) = (self.nacks.clone(), self.streams.clone());
        tokio::spawn(async move {
            let mut s = Session {
                node: None,
                sent: BTreeMap::new(),
                nonce: 0,
                tx,
            };
            loop {
                tokio::select! {
                    msg = inbound.message() => {
                        let Ok(Some(req)) = msg else { return };
                        if s.node.is_none() {
                            s.node = req.node.clone();
                            let id = s.node.as_ref().map(|n| n.id.clone()).unwrap_or_default();
                            streams.lock().unwrap().push(id);
                        }
                        let id = s.node.as_ref().map(|n| n.id.clone()).unwrap_or_default();
                        if let Some(e) = &req.error_detail {
                            nacks.lock().unwrap().push(format!("{id}: {}: {}", req.type_url, e.message));
                            continue;
                        }
                        let current = model.borrow().clone();
                        let sent = s.sent.entry(req.type_url.clone()).or_default();
                        if !req.response_nonce.is_empty() && req.response_nonce != sent.nonce {
                            continue; // stale: a newer response is on its way
                        }
                        let acked = !sent.nonce.is_empty()
                            && req.version_info == current.0.to_string()
                            && req.resource_names == sent.names;
                        if acked {
                            continue;
                        }
                        sent.names = req.resource_names.clone();
                        if !s.send(&req.type_url, &current).await {
                            return;
                        }
                    }
                    changed = model.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let current = model.borrow_and_update().clone();
                        let types: Vec<String> = s.sent.keys().cloned().collect();
                        for t in types {
                            if !s.send(&t, &current).await {
                                return;
                            }
                        }
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn delta_aggregated_resources(
        &self,
        _req: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented(
            "the istiod stand-in serves state-of-the-world ADS only",
        ))
    }
}
