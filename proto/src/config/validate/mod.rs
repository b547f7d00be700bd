//! Per-object validation with the rules Istio's own validation applies.
//!
//! An error rejects the object (an earlier valid version stays served); warnings accept
//! it and are logged, as Istio's analyzers would report them.

mod destination_rule;
mod gateway;
pub mod security;
mod service_entry;
mod virtual_service;
mod workload_group;

use super::{Config, Spec, istio};
use destination_rule::destination_rule;
use gateway::gateway;
use service_entry::{service_entry, workload_entry};
use std::collections::BTreeSet;
use std::time::Duration;
use virtual_service::virtual_service;
use workload_group::workload_group;

/// The reason an object was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid(pub String);

/// An object validation rejected, kept for analysis of its references. Compared by
/// value; `Eq` because the errors carrying it are (a NaN in a spec is not, and is never
/// compared).
#[derive(Clone, Debug, PartialEq)]
pub struct Rejected(pub Box<Config>);

impl Eq for Rejected {}

pub(super) type Check = Result<(), Invalid>;

pub(super) fn invalid(msg: impl Into<String>) -> Invalid {
    Invalid(msg.into())
}

/// Validates one object; `Ok` carries warnings.
pub fn validate(config: &Config) -> Result<Vec<String>, Invalid> {
    let mut warnings = Vec::new();
    match &config.spec {
        Spec::VirtualService(vs) => {
            virtual_service(vs, &mut warnings)?;
            export_to(&config.meta.namespace, &vs.export_to, false)?;
        }
        Spec::DestinationRule(dr) => {
            destination_rule(dr, &config.meta.namespace, &mut warnings)?;
        }
        Spec::ServiceEntry(se) => service_entry(se, &config.meta.namespace, &mut warnings)?,
        Spec::WorkloadEntry(we) => workload_entry(we, &mut warnings)?,
        Spec::WorkloadGroup(wg) => workload_group(wg)?,
        Spec::Sidecar(sc) => sidecar(sc, &mut warnings)?,
        Spec::Gateway(gw) => gateway(&config.meta.name, gw, &mut warnings)?,
        Spec::Service(svc) => {
            for (i, p) in svc.ports.iter().enumerate() {
                port_number(p.port, &format!("spec.ports[{i}].port"))?;
            }
        }
        Spec::EndpointSlice(slice) => {
            if slice.service_name.is_empty() {
                warnings.push("no kubernetes.io/service-name label: not bound to a Service".into());
            }
        }
        Spec::PeerAuthentication(pa) => security::peer_authentication(pa, &mut warnings)?,
        Spec::AuthorizationPolicy(ap) => {
            security::authorization_policy(ap, &mut warnings)?;
            security::fails_closed(ap, &mut warnings);
        }
        Spec::RequestAuthentication(ra) => security::request_authentication(ra, &mut warnings)?,
        Spec::Namespace(_)
        | Spec::Pod(_)
        | Spec::Endpoints(_)
        | Spec::Secret(_)
        | Spec::MeshConfig(_) => {}
    }
    // Valid, and still not applied: said as for a kind Shoal does not read.
    if let Some(not_enforced) = security::not_enforced(config) {
        return Err(not_enforced);
    }
    Ok(warnings)
}

/// Parses an Istio/protobuf duration: `"5s"`, `"0.25s"`, `"250ms"`, `"1m"`, `"1h"`.
pub fn parse_duration(s: &str) -> Result<Duration, Invalid> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|i| s.split_at(i))
        .ok_or_else(|| invalid(format!("duration {s:?} has no unit (use e.g. 5s or 250ms)")))?;
    let value: f64 = num
        .parse()
        .map_err(|_| invalid(format!("duration {s:?} is not a number")))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "us" | "µs" => value / 1_000_000.0,
        "ns" => value / 1_000_000_000.0,
        _ => return Err(invalid(format!("duration {s:?} has unknown unit {unit:?}"))),
    };
    // Finite is not enough: `2555…5s` (33 digits) is finite and overflows a Duration.
    Duration::try_from_secs_f64(secs)
        .map_err(|_| invalid(format!("duration {s:?} is out of range")))
}

