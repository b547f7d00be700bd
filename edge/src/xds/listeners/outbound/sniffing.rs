//! Protocol sniffing on outbound ports of unknown protocol: Envoy's HTTP inspector
//! tells HTTP/1.1 and h2c (routed by the port's route configuration) from the rest
//! (forwarded as bytes), as Istio does for ports not named for a protocol.

use super::chains::http_chain_with;
use crate::xds::security::mesh_tls::ISTIO_HTTP11_ALPN;
use crate::xds::util::{PLAINTEXT_HTTP_ALPNS, RAW_BUFFER, any};
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, FilterChainMatch, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};

/// The chains of a sniffed port: HTTP where the inspector detected it, else `tcp`.
/// Both match plaintext (`raw_buffer`): Envoy picks the most specific transport
/// protocol before it looks at application protocols, and never backtracks, so a TCP
/// chain matching any transport would never see the plaintext the HTTP chain refused.
pub fn chains(port: u32, mut tcp: FilterChain) -> Vec<FilterChain> {
    let tcp_match = tcp.filter_chain_match.get_or_insert_with(Default::default);
    tcp_match.transport_protocol = RAW_BUFFER.into();
    let http = http_chain_with(port, Some(detected_http()), vec![http_alpn()]);
    vec![http, tcp]
}

/// The mesh's HTTP ALPN for the requests of a sniffed port. Their clusters are the
/// port's, which offer the TCP ALPNs on the mesh's mTLS (the port may carry any
/// protocol); a peer's inbound side would then take HTTP for bytes and lose its L7
/// policy. Istio's own Envoy sets the ALPN per request (its `istio.alpn` filter); with
/// upstream Envoy the well-known filter state `envoy.network.application_protocols`
/// does it, and only TLS transports read it (plaintext endpoints are unaffected).
fn http_alpn() -> HttpFilter {
    use envoy_types::pb::envoy::config::core::v3::{
        SubstitutionFormatString, data_source, substitution_format_string,
    };
    use envoy_types::pb::envoy::extensions::filters::common::set_filter_state::v3::{
        FilterStateValue, filter_state_value,
    };
    use envoy_types::pb::envoy::extensions::filters::http::set_filter_state::v3::Config;
    let value = FilterStateValue {
        key: Some(filter_state_value::Key::ObjectKey(
            "envoy.network.application_protocols".into(),
        )),
        value: Some(filter_state_value::Value::FormatString(
            SubstitutionFormatString {
                format: Some(substitution_format_string::Format::TextFormatSource(
                    envoy_types::pb::envoy::config::core::v3::DataSource {
                        specifier: Some(data_source::Specifier::InlineString(
                            ISTIO_HTTP11_ALPN.into(),
                        )),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    HttpFilter {
        name: "envoy.filters.http.set_filter_state".into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&Config {
            on_request_headers: vec![value],
            ..Default::default()
        }))),
        ..Default::default()
    }
}

/// What a chain for plaintext HTTP matches: the inspector's HTTP protocols over
/// plaintext.
pub fn detected_http() -> FilterChainMatch {
    FilterChainMatch {
        // A TLS client's ALPN `http/1.1` is no HTTP this proxy can read.
        transport_protocol: RAW_BUFFER.into(),
        application_protocols: PLAINTEXT_HTTP_ALPNS.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }
}

/// The HTTP inspector, when a chain matches on the protocol it detects.
pub fn inspector(chains: &[FilterChain]) -> Option<ListenerFilter> {
    let needed = chains.iter().any(|c| {
        c.filter_chain_match
            .as_ref()
            .is_some_and(|m| !m.application_protocols.is_empty())
    });
    needed.then(|| ListenerFilter {
        name: "envoy.filters.listener.http_inspector".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &HttpInspector::default(),
        ))),
        ..Default::default()
    })
}
