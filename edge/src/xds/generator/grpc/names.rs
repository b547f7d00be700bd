//! The resource names proxyless gRPC clients ask for, read as Istio's `grpcgen` reads
//! them: listeners by the `host:port` of the channel's target, routes and clusters by
//! Istio's cluster name `outbound|<port>|<subset>|<host>`.

use shoal_proto::model::{DOMAIN_SUFFIX, Service};
use shoal_proto::push_context::SidecarScope;
use std::sync::Arc;

/// The prefix of the listeners gRPC servers (`xds.NewGRPCServer`) ask for.
pub const SERVER_LISTENER_PREFIX: &str = "xds.istio.io/grpc/lds/inbound/";

/// `host:port` (the host bracketed when it is an IPv6 literal), as a channel's target
/// names a listener.
pub fn host_port(name: &str) -> Option<(&str, u32)> {
    let (host, port) = name.rsplit_once(':')?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = port.parse().ok().filter(|p| *p > 0)?;
    (!host.is_empty()).then_some((host, port))
}

/// The service of the scope a target's host names: its hostname, or a short form Istio
/// expands in the client's namespace (`reviews`, `reviews.shop`, `reviews.shop.svc`
/// from `shop`).
pub fn resolve<'a>(scope: &'a SidecarScope, host: &str) -> Option<&'a Arc<Service>> {
    if let Some(svc) = scope.service(host) {
        return Some(svc);
    }
    let ns = scope.namespace.as_str();
    let short = if host.contains('.') {
        host.strip_suffix(&format!(".{ns}.svc"))
            .or_else(|| host.strip_suffix(&format!(".{ns}")))?
    } else {
        host
    };
    scope.service(&format!("{short}.{ns}.{DOMAIN_SUFFIX}"))
}

/// A parsed `outbound|<port>|<subset>|<host>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterKey<'a> {
    pub port: u32,
    pub subset: &'a str,
    pub host: &'a str,
}

impl<'a> ClusterKey<'a> {
    pub fn parse(name: &'a str) -> Option<ClusterKey<'a>> {
        let mut parts = name.splitn(4, '|');
        let (dir, port, subset, host) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let port = port.parse().ok().filter(|p| *p > 0)?;
        (dir == "outbound" && !host.is_empty()).then_some(ClusterKey { port, subset, host })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        assert_eq!(host_port("reviews:9080"), Some(("reviews", 9080)));
        assert_eq!(host_port("[::1]:80"), Some(("::1", 80)));
        assert_eq!(host_port("reviews"), None);
        assert_eq!(host_port("reviews:http"), None);
        assert_eq!(host_port(":80"), None);
        assert_eq!(
            ClusterKey::parse("outbound|9080|v1|r.shop.svc.cluster.local"),
            Some(ClusterKey {
                port: 9080,
                subset: "v1",
                host: "r.shop.svc.cluster.local"
            })
        );
        assert_eq!(ClusterKey::parse("inbound|9080||"), None);
        assert_eq!(ClusterKey::parse("outbound|x||h"), None);
        assert_eq!(ClusterKey::parse("outbound|80|"), None);
    }
}