/// An optional duration field, checked as Istio's `ValidateDuration` does (so `0s` is
/// rejected: Istio takes unset, not zero, for "none").
pub(super) fn duration_field(value: &Option<String>, field: &str) -> Check {
    match value {
        Some(v) => strict_duration(v, field),
        None => Ok(()),
    }
}

/// A duration as Istio's `ValidateDuration` takes it: at least 1ms, in whole milliseconds.
pub(super) fn strict_duration(value: &str, field: &str) -> Check {
    let d = parse_duration(value).map_err(|e| invalid(format!("{field}: {}", e.0)))?;
    if d < Duration::from_millis(1) {
        return Err(invalid(format!(
            "{field}: duration {value:?} must be at least 1ms"
        )));
    }
    if d.subsec_nanos() % 1_000_000 != 0 {
        return Err(invalid(format!(
            "{field}: duration {value:?} is finer than 1ms (only millisecond precision is supported)"
        )));
    }
    Ok(())
}

pub(super) fn port_number(port: u32, field: &str) -> Check {
    if port == 0 || port > 65535 {
        return Err(invalid(format!("{field}: port {port} is not in 1-65535")));
    }
    Ok(())
}

/// A host name as VirtualServices and ServiceEntries use it: a DNS name, optionally with
/// one leading `*` wildcard label, or `*` alone.
pub(super) fn host(h: &str, field: &str) -> Check {
    if h.is_empty() {
        return Err(invalid(format!("{field}: host must not be empty")));
    }
    if h == "*" {
        return Ok(());
    }
    let rest = h.strip_prefix("*.").unwrap_or(h);
    if h.len() > 255 {
        return Err(invalid(format!(
            "{field}: host {h:?} is longer than 255 characters"
        )));
    }
    // A mistyped IP is not a name: Istio rejects an all-numeric top-level domain.
    if rest.contains('.')
        && rest
            .rsplit('.')
            .next()
            .is_some_and(|tld| tld.chars().all(|c| c.is_ascii_digit()))
    {
        return Err(invalid(format!(
            "{field}: host {h:?} is not a valid DNS name (top-level domain cannot be all-numeric)"
        )));
    }
    for label in rest.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(invalid(format!(
                "{field}: host {h:?} is not a valid DNS name (wildcard only as a leading '*.')"
            )));
        }
    }
    Ok(())
}

pub(super) fn string_match(m: &istio::StringMatch, field: &str) -> Check {
    let set = [&m.exact, &m.prefix, &m.regex]
        .iter()
        .filter(|v| v.is_some())
        .count();
    // None set is Istio's "present" match (for headers and query parameters).
    if set > 1 {
        return Err(invalid(format!(
            "{field}: only one of exact, prefix or regex may be set"
        )));
    }
    if m.prefix.as_deref() == Some("") && !field.ends_with(".uri") {
        return Err(invalid(format!(
            "{field}: prefix string match should not be empty"
        )));
    }
    if let Some(re) = &m.regex {
        if re.is_empty() {
            return Err(invalid(format!(
                "{field}: regex string match should not be empty"
            )));
        }
        // Envoy bounds a regex's program size; Istio approximates it by length.
        if re.len() > 1024 {
            return Err(invalid(format!(
                "{field}: regex is too large, max length allowed is 1024"
            )));
        }
        regex::Regex::new(re)
            .map_err(|e| invalid(format!("{field}: invalid regex {re:?}: {e}")))?;
    }
    Ok(())
}

pub(super) fn destination(d: &istio::Destination, field: &str) -> Check {
    host(&d.host, &format!("{field}.host"))?;
    if d.host.contains('*') {
        return Err(invalid(format!(
            "{field}.host: destination host {:?} must not be a wildcard",
            d.host
        )));
    }
    if !d.subset.is_empty() && !dns1123_label(&d.subset) {
        return Err(invalid(format!(
            "{field}.subset: subset name {:?} is invalid (a DNS-1123 label is required)",
            d.subset
        )));
    }
    if let Some(p) = &d.port {
        port_number(p.number, &format!("{field}.port.number"))?;
    }
    Ok(())
}

pub(super) fn weights(ws: impl Iterator<Item = i32> + Clone, count: usize, field: &str) -> Check {
    if let Some(w) = ws.clone().find(|w| *w < 0) {
        return Err(invalid(format!("{field}: weight {w} must not be negative")));
    }
    if count > 1 && ws.map(i64::from).sum::<i64>() == 0 {
        return Err(invalid(format!(
            "{field}: total weight of {count} destinations is 0"
        )));
    }
    Ok(())
}

