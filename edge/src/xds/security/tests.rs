//! The security hooks through the generators: auto mTLS and DestinationRule ISTIO_MUTUAL
//! on clusters, the EDS metadata that picks mTLS per endpoint, and PeerAuthentication on
//! the inbound chains.

mod inbound;
mod jwt;
mod keys;
mod outbound;

use super::super::testing::{labels, proxy};
use crate::proxy::{InterceptionMode, Proxy};
use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, UpstreamTlsContext, common_tls_context,
};
use shoal_proto::config::security::{PeerAuthentication, PeerMutualTls};
use shoal_proto::model::NamedConfig;

/// A proxy in `ns` whose workload has the mesh's identity (an injected pod's label).
fn meshed(ns: &str, ip: &str, mode: InterceptionMode) -> Proxy {
    let mut p = proxy(ns, ip, mode);
    p.labels = labels(&[
        ("app", "productpage"),
        ("security.istio.io/tlsMode", "istio"),
    ]);
    p
}

fn peer_authentication(ns: &str, mode: &str) -> NamedConfig<PeerAuthentication> {
    NamedConfig {
        name: format!("{}-{ns}", mode.to_lowercase()),
        namespace: ns.into(),
        created: 0,
        spec: PeerAuthentication {
            mtls: Some(PeerMutualTls {
                mode: Some(mode.into()),
            }),
            ..Default::default()
        },
    }
}

fn typed<M: prost::Message + prost::Name + Default>(socket: &TransportSocket) -> M {
    match &socket.config_type {
        Some(
            envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                any,
            ),
        ) => super::super::testing::unpack(any),
        None => panic!("{} has no config", socket.name),
    }
}

fn upstream(socket: &TransportSocket) -> UpstreamTlsContext {
    assert_eq!(socket.name, "envoy.transport_sockets.tls");
    typed(socket)
}

fn downstream(socket: &TransportSocket) -> DownstreamTlsContext {
    assert_eq!(socket.name, "envoy.transport_sockets.tls");
    typed(socket)
}

/// The SDS names a context reads (certificate, validation) and the cluster serving them.
fn sds_names(common: &CommonTlsContext) -> (Vec<String>, String, Vec<String>) {
    let certs = common
        .tls_certificate_sds_secret_configs
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let Some(common_tls_context::ValidationContextType::CombinedValidationContext(combined)) =
        &common.validation_context_type
    else {
        panic!("no combined validation context")
    };
    let root = combined
        .validation_context_sds_secret_config
        .as_ref()
        .unwrap()
        .name
        .clone();
    let sans = combined
        .default_validation_context
        .as_ref()
        .unwrap()
        .match_typed_subject_alt_names
        .iter()
        .map(|m| match &m.matcher.as_ref().unwrap().match_pattern {
            Some(
                envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern::Exact(e),
            ) => e.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    (certs, root, sans)
}
