//! A state-of-the-world request as the edge reads it off the wire: Envoy's
//! `DiscoveryRequest`, field for field and tag for tag, with the resource names left as
//! slices of the request's bytes. The streams of a scope all ask for the same names, and
//! every ACK repeats them: compared as bytes with the list a stream holds (or the one
//! interned for its scope), they are never copied into strings of their own. Decoding each
//! into a `String` was ~4.5% of the edge's CPU over a sync.

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, ResourceLocator};
use envoy_types::pb::google::rpc::Status;

/// `envoy.service.discovery.v3.DiscoveryRequest`, names undecoded. Encoded, it is the
/// request's bytes again (a relay's first request reaches the owner whole).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SotwRequest {
    #[prost(string, tag = "1")]
    pub version_info: String,
    #[prost(message, optional, tag = "2")]
    pub node: Option<Node>,
    /// Not yet checked to be UTF-8: the state machine does, for a list it has not seen.
    #[prost(bytes = "bytes", repeated, tag = "3")]
    pub resource_names: Vec<Bytes>,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub response_nonce: String,
    #[prost(message, optional, tag = "6")]
    pub error_detail: Option<Status>,
    #[prost(message, repeated, tag = "7")]
    pub resource_locators: Vec<ResourceLocator>,
}

/// What the SotW state machine reads of a request, from the wire ([`SotwRequest`]) or
/// built whole (Envoy's `DiscoveryRequest`, as tests and tools make them).
pub trait SotwRequestFields {
    /// A resource name's bytes (UTF-8 for a `String`; unchecked off the wire).
    type Name: AsRef<[u8]>;
    fn type_url(&self) -> &str;
    fn resource_names(&self) -> &[Self::Name];
    fn response_nonce(&self) -> &str;
    fn version_info(&self) -> &str;
    fn error_detail(&self) -> Option<&Status>;
}

/// The two types name their fields alike; only a name's type differs.
macro_rules! request_fields {
    ($request:ty, $name:ty) => {
        impl SotwRequestFields for $request {
            type Name = $name;
            fn type_url(&self) -> &str {
                &self.type_url
            }
            fn resource_names(&self) -> &[$name] {
                &self.resource_names
            }
            fn response_nonce(&self) -> &str {
                &self.response_nonce
            }
            fn version_info(&self) -> &str {
                &self.version_info
            }
            fn error_detail(&self) -> Option<&Status> {
                self.error_detail.as_ref()
            }
        }
    };
}

request_fields!(SotwRequest, Bytes);
request_fields!(DiscoveryRequest, String);

impl From<DiscoveryRequest> for SotwRequest {
    fn from(r: DiscoveryRequest) -> Self {
        SotwRequest {
            version_info: r.version_info,
            node: r.node,
            resource_names: r.resource_names.into_iter().map(Bytes::from).collect(),
            type_url: r.type_url,
            response_nonce: r.response_nonce,
            error_detail: r.error_detail,
            resource_locators: r.resource_locators,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn full() -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: "7".into(),
            node: Some(Node {
                id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local".into(),
                ..Default::default()
            }),
            resource_names: vec!["outbound|80||a.ns.svc.cluster.local".into(), "b".into()],
            resource_locators: vec![ResourceLocator {
                name: "c".into(),
                ..Default::default()
            }],
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            response_nonce: "7-3".into(),
            error_detail: Some(Status {
                code: 3,
                message: "rejected".into(),
                details: vec![],
            }),
        }
    }

    #[test]
    fn reads_and_writes_the_bytes_of_envoys_request() {
        let envoy = full();
        let bytes = envoy.encode_to_vec();
        let ours = SotwRequest::decode(&bytes[..]).unwrap();
        assert_eq!(ours.encode_to_vec(), bytes, "the same bytes again");
        assert_eq!(ours.type_url(), envoy.type_url());
        assert_eq!(ours.response_nonce(), envoy.response_nonce());
        assert_eq!(ours.version_info(), envoy.version_info());
        assert_eq!(ours.error_detail(), envoy.error_detail());
        assert_eq!(ours.node, envoy.node);
        let names: Vec<&[u8]> = ours.resource_names().iter().map(|n| n.as_ref()).collect();
        let want: Vec<&[u8]> = envoy.resource_names.iter().map(|n| n.as_bytes()).collect();
        assert_eq!(names, want);
        assert_eq!(SotwRequest::from(envoy), ours);
    }

    #[test]
    fn names_that_are_not_utf8_still_decode() {
        // The state machine refuses them by name; the decode does not.
        let mut bytes = DiscoveryRequest {
            resource_names: vec!["ab".into()],
            ..Default::default()
        }
        .encode_to_vec();
        let at = bytes.len() - 2;
        bytes[at] = 0xff;
        let ours = SotwRequest::decode(&bytes[..]).unwrap();
        assert_eq!(ours.resource_names[0].as_ref(), b"\xffb");
        assert!(DiscoveryRequest::decode(&bytes[..]).is_err());
    }
}