/// Istio's selector rules: no empty keys, no wildcards; no labels at all is allowed
/// (it selects every workload of the namespace) but suspicious.
pub(super) fn workload_selector(s: &istio::WorkloadSelector, warnings: &mut Vec<String>) -> Check {
    for (k, v) in &s.labels {
        if k.is_empty() {
            return Err(invalid(format!(
                "workloadSelector: empty key is not supported in selector: \"{k}={v}\""
            )));
        }
        if k.contains('*') || v.contains('*') {
            return Err(invalid(format!(
                "workloadSelector: wildcard is not supported in selector: \"{k}={v}\""
            )));
        }
    }
    if s.labels.is_empty() {
        warnings.push(
            "workloadSelector specified without labels: selects every workload of the namespace"
                .into(),
        );
    }
    Ok(())
}

/// A DNS-1123 label as Istio checks port and subset names: 1-63 alphanumerics or `-`,
/// not starting or ending with `-` (upper case allowed).
pub(super) fn dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A Unix socket path: `@abstract`, or an absolute path to a file (not a directory).
pub(super) fn unix_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("unix address must not be empty");
    }
    if path.starts_with('@') {
        return Ok(());
    }
    if !path.starts_with('/') || path.ends_with('/') {
        return Err("a unix address must be an absolute path to a file (or @abstract)");
    }
    Ok(())
}

/// An IP address or a CIDR block (`10.0.0.0/8`, `2001:db8::/32`).
pub(super) fn ip_or_cidr(a: &str) -> bool {
    match a.split_once('/') {
        None => a.parse::<std::net::IpAddr>().is_ok(),
        Some((ip, bits)) => match (ip.parse::<std::net::IpAddr>(), bits.parse::<u8>()) {
            (Ok(std::net::IpAddr::V4(_)), Ok(b)) => b <= 32 && !bits.starts_with('+'),
            (Ok(std::net::IpAddr::V6(_)), Ok(b)) => b <= 128 && !bits.starts_with('+'),
            _ => false,
        },
    }
}

/// An HTTP header name (an RFC 7230 token).
pub(super) fn header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

/// Protocols Istio knows for a port (`protocol.Parse`, any case); empty means sniffed.
const PROTOCOLS: [&str; 12] = [
    "HTTP",
    "HTTP2",
    "HTTPS",
    "GRPC",
    "GRPC-WEB",
    "HTTP_PROXY",
    "TCP",
    "TLS",
    "MONGO",
    "MYSQL",
    "REDIS",
    "UDP",
];

pub(super) fn protocol(p: &str, field: &str) -> Check {
    if p.is_empty() || PROTOCOLS.iter().any(|k| k.eq_ignore_ascii_case(p)) {
        return Ok(());
    }
    Err(invalid(format!("{field}: unsupported protocol {p:?}")))
}

/// Istio's `exportTo` rules: `.`, `*`, `~` (ServiceEntries only) or namespace names,
/// without duplicates (`.` and the own namespace are one), `*` and `~` alone.
pub(super) fn export_to(namespace: &str, list: &[String], service_entry: bool) -> Check {
    let mut seen = BTreeSet::new();
    for (i, e) in list.iter().enumerate() {
        let f = format!("exportTo[{i}]");
        let valid = match e.as_str() {
            "." | "*" => true,
            "~" => service_entry,
            ns => dns1123_label(ns) && ns.chars().all(|c| !c.is_ascii_uppercase()),
        };
        if !valid {
            return Err(invalid(format!(
                "{f}: {e:?} is not a namespace, \".\" or \"*\"{}",
                if service_entry { " or \"~\"" } else { "" }
            )));
        }
        let key = if e == "." { namespace } else { e.as_str() };
        if !seen.insert(key) {
            return Err(invalid(format!(
                "{f}: duplicate entry {e:?} (\".\" is the namespace {namespace:?})"
            )));
        }
    }
    if list.len() > 1 && seen.contains("*") {
        return Err(invalid(
            "exportTo: cannot have both public (*) and non-public exportTo values",
        ));
    }
    if list.len() > 1 && seen.contains("~") {
        return Err(invalid(
            "exportTo: cannot export a service entry to no one (~) and someone",
        ));
    }
    Ok(())
}

