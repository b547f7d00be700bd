//! [`Csds`]: the two methods of `envoy.service.status.v3.ClientStatusDiscoveryService`,
//! inside the server tonic generates for it (envoy-types'
//! `ClientStatusDiscoveryServiceServer`, here [`CsdsService`]); this only checks the
//! caller and runs [`answer`] off the async threads.
//!
//! An answer carries every proxy of this edge the request names; its size is bounded by
//! [`MAX_RESPONSE_BYTES`], far over what 100k proxies take (a few hundred bytes each, a
//! NACKed type adding Envoy's message). A larger one fails OUT_OF_RANGE (tonic's check):
//! narrow it with `node_matchers`.

use super::access::Access;
use super::answer::answer;
use super::source::ConnectedProxies;
use crate::ca::request_credentials;
use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_server::{
    ClientStatusDiscoveryService, ClientStatusDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::status::v3::{ClientStatusRequest, ClientStatusResponse};
use futures::StreamExt;
use futures::stream::BoxStream;
use std::sync::Arc;
use std::time::Instant;
use tonic::{Request, Response, Status, Streaming};

/// The largest answer sent (tonic's max encoding size for this service): 1 GiB. 100k
/// proxies with four types each take about 40 MiB. A client must raise its own receive
/// limit (gRPC's default is 4 MiB) to read a large edge's answer.
pub const MAX_RESPONSE_BYTES: usize = 1 << 30;

/// The largest request read: a node and its matchers.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The CSDS gRPC service, to mount with `tonic::transport::Server::add_service`.
pub type CsdsService = ClientStatusDiscoveryServiceServer<Csds>;

/// CSDS over `proxies`, answering the callers `access` admits.
pub fn service(proxies: Arc<dyn ConnectedProxies>, access: Access) -> CsdsService {
    ClientStatusDiscoveryServiceServer::new(Csds { proxies, access })
        .max_encoding_message_size(MAX_RESPONSE_BYTES)
        .max_decoding_message_size(MAX_REQUEST_BYTES)
}

/// The methods behind [`CsdsService`].
pub struct Csds {
    proxies: Arc<dyn ConnectedProxies>,
    access: Access,
}

impl Csds {
    async fn admit<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let credentials = request_credentials(request.metadata(), request.extensions());
        self.access.check(&credentials).await.map_err(|e| {
            tracing::warn!(reason = %e, "CSDS request refused");
            Status::from(e)
        })
    }
}

#[async_trait::async_trait]
impl ClientStatusDiscoveryService for Csds {
    type StreamClientStatusStream = BoxStream<'static, Result<ClientStatusResponse, Status>>;

    async fn stream_client_status(
        &self,
        request: Request<Streaming<ClientStatusRequest>>,
    ) -> Result<Response<Self::StreamClientStatusStream>, Status> {
        self.admit(&request).await?;
        let proxies = self.proxies.clone();
        // One answer per request, in order; a request that cannot be answered ends the
        // stream with its status.
        let answers = request.into_inner().then(move |request| {
            let proxies = proxies.clone();
            async move { answer_off_thread(proxies, request?).await }
        });
        Ok(Response::new(answers.boxed()))
    }

    async fn fetch_client_status(
        &self,
        request: Request<ClientStatusRequest>,
    ) -> Result<Response<ClientStatusResponse>, Status> {
        self.admit(&request).await?;
        answer_off_thread(self.proxies.clone(), request.into_inner())
            .await
            .map(Response::new)
    }
}

/// [`answer`] on a blocking thread: at 100k proxies it is tens of milliseconds of CPU.
async fn answer_off_thread(
    proxies: Arc<dyn ConnectedProxies>,
    request: ClientStatusRequest,
) -> Result<ClientStatusResponse, Status> {
    let started = Instant::now();
    let answered = tokio::task::spawn_blocking(move || answer(&*proxies, &request))
        .await
        .map_err(|e| Status::internal(format!("the CSDS answer failed: {e}")))?;
    match answered {
        Ok(response) => {
            tracing::debug!(
                proxies = response.config.len(),
                elapsed = ?started.elapsed(),
                "CSDS answered"
            );
            Ok(response)
        }
        Err(e) => Err(e.into()),
    }
}
