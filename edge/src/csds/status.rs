//! One stream's sync state (the `/debug/syncz` view, [`TypeStatus`]) as Envoy's
//! `ClientConfig`: Istio's mapping of a watched type to a `ConfigStatus`, with the
//! client's side (`ClientResourceStatus`) and the NACK's message added. No resource
//! contents, no I/O.

use crate::ads::status::TypeStatus;
use envoy_types::pb::envoy::admin::v3::{ClientResourceStatus, UpdateFailureState};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::status::v3::client_config::GenericXdsConfig;
use envoy_types::pb::envoy::service::status::v3::{ClientConfig, ConfigStatus};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use shoal_proto::xds::Proxy;
use shoal_proto::xds::node_metadata::{CLUSTER_ID, NAMESPACE};
use std::sync::Arc;

/// `proxy` and its stream's per-type state: the node (its ID, and the namespace and
/// cluster it runs in, as Istio's CSDS gives them) and one `GenericXdsConfig` per type the
/// stream watches, in the order the stream keeps them.
pub fn client_config(proxy: &Proxy, types: &[Arc<TypeStatus>]) -> ClientConfig {
    let metadata = [
        (NAMESPACE, &proxy.namespace),
        (CLUSTER_ID, &proxy.cluster_id),
    ]
    .into_iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| {
        let value = Value {
            kind: Some(Kind::StringValue(v.clone())),
        };
        (k.to_string(), value)
    })
    .collect();
    ClientConfig {
        node: Some(Node {
            id: proxy.id.clone(),
            metadata: Some(Struct { fields: metadata }),
            ..Default::default()
        }),
        generic_xds_configs: types.iter().map(|t| type_config(t)).collect(),
        ..Default::default()
    }
}

/// One type's state:
///
/// | `TypeStatus::state()` | `config_status` | `client_status`                        |
/// |-----------------------|-----------------|----------------------------------------|
/// | `SYNCED`              | `SYNCED`        | `ACKED`                                |
/// | `NACKED`              | `ERROR`         | `NACKED`                               |
/// | `STALE`               | `STALE`         | what it holds: `NACKED` after a NACK, `ACKED` after an ACK, else `REQUESTED` |
/// | `NOT_SENT`            | `NOT_SENT`      | `REQUESTED`                            |
///
/// `version_info` is the version last sent (what was ACKed, when nothing was sent on
/// this stream); `error_state` holds Envoy's message and the rejected version while the
/// latest answer is a NACK (until a later response is ACKed, as Envoy keeps it).
pub fn type_config(t: &TypeStatus) -> GenericXdsConfig {
    let (config_status, client_status) = match t.state() {
        "SYNCED" => (ConfigStatus::Synced, ClientResourceStatus::Acked),
        "NACKED" => (ConfigStatus::Error, ClientResourceStatus::Nacked),
        "STALE" => (ConfigStatus::Stale, held(t)),
        "NOT_SENT" => (ConfigStatus::NotSent, ClientResourceStatus::Requested),
        _ => (ConfigStatus::Unknown, ClientResourceStatus::Unknown),
    };
    let version = if t.version_sent.is_empty() {
        &t.version_acked
    } else {
        &t.version_sent
    };
    GenericXdsConfig {
        type_url: t.type_url.to_string(),
        version_info: version.to_string(),
        config_status: config_status.into(),
        client_status: client_status.into(),
        error_state: t.nack.as_ref().map(|nack| UpdateFailureState {
            details: nack.message.to_string(),
            version_info: nack.version.to_string(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// What a proxy that has not answered the latest response still holds: what it last
/// answered on this stream. (`resources` counts what was sent, not what was ACKed.)
fn held(t: &TypeStatus) -> ClientResourceStatus {
    if t.nack.is_some() {
        ClientResourceStatus::Nacked
    } else if !t.nonce_acked.is_empty() {
        ClientResourceStatus::Acked
    } else {
        ClientResourceStatus::Requested
    }
}