fn sidecar(sc: &istio::Sidecar, warnings: &mut Vec<String>) -> Check {
    if let Some(selector) = &sc.workload_selector {
        workload_selector(selector, warnings)?;
    }
    if sc.egress.is_empty() && sc.ingress.is_empty() && sc.outbound_traffic_policy.is_none() {
        return Err(invalid(
            "sidecar: empty configuration provided (set ingress, egress or outboundTrafficPolicy)",
        ));
    }
    let mut ingress_ports = BTreeSet::new();
    for (i, l) in sc.ingress.iter().enumerate() {
        sidecar_ingress(i, l)?;
        if let Some(p) = &l.port
            && !ingress_ports.insert(p.number)
        {
            return Err(invalid(format!(
                "ingress[{i}].port.number: port {} is declared twice (ports on ingress \
                 listeners must be unique)",
                p.number
            )));
        }
    }
    let (mut egress_ports, mut sockets) = (BTreeSet::new(), BTreeSet::new());
    for (i, e) in sc.egress.iter().enumerate() {
        match &e.port {
            // The catch-all listener: one, and last.
            None if i + 1 != sc.egress.len() => {
                return Err(invalid(format!(
                    "egress[{i}].port: the egress listener with empty port should be the last listener in the list"
                )));
            }
            None => {}
            Some(p) => {
                sidecar_egress_port(i, p, &e.bind, &e.capture_mode)?;
                let unique = if p.number == 0 {
                    sockets.insert(e.bind.as_str())
                } else {
                    egress_ports.insert(p.number)
                };
                if !unique {
                    return Err(invalid(format!(
                        "egress[{i}].port: ports (and unix sockets) of egress listeners must be unique"
                    )));
                }
            }
        }
        if e.hosts.is_empty() {
            return Err(invalid(format!(
                "egress[{i}].hosts: at least one host is required"
            )));
        }
        for h in &e.hosts {
            let Some((ns, name)) = h.split_once('/') else {
                return Err(invalid(format!(
                    "egress[{i}].hosts: {h:?} must be namespace/dnsName (e.g. ./* or istio-system/*)"
                )));
            };
            if ns.is_empty() || name.is_empty() {
                return Err(invalid(format!(
                    "egress[{i}].hosts: {h:?} has an empty part"
                )));
            }
            let bare = ns.strip_prefix('~').unwrap_or(ns);
            if !(bare.is_empty() || bare == "*" || bare == "." || dns1123_label(bare)) {
                return Err(invalid(format!(
                    "egress[{i}].hosts: {h:?}: invalid namespace {ns:?}"
                )));
            }
            if name != "*" {
                if !name.contains('.') {
                    return Err(invalid(format!(
                        "egress[{i}].hosts: {h:?}: short names (non FQDN) are not allowed"
                    )));
                }
                host(name, &format!("egress[{i}].hosts"))?;
            }
        }
        if !matches!(
            e.capture_mode.as_str(),
            "" | "DEFAULT" | "IPTABLES" | "NONE"
        ) {
            return Err(invalid(format!(
                "egress[{i}].captureMode: unknown capture mode {:?}",
                e.capture_mode
            )));
        }
    }
    if let Some(p) = &sc.outbound_traffic_policy {
        outbound_traffic_policy(p)?;
    }
    Ok(())
}

/// An egress listener's port: a known protocol and a valid name; port 0 only for a Unix
/// socket bind (captured as DEFAULT or NONE), otherwise a real port and an IP bind.
fn sidecar_egress_port(i: usize, p: &istio::SidecarPort, bind: &str, capture: &str) -> Check {
    let f = format!("egress[{i}]");
    if !p.name.is_empty() && !dns1123_label(&p.name) {
        return Err(invalid(format!(
            "{f}.port.name: invalid port name {:?}",
            p.name
        )));
    }
    protocol(&p.protocol, &format!("{f}.port.protocol"))?;
    if p.number == 0 {
        let Some(path) = bind.strip_prefix("unix://") else {
            return Err(invalid(format!(
                "{f}.port.number: ports with 0 value must have a unix domain socket bind address"
            )));
        };
        unix_path(path).map_err(|why| invalid(format!("{f}.bind: {why}")))?;
        if !matches!(capture, "" | "DEFAULT" | "NONE") {
            return Err(invalid(format!(
                "{f}.captureMode must be DEFAULT or NONE for unix domain socket listeners"
            )));
        }
        // Valid for Istio, but Shoal's listeners bind IP ports only: rejected, said
        // plainly, rather than sent to the proxy as a listener it would refuse.
        return Err(invalid(format!(
            "{f}.bind: unix domain socket egress listeners are not supported by Shoal (valid in Istio)"
        )));
    }
    port_number(p.number, &format!("{f}.port.number"))?;
    if !bind.is_empty() && bind.parse::<std::net::IpAddr>().is_err() {
        return Err(invalid(format!("{f}.bind: {bind:?} is not an IP address")));
    }
    Ok(())
}

