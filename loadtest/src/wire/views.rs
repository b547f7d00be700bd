//! Prost views of `DiscoveryResponse` and `DeltaDiscoveryResponse` with the same field
//! numbers as Envoy's, keeping each resource's `Any` as `Bytes` slices of the message.
//! Fields a proxy does not read (canary, control plane, ...) are skipped.

use bytes::Bytes;

/// `google.protobuf.Any`, zero-copy.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RawAny {
    #[prost(bytes = "bytes", tag = "1")]
    pub type_url: Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// `envoy.service.discovery.v3.DiscoveryResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SotwResponse {
    #[prost(string, tag = "1")]
    pub version_info: String,
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<RawAny>,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub nonce: String,
}

/// `envoy.service.discovery.v3.Resource`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeltaResource {
    #[prost(string, tag = "1")]
    pub version: String,
    #[prost(message, optional, tag = "2")]
    pub resource: Option<RawAny>,
    #[prost(string, tag = "3")]
    pub name: String,
}

/// `envoy.service.discovery.v3.DeltaDiscoveryResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeltaResponse {
    #[prost(string, tag = "1")]
    pub system_version_info: String,
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<DeltaResource>,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub nonce: String,
    #[prost(string, repeated, tag = "6")]
    pub removed_resources: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::{
        DeltaDiscoveryResponse, DiscoveryResponse, Resource,
    };
    use envoy_types::pb::google::protobuf::Any;
    use prost::Message;

    fn any(v: &[u8]) -> Any {
        Any {
            type_url: "t".into(),
            value: v.to_vec(),
        }
    }

    #[test]
    fn sotw_view_matches_envoy() {
        let real = DiscoveryResponse {
            version_info: "v1".into(),
            resources: vec![any(b"one"), any(b"two")],
            canary: true,
            type_url: "t".into(),
            nonce: "n".into(),
            ..Default::default()
        };
        let view = SotwResponse::decode(Bytes::from(real.encode_to_vec())).unwrap();
        assert_eq!(view.version_info, "v1");
        assert_eq!(view.nonce, "n");
        assert_eq!(view.type_url, "t");
        assert_eq!(view.resources.len(), 2);
        assert_eq!(&view.resources[1].value[..], b"two");
        assert_eq!(&view.resources[1].type_url[..], b"t");
    }

    #[test]
    fn delta_view_matches_envoy() {
        let real = DeltaDiscoveryResponse {
            system_version_info: "v".into(),
            resources: vec![Resource {
                name: "a".into(),
                version: "1".into(),
                resource: Some(any(b"body")),
                ..Default::default()
            }],
            type_url: "t".into(),
            removed_resources: vec!["gone".into()],
            nonce: "n".into(),
            ..Default::default()
        };
        let view = DeltaResponse::decode(Bytes::from(real.encode_to_vec())).unwrap();
        assert_eq!(view.resources[0].name, "a");
        assert_eq!(
            &view.resources[0].resource.as_ref().unwrap().value[..],
            b"body"
        );
        assert_eq!(view.removed_resources, ["gone"]);
        assert_eq!(view.nonce, "n");
    }
}
