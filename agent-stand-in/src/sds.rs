//! SDS to Envoy on a Unix socket (the agent's `security/pkg/nodeagent/sds`): `default`
//! (the workload chain and key) and `ROOTCA` (the root), state of the world, one stream
//! per subscription as Envoy opens them; a renewed certificate is pushed on every open
//! stream.

use crate::secrets::WorkloadSecret;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::envoy::service::secret::v3::secret_discovery_service_server::{
    SecretDiscoveryService, SecretDiscoveryServiceServer,
};
use envoy_types::pb::google::protobuf::Any;
use futures::Stream;
use prost::Message;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, warn};

pub const SECRET_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
/// The workload certificate's resource name.
pub const WORKLOAD: &str = "default";
/// The root's resource name.
pub const ROOT: &str = "ROOTCA";
/// Responses queued per stream before the stream waits on Envoy.
const STREAM_QUEUE: usize = 4;

pub async fn serve(
    listener: UnixListener,
    secrets: watch::Receiver<Arc<WorkloadSecret>>,
) -> anyhow::Result<()> {
    tonic::transport::Server::builder()
        .add_service(SecretDiscoveryServiceServer::new(Sds { secrets }))
        .serve_with_incoming(UnixListenerStream::new(listener))
        .await?;
    Ok(())
}

struct Sds {
    secrets: watch::Receiver<Arc<WorkloadSecret>>,
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl SecretDiscoveryService for Sds {
    type DeltaSecretsStream = Out<DeltaDiscoveryResponse>;
    type StreamSecretsStream = Out<DiscoveryResponse>;

    async fn delta_secrets(
        &self,
        _: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaSecretsStream>, Status> {
        Err(Status::unimplemented(
            "the agent stand-in serves SDS as state of the world only (api_type: GRPC)",
        ))
    }

    async fn stream_secrets(
        &self,
        req: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamSecretsStream>, Status> {
        let (tx, rx) = mpsc::channel(STREAM_QUEUE);
        tokio::spawn(sotw(req.into_inner(), self.secrets.clone(), tx));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn fetch_secrets(
        &self,
        req: Request<DiscoveryRequest>,
    ) -> Result<Response<DiscoveryResponse>, Status> {
        let current = self.secrets.borrow().clone();
        Ok(Response::new(response(
            &req.into_inner().resource_names,
            &current,
            0,
        )?))
    }
}

/// One SotW stream: answer a new subscription (or changed names), ignore ACKs, push
/// every new certificate.
async fn sotw(
    mut inbound: Streaming<DiscoveryRequest>,
    mut secrets: watch::Receiver<Arc<WorkloadSecret>>,
    tx: mpsc::Sender<Result<DiscoveryResponse, Status>>,
) {
    let mut names: Vec<String> = Vec::new();
    let mut nonce = 0u64;
    loop {
        let send = tokio::select! {
            msg = inbound.next() => match msg {
                None => return,
                Some(Err(e)) => { debug!(error = %e, "SDS stream closed"); return; }
                Some(Ok(req)) => {
                    if let Some(err) = &req.error_detail {
                        warn!(names = ?req.resource_names, error = %err.message, "Envoy rejected a secret");
                    }
                    let changed = req.resource_names != names;
                    names = req.resource_names;
                    changed || req.response_nonce.is_empty()
                }
            },
            changed = secrets.changed() => {
                if changed.is_err() { return; }
                !names.is_empty()
            }
        };
        if !send {
            continue;
        }
        nonce += 1;
        let current = secrets.borrow_and_update().clone();
        let out = response(&names, &current, nonce);
        if tx.send(out).await.is_err() {
            return;
        }
    }
}

fn response(names: &[String], s: &WorkloadSecret, nonce: u64) -> Result<DiscoveryResponse, Status> {
    let mut resources = Vec::with_capacity(names.len());
    for name in names {
        let kind = match name.as_str() {
            WORKLOAD => secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: Some(inline(&s.chain_pem)),
                private_key: Some(inline(&s.key_pem)),
                ..Default::default()
            }),
            ROOT => secret::Type::ValidationContext(CertificateValidationContext {
                trusted_ca: Some(inline(&s.root_pem)),
                ..Default::default()
            }),
            other => {
                return Err(Status::not_found(format!(
                    "secret {other:?}: the agent stand-in serves only {WORKLOAD:?} and {ROOT:?} (no file-mounted certificates)"
                )));
            }
        };
        let secret = Secret {
            name: name.clone(),
            r#type: Some(kind),
        };
        resources.push(Any {
            type_url: SECRET_TYPE.into(),
            value: secret.encode_to_vec(),
        });
    }
    Ok(DiscoveryResponse {
        version_info: s.generation.to_string(),
        resources,
        type_url: SECRET_TYPE.into(),
        nonce: nonce.to_string(),
        ..Default::default()
    })
}

fn inline(pem: &str) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineBytes(pem.as_bytes().to_vec())),
        ..Default::default()
    }
}