/// A Sidecar's outbound policy: a known mode, and an egress proxy only where unknown
/// traffic leaves at all (`ALLOW_ANY`), naming a host and a port as Istio requires.
fn outbound_traffic_policy(p: &istio::OutboundTrafficPolicy) -> Check {
    if !matches!(p.mode.as_str(), "" | "ALLOW_ANY" | "REGISTRY_ONLY") {
        return Err(invalid(format!(
            "outboundTrafficPolicy.mode: unknown mode {:?}",
            p.mode
        )));
    }
    let Some(proxy) = &p.egress_proxy else {
        return Ok(());
    };
    if p.mode == "REGISTRY_ONLY" {
        return Err(invalid(
            "outboundTrafficPolicy.egressProxy: only allowed with mode ALLOW_ANY",
        ));
    }
    if proxy.host.is_empty() {
        return Err(invalid(
            "outboundTrafficPolicy.egressProxy.host: a host is required",
        ));
    }
    host(&proxy.host, "outboundTrafficPolicy.egressProxy.host")?;
    if proxy.host.contains('*') {
        return Err(invalid(
            "outboundTrafficPolicy.egressProxy.host: a wildcard is not a host",
        ));
    }
    match &proxy.port {
        Some(port) => port_number(port.number, "outboundTrafficPolicy.egressProxy.port.number"),
        None => Err(invalid(
            "outboundTrafficPolicy.egressProxy.port: a port is required",
        )),
    }
}

/// One Sidecar ingress listener, by Istio's rules: a port with a known protocol, an IP
/// bind, a known capture mode, and a default endpoint on the loopback or the workload's
/// own address (or a Unix socket).
fn sidecar_ingress(i: usize, l: &istio::IngressListener) -> Check {
    let Some(p) = &l.port else {
        return Err(invalid(format!(
            "ingress[{i}].port: a port is required for ingress listeners"
        )));
    };
    port_number(p.number, &format!("ingress[{i}].port.number"))?;
    // Empty is sniffed, as on a Service port.
    protocol(&p.protocol, &format!("ingress[{i}].port.protocol"))?;
    if !p.name.is_empty() && !dns1123_label(&p.name) {
        return Err(invalid(format!(
            "ingress[{i}].port.name: invalid port name {:?}",
            p.name
        )));
    }
    if !l.bind.is_empty() && l.bind.parse::<std::net::IpAddr>().is_err() {
        return Err(invalid(format!(
            "ingress[{i}].bind: {:?} is not an IP address",
            l.bind
        )));
    }
    if !matches!(
        l.capture_mode.as_str(),
        "" | "DEFAULT" | "IPTABLES" | "NONE"
    ) {
        return Err(invalid(format!(
            "ingress[{i}].captureMode: unknown capture mode {:?}",
            l.capture_mode
        )));
    }
    default_endpoint(&l.default_endpoint)
        .map(|_| ())
        .map_err(|reason| invalid(format!("ingress[{i}].defaultEndpoint: {reason}")))
}

