//! The xDS proxy (the agent's `xds_proxy.go`): Envoy's ADS on a Unix socket, each stream
//! carried to the discovery server over TLS with `authorization: Bearer <token>` (re-read
//! per stream), each message passed on both ways as it came (decoded and re-encoded as
//! the same xDS message, never interpreted). An upstream refusal
//! (UNAUTHENTICATED, PERMISSION_DENIED) reaches Envoy as the same status.

use crate::ca_client::read_token;
use crate::config::Config;
use crate::tls;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::Stream;
use rustls::ClientConfig;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::UnixListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Request, Response, Status, Streaming};
use tracing::{info, warn};

/// The largest xDS message carried either way (Envoy's own limit is larger than gRPC's
/// 4 MiB default; a mesh's CDS can exceed that).
const MAX_MESSAGE: usize = 64 << 20;

#[derive(Clone)]
pub struct Upstream {
    channel: Channel,
    token_path: PathBuf,
}

impl Upstream {
    pub fn new(
        addr: &str,
        server_name: &str,
        config: Arc<ClientConfig>,
        cfg: &Config,
    ) -> anyhow::Result<Upstream> {
        Ok(Upstream {
            channel: tls::channel(addr, server_name, config)?,
            token_path: cfg.token_path.clone(),
        })
    }

    fn client(&self) -> AggregatedDiscoveryServiceClient<Channel> {
        AggregatedDiscoveryServiceClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE)
    }

    /// The outgoing request: Envoy's messages, with the token.
    fn request<T>(&self, messages: T) -> Result<Request<T>, Status> {
        let token = read_token(&self.token_path)
            .map_err(|e| Status::unavailable(format!("the agent has no token: {e:#}")))?;
        let mut req = Request::new(messages);
        let value = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|_| Status::unavailable("the token is not a valid header value"))?;
        req.metadata_mut().insert("authorization", value);
        Ok(req)
    }
}

pub async fn serve(listener: UnixListener, upstream: Upstream) -> anyhow::Result<()> {
    let svc = AggregatedDiscoveryServiceServer::new(Proxy { upstream })
        .max_decoding_message_size(MAX_MESSAGE)
        .max_encoding_message_size(MAX_MESSAGE);
    tonic::transport::Server::builder()
        .add_service(svc)
        .serve_with_incoming(UnixListenerStream::new(listener))
        .await?;
    Ok(())
}

struct Proxy {
    upstream: Upstream,
}

type Out<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// Envoy's messages until it closes its side (or its stream fails).
fn downstream<T: Send + 'static>(inbound: Streaming<T>) -> impl Stream<Item = T> + Send + 'static {
    inbound.map_while(|m| match m {
        Ok(m) => Some(m),
        Err(e) => {
            info!(error = %e, "Envoy's ADS stream ended");
            None
        }
    })
}

fn relay<T: Send + 'static>(upstream: Streaming<T>) -> Out<T> {
    Box::pin(upstream.map(|m| {
        if let Err(e) = &m {
            warn!(code = ?e.code(), message = e.message(), "the discovery server ended the stream");
        }
        m
    }))
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Proxy {
    type StreamAggregatedResourcesStream = Out<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = Out<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        req: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let out = self.upstream.request(downstream(req.into_inner()))?;
        let resp = self
            .upstream
            .client()
            .stream_aggregated_resources(out)
            .await
            .inspect_err(
                |e| warn!(code = ?e.code(), message = e.message(), "ADS refused upstream"),
            )?;
        Ok(Response::new(relay(resp.into_inner())))
    }

    async fn delta_aggregated_resources(
        &self,
        req: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let out = self.upstream.request(downstream(req.into_inner()))?;
        let resp = self
            .upstream
            .client()
            .delta_aggregated_resources(out)
            .await
            .inspect_err(
                |e| warn!(code = ?e.code(), message = e.message(), "delta ADS refused upstream"),
            )?;
        Ok(Response::new(relay(resp.into_inner())))
    }
}
