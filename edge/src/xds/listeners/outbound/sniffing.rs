//! Protocol sniffing on outbound ports of unknown protocol: Envoy's HTTP inspector
//! tells HTTP/1.1 and h2c (routed by the port's route configuration) from the rest
//! (forwarded as bytes), as Istio does for ports not named for a protocol.

use super::chains::http_chain;
use crate::xds::util::{PLAINTEXT_HTTP_ALPNS, RAW_BUFFER, any};
use envoy_types::pb::envoy::config::listener::v3::{
    FilterChain, FilterChainMatch, ListenerFilter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::http_inspector::v3::HttpInspector;

/// The chains of a sniffed port: HTTP where the inspector detected it, else `tcp`.
/// Both match plaintext (`raw_buffer`): Envoy picks the most specific transport
/// protocol before it looks at application protocols, and never backtracks, so a TCP
/// chain matching any transport would never see the plaintext the HTTP chain refused.
pub fn chains(port: u32, mut tcp: FilterChain) -> Vec<FilterChain> {
    let tcp_match = tcp.filter_chain_match.get_or_insert_with(Default::default);
    tcp_match.transport_protocol = RAW_BUFFER.into();
    vec![http_chain(port, Some(detected_http())), tcp]
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