/// Where a Sidecar ingress listener forwards to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DefaultEndpoint<'a> {
    /// Unset: the connection's original destination.
    OriginalDestination,
    /// `127.0.0.1:PORT` or `[::1]:PORT`.
    Loopback { ip: &'a str, port: u32 },
    /// `0.0.0.0:PORT` or `[::]:PORT`: the workload's own address.
    WorkloadIp { port: u32 },
    /// `unix:///path` (or `unix://@abstract`).
    Unix(&'a str),
}

/// Parses a Sidecar ingress `defaultEndpoint`, or says why it is not one.
pub fn default_endpoint(endpoint: &str) -> Result<DefaultEndpoint<'_>, String> {
    if endpoint.is_empty() {
        return Ok(DefaultEndpoint::OriginalDestination);
    }
    if let Some(path) = endpoint.strip_prefix("unix://") {
        if path.is_empty() || !(path.starts_with('/') || path.starts_with('@')) {
            return Err(format!(
                "{endpoint:?}: a unix address needs an absolute path (unix:///path)"
            ));
        }
        return Ok(DefaultEndpoint::Unix(endpoint));
    }
    let form = "must be 127.0.0.1:<port>, 0.0.0.0:<port>, [::1]:<port>, [::]:<port>, \
                unix://<path> or unset";
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        return Err(format!("{endpoint:?} {form}"));
    };
    let port = match port.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => p,
        _ => return Err(format!("{endpoint:?}: port {port:?} is not in 1-65535")),
    };
    match host {
        "127.0.0.1" => Ok(DefaultEndpoint::Loopback {
            ip: "127.0.0.1",
            port,
        }),
        "[::1]" => Ok(DefaultEndpoint::Loopback { ip: "::1", port }),
        "0.0.0.0" | "[::]" => Ok(DefaultEndpoint::WorkloadIp { port }),
        // Istio accepts `:PORT` and, having no address to send to, passes through.
        "" => Ok(DefaultEndpoint::OriginalDestination),
        _ => Err(format!("{endpoint:?} {form}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingress(number: u32, protocol: &str, endpoint: &str) -> istio::IngressListener {
        istio::IngressListener {
            port: Some(istio::SidecarPort {
                number,
                protocol: protocol.into(),
                name: String::new(),
            }),
            default_endpoint: endpoint.into(),
            ..Default::default()
        }
    }

    fn check(ingress: Vec<istio::IngressListener>) -> Check {
        sidecar(
            &istio::Sidecar {
                ingress,
                ..Default::default()
            },
            &mut Vec::new(),
        )
    }

    fn egress(yaml: &str) -> Check {
        let sc: istio::Sidecar = serde_norway::from_str(&format!("egress:\n{yaml}")).unwrap();
        sidecar(&sc, &mut Vec::new())
    }

    #[test]
    fn sidecar_egress_by_istio_rules() {
        assert!(
            egress("- hosts: ['./*', 'istio-system/*', '~shop/*', '*/api.example.com']\n").is_ok()
        );
        let err = |y: &str| egress(y).unwrap_err().0;
        assert!(err("- hosts: [./reviews]\n").contains("short names"));
        assert!(
            err("- hosts: ['./*']\n- port: {number: 80, protocol: HTTP}\n  hosts: ['./*']\n")
                .contains("should be the last")
        );
        assert!(err("- port: {number: 80, protocol: HTTP}\n  hosts: ['./*']\n- port: {number: 80, protocol: TCP}\n  hosts: ['./*']\n").contains("must be unique"));
        assert!(err("- port: {number: 0, protocol: HTTP}\n  bind: unix:///var/run/out.sock\n  hosts: ['./*']\n").contains("not supported by Shoal"));
        assert!(
            err("- port: {number: 0, protocol: HTTP}\n  bind: unix://rel.sock\n  hosts: ['./*']\n")
                .contains("absolute path")
        );
        assert!(
            err("- port: {number: 0, protocol: HTTP}\n  hosts: ['./*']\n")
                .contains("unix domain socket")
        );
        assert!(
            err("- port: {number: 80, protocol: HTTP, name: web_1}\n  hosts: ['./*']\n")
                .contains("port.name")
        );
        assert!(
            err("- port: {number: 80, protocol: HTTP}\n  bind: localhost\n  hosts: ['./*']\n")
                .contains("egress[0].bind")
        );
        let selector = "workloadSelector: {labels: {app: '*'}}\negress:\n- hosts: ['./*']\n";
        let sc: istio::Sidecar = serde_norway::from_str(selector).unwrap();
        assert!(
            sidecar(&sc, &mut Vec::new())
                .unwrap_err()
                .0
                .contains("wildcard")
        );
    }

    #[test]
    fn sidecar_ingress_by_istio_rules() {
        assert!(check(vec![ingress(8080, "HTTP", "127.0.0.1:8080")]).is_ok());
        assert!(check(vec![ingress(9090, "tcp", "0.0.0.0:9091")]).is_ok());
        assert!(check(vec![ingress(7000, "GRPC", "unix:///var/run/a.sock")]).is_ok());
        assert!(check(vec![ingress(7000, "HTTP2", "")]).is_ok());
        let err = |l: Vec<istio::IngressListener>| check(l).unwrap_err().0;
        assert!(
            err(vec![ingress(8080, "HTTP", "10.0.0.1:8080")])
                .contains("ingress[0].defaultEndpoint")
        );
        assert!(err(vec![ingress(8080, "HTTP", "127.0.0.1:0")]).contains("not in 1-65535"));
        assert!(err(vec![ingress(8080, "HTTP", "127.0.0.1")]).contains("must be"));
        // An empty protocol is sniffed (Istio accepts it); an unknown one is not.
        assert!(check(vec![ingress(8080, "", "")]).is_ok());
        assert!(err(vec![ingress(8080, "QUIC", "")]).contains("ingress[0].port.protocol"));
        assert!(err(vec![ingress(0, "HTTP", "")]).contains("ingress[0].port.number"));
        assert!(
            err(vec![ingress(80, "HTTP", ""), ingress(80, "TCP", "")])
                .contains("ingress[1].port.number: port 80 is declared twice")
        );
        let mut no_port = ingress(80, "HTTP", "");
        no_port.port = None;
        assert!(err(vec![no_port]).contains("ingress[0].port: a port is required"));
        let mut bad_bind = ingress(80, "HTTP", "");
        bad_bind.bind = "not-an-ip".into();
        assert!(err(vec![bad_bind]).contains("ingress[0].bind"));
        let mut bad_mode = ingress(80, "HTTP", "");
        bad_mode.capture_mode = "SOMETIMES".into();
        assert!(err(vec![bad_mode]).contains("ingress[0].captureMode"));
    }

    #[test]
    fn egress_proxy_needs_allow_any_a_host_and_a_port() {
        let policy = |mode: &str, host: &str, port: Option<u32>| {
            sidecar(
                &istio::Sidecar {
                    outbound_traffic_policy: Some(istio::OutboundTrafficPolicy {
                        mode: mode.into(),
                        egress_proxy: Some(istio::Destination {
                            host: host.into(),
                            subset: String::new(),
                            port: port.map(|number| istio::PortSelector { number }),
                        }),
                    }),
                    ..Default::default()
                },
                &mut Vec::new(),
            )
        };
        assert!(policy("ALLOW_ANY", "egress.example.com", Some(3128)).is_ok());
        assert!(policy("", "egress.example.com", Some(3128)).is_ok());
        let err = |c: Check| c.unwrap_err().0;
        assert!(
            err(policy("REGISTRY_ONLY", "egress.example.com", Some(3128)))
                .contains("only allowed with mode ALLOW_ANY")
        );
        assert!(err(policy("ALLOW_ANY", "", Some(3128))).contains("egressProxy.host"));
        assert!(
            err(policy("ALLOW_ANY", "egress.example.com", None))
                .contains("egressProxy.port: a port is required")
        );
        assert!(
            err(policy("ALLOW_ANY", "egress.example.com", Some(0))).contains("egressProxy.port")
        );
    }

    #[test]
    fn hosts_with_a_numeric_top_level_domain_are_not_names() {
        assert!(host("10.0.0.1", "h").unwrap_err().0.contains("all-numeric"));
        assert!(host("a.example.com", "h").is_ok());
        assert!(host("reviews", "h").is_ok());
        assert!(host("*.svc", "h").is_ok());
    }

    #[test]
    fn default_endpoints() {
        assert_eq!(
            default_endpoint(""),
            Ok(DefaultEndpoint::OriginalDestination)
        );
        assert_eq!(
            default_endpoint("[::1]:80"),
            Ok(DefaultEndpoint::Loopback {
                ip: "::1",
                port: 80
            })
        );
        assert_eq!(
            default_endpoint("[::]:80"),
            Ok(DefaultEndpoint::WorkloadIp { port: 80 })
        );
        assert!(default_endpoint("unix://relative").is_err());
    }
}
