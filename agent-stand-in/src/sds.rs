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

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::secret::v3::secret_discovery_service_client::SecretDiscoveryServiceClient;
    use hyper_util::rt::TokioIo;
    use std::path::PathBuf;
    use std::time::{Duration, SystemTime};

    /// Dials the Unix socket whatever the URI says.
    #[derive(Clone)]
    struct Uds(PathBuf);

    impl tower_service::Service<http::Uri> for Uds {
        type Response = TokioIo<tokio::net::UnixStream>;
        type Error = std::io::Error;
        type Future =
            Pin<Box<dyn std::future::Future<Output = std::io::Result<Self::Response>> + Send>>;
        fn poll_ready(
            &mut self,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Uri) -> Self::Future {
            let path = self.0.clone();
            Box::pin(async move { Ok(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) })
        }
    }

    fn secret(generation: u64) -> Arc<WorkloadSecret> {
        Arc::new(WorkloadSecret {
            generation,
            chain_pem: format!("chain-{generation}"),
            key_pem: format!("key-{generation}"),
            root_pem: "root".into(),
            not_before: SystemTime::now(),
            not_after: SystemTime::now() + Duration::from_secs(60),
        })
    }

    fn decode(resp: &DiscoveryResponse) -> Vec<Secret> {
        resp.resources
            .iter()
            .map(|a| Secret::decode(a.value.as_slice()).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn serves_default_and_rootca_and_pushes_a_renewal_but_not_on_ack() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("socket");
        let listener = UnixListener::bind(&path).unwrap();
        let (tx, rx) = watch::channel(secret(1));
        tokio::spawn(serve(listener, rx));
        let channel = tonic::transport::Endpoint::from_static("http://agent")
            .connect_with_connector(Uds(path))
            .await
            .unwrap();
        let mut client = SecretDiscoveryServiceClient::new(channel);
        let (req_tx, req_rx) = mpsc::channel(4);
        req_tx
            .send(DiscoveryRequest {
                type_url: SECRET_TYPE.into(),
                resource_names: vec![WORKLOAD.into(), ROOT.into()],
                ..Default::default()
            })
            .await
            .unwrap();
        let mut stream = client
            .stream_secrets(ReceiverStream::new(req_rx))
            .await
            .unwrap()
            .into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert_eq!(first.version_info, "1");
        let secrets = decode(&first);
        assert_eq!(secrets[0].name, WORKLOAD);
        assert_eq!(secrets[1].name, ROOT);
        let Some(secret::Type::TlsCertificate(tls)) = &secrets[0].r#type else {
            panic!("default is not a TLS certificate")
        };
        let chain = tls.certificate_chain.as_ref().unwrap();
        assert_eq!(
            chain.specifier,
            Some(data_source::Specifier::InlineBytes(b"chain-1".to_vec()))
        );
        // The ACK gets nothing; a renewal is pushed.
        req_tx
            .send(DiscoveryRequest {
                type_url: SECRET_TYPE.into(),
                resource_names: vec![WORKLOAD.into(), ROOT.into()],
                version_info: first.version_info.clone(),
                response_nonce: first.nonce.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(
            tokio::time::timeout(Duration::from_millis(200), stream.message())
                .await
                .is_err(),
            "an ACK was answered"
        );
        tx.send(secret(2)).unwrap();
        let second = stream.message().await.unwrap().unwrap();
        assert_eq!(second.version_info, "2");
        assert_ne!(second.nonce, first.nonce);
    }
}
