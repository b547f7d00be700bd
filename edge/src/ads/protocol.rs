//! What the stream driver needs from a protocol's state machine: SotW and Delta alike.

use super::delta::DeltaStream;
use super::error::Result;
use super::scope::PushScope;
use super::sotw::SotwStream;
use super::source::ResourceSource;
use super::status::{Reply, Statuses};
use super::transport::{
    DELTA_PATH, DeltaResponse as DeltaDiscoveryResponse, Encoded, SOTW_PATH, SotwRequest,
    SotwResponse as DiscoveryResponse,
};
use crate::proxy::Proxy;
use crate::xds::GenerateError;
use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use std::sync::Arc;

pub(crate) trait Protocol: Send + Sync + 'static {
    type Request: prost::Message + Default + Send + 'static;
    type Response: Send + 'static;
    /// `sotw` or `delta`, for logs and syncz.
    const NAME: &'static str;
    /// The gRPC method's path.
    const PATH: &'static str;

    /// A stream for `proxy` that may subscribe to at most `max_names` names.
    fn new(proxy: Arc<Proxy>, max_names: usize) -> Self;
    fn node(req: &Self::Request) -> Option<&Node>;
    /// `req` as it may be held across waits: owning all its bytes.
    fn held(req: Self::Request) -> Self::Request {
        req
    }
    fn type_url(req: &Self::Request) -> &str;
    /// The snapshot version the proxy reports holding, when the protocol carries one.
    fn reported_snapshot(req: &Self::Request) -> Option<u64>;
    fn response_type_url(resp: &Self::Response) -> &str;
    /// `resp` as one gRPC message, in chunks of exactly their size (bytes shared with
    /// other streams not copied).
    fn encode(resp: &Self::Response) -> Encoded;
    fn on_request(
        &mut self,
        src: &dyn ResourceSource,
        req: &Self::Request,
    ) -> Result<Reply<Self::Response>>;
    fn push_type(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        scope: &PushScope,
    ) -> Result<Option<Self::Response>, GenerateError>;
    fn status(&self) -> Statuses;
}

impl Protocol for SotwStream {
    type Request = SotwRequest;
    type Response = DiscoveryResponse;
    const NAME: &'static str = "sotw";
    const PATH: &'static str = SOTW_PATH;

    fn new(proxy: Arc<Proxy>, max_names: usize) -> Self {
        SotwStream::new(proxy).with_max_names(max_names)
    }
    fn node(req: &SotwRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    /// Its names are slices of the DATA chunk it came in, and so would keep the whole
    /// chunk (and the read buffer it shares) alive: copied out.
    fn held(mut req: SotwRequest) -> SotwRequest {
        for name in &mut req.resource_names {
            *name = Bytes::copy_from_slice(name);
        }
        req
    }
    /// `version_info` is the snapshot version of the last response the proxy accepted.
    fn reported_snapshot(req: &SotwRequest) -> Option<u64> {
        req.version_info.parse().ok()
    }

    fn type_url(req: &SotwRequest) -> &str {
        &req.type_url
    }
    fn response_type_url(resp: &DiscoveryResponse) -> &str {
        &resp.type_url
    }
    fn encode(resp: &DiscoveryResponse) -> Encoded {
        resp.to_chunks()
    }
    fn on_request(
        &mut self,
        src: &dyn ResourceSource,
        req: &SotwRequest,
    ) -> Result<Reply<DiscoveryResponse>> {
        SotwStream::on_request(self, src, req)
    }
    fn push_type(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        scope: &PushScope,
    ) -> Result<Option<DiscoveryResponse>, GenerateError> {
        SotwStream::push_type(self, src, type_url, scope)
    }
    fn status(&self) -> Statuses {
        SotwStream::status(self)
    }
}

impl Protocol for DeltaStream {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;
    const NAME: &'static str = "delta";
    const PATH: &'static str = DELTA_PATH;

    fn new(proxy: Arc<Proxy>, max_names: usize) -> Self {
        DeltaStream::new(proxy).with_max_names(max_names)
    }
    fn node(req: &DeltaDiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    /// A reconnect's `initial_resource_versions` name the snapshots they were sent from.
    fn reported_snapshot(req: &DeltaDiscoveryRequest) -> Option<u64> {
        super::delta::claimed_snapshot(&req.initial_resource_versions)
    }

    fn type_url(req: &DeltaDiscoveryRequest) -> &str {
        &req.type_url
    }
    fn response_type_url(resp: &DeltaDiscoveryResponse) -> &str {
        &resp.type_url
    }
    fn encode(resp: &DeltaDiscoveryResponse) -> Encoded {
        resp.to_chunks()
    }
    fn on_request(
        &mut self,
        src: &dyn ResourceSource,
        req: &DeltaDiscoveryRequest,
    ) -> Result<Reply<DeltaDiscoveryResponse>> {
        DeltaStream::on_request(self, src, req)
    }
    fn push_type(
        &mut self,
        src: &dyn ResourceSource,
        type_url: &str,
        scope: &PushScope,
    ) -> Result<Option<DeltaDiscoveryResponse>, GenerateError> {
        DeltaStream::push_type(self, src, type_url, scope)
    }
    fn status(&self) -> Statuses {
        DeltaStream::status(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
    use prost::Message;

    #[test]
    fn a_held_first_request_keeps_nothing_of_its_chunk() {
        let chunk = Bytes::from(
            DiscoveryRequest {
                resource_names: vec!["outbound|80||a.ns.svc.cluster.local".into()],
                ..Default::default()
            }
            .encode_to_vec(),
        );
        let read = SotwRequest::decode(chunk.clone()).unwrap();
        let within = |b: &Bytes| chunk.as_ptr_range().contains(&b.as_ptr());
        assert!(within(&read.resource_names[0]), "decoded as a slice");
        let held = <SotwStream as Protocol>::held(read.clone());
        assert_eq!(held, read);
        assert!(!within(&held.resource_names[0]), "copied out");
    }
}
