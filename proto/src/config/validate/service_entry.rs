//! ServiceEntry and WorkloadEntry validation, by Istio's rules (`ValidateServiceEntry`,
//! `ValidateWorkloadEntry` and the CRD schema's rules): what Istio rejects is rejected
//! with the field named, what it only warns about is accepted with a warning.

use super::workload_group::labels;
use super::{
    Check, dns1123_label, export_to, host, invalid, ip_or_cidr, port_number, protocol, unix_path,
};
use crate::config::istio::{ServiceEntry, ServiceEntryPort, WorkloadEntry};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The address prefix of a workload reached over a Unix domain socket.
const UNIX_PREFIX: &str = "unix://";

pub(super) fn service_entry(
    se: &ServiceEntry,
    namespace: &str,
    warnings: &mut Vec<String>,
) -> Check {
    if se.hosts.is_empty() {
        return Err(invalid("hosts: service entry must have at least one host"));
    }
    for (i, h) in se.hosts.iter().enumerate() {
        if h == "*" {
            return Err(invalid(format!(
                "hosts[{i}]: {h:?} is not allowed in a service entry (hostname cannot be wildcard)"
            )));
        }
        host(h, &format!("hosts[{i}]"))?;
    }
    if let Some(selector) = &se.workload_selector {
        super::workload_selector(selector, warnings)?;
        if !se.endpoints.is_empty() {
            return Err(invalid(
                "only one of endpoints or workloadSelector can be set",
            ));
        }
    }
    let resolution = se.resolution.as_deref().unwrap_or("NONE");
    if !matches!(resolution, "NONE" | "STATIC" | "DNS" | "DNS_ROUND_ROBIN") {
        return Err(invalid(format!(
            "resolution: unknown resolution {resolution:?}"
        )));
    }
    if let Some(loc) = &se.location
        && !matches!(loc.as_str(), "MESH_EXTERNAL" | "MESH_INTERNAL")
    {
        return Err(invalid(format!("location: unknown location {loc:?}")));
    }
    for (i, a) in se.addresses.iter().enumerate() {
        let cidr = a.contains('/');
        if !ip_or_cidr(a) {
            return Err(invalid(format!(
                "addresses[{i}]: {a:?} is not an IP address or CIDR block"
            )));
        }
        if cidr && !matches!(resolution, "NONE" | "STATIC") {
            return Err(invalid(format!(
                "addresses[{i}]: CIDR addresses are allowed only for NONE/STATIC resolution, not {resolution}"
            )));
        }
    }
    // Istio accepts a ServiceEntry without ports (nothing is served for it until some
    // are added), so a port list is not required.
    let names = ports(&se.ports)?;
    match resolution {
        "NONE" if !se.endpoints.is_empty() => {
            return Err(invalid(
                "endpoints: no endpoints should be provided for resolution NONE",
            ));
        }
        "NONE" if se.workload_selector.is_some() => {
            warnings.push("workloadSelector should not be set when resolution is NONE".into());
        }
        "DNS" | "DNS_ROUND_ROBIN" if se.endpoints.is_empty() => {
            if let Some((i, h)) = se.hosts.iter().enumerate().find(|(_, h)| h.contains('*')) {
                return Err(invalid(format!(
                    "hosts[{i}]: {h:?}: hosts must be FQDNs (no wildcard) when resolution {resolution} has no endpoints"
                )));
            }
        }
        _ => {}
    }
    if resolution == "DNS_ROUND_ROBIN" && se.endpoints.len() > 1 {
        return Err(invalid(
            "endpoints: there must only be 0 or 1 endpoint for resolution DNS_ROUND_ROBIN",
        ));
    }
    for (i, e) in se.endpoints.iter().enumerate() {
        endpoint(e, resolution, &names, warnings)
            .map_err(|e| invalid(format!("endpoints[{i}]: {}", e.0)))?;
    }
    // Plain TCP gives no way to tell the hosts apart (HTTP has the authority, TLS the
    // SNI), unless resolution is NONE, where hosts are not used to route.
    if resolution != "NONE"
        && se.hosts.len() > 1
        && let Some((i, p)) = se
            .ports
            .iter()
            .enumerate()
            .find(|(_, p)| !http_or_tls(&p.protocol))
    {
        return Err(invalid(format!(
            "ports[{i}]: multiple hosts provided with a non-HTTP, non-TLS port ({:?})",
            p.protocol
        )));
    }
    export_to(namespace, &se.export_to, true)
}

/// Unique names and numbers, valid ports and protocols; returns the port names.
fn ports(ports: &[ServiceEntryPort]) -> Result<BTreeSet<&str>, super::Invalid> {
    let (mut names, mut numbers) = (BTreeSet::new(), BTreeSet::new());
    for (i, p) in ports.iter().enumerate() {
        port_number(p.number, &format!("ports[{i}].number"))?;
        if !numbers.insert(p.number) {
            return Err(invalid(format!(
                "ports[{i}].number: port {} is already defined",
                p.number
            )));
        }
        if !dns1123_label(&p.name) {
            return Err(invalid(format!(
                "ports[{i}].name: invalid port name {:?} (a DNS-1123 label is required)",
                p.name
            )));
        }
        if !names.insert(p.name.as_str()) {
            return Err(invalid(format!(
                "ports[{i}].name: port name {:?} is already defined",
                p.name
            )));
        }
        if let Some(target) = p.target_port.filter(|t| *t != 0) {
            port_number(target, &format!("ports[{i}].targetPort"))?;
        }
        protocol(&p.protocol, &format!("ports[{i}].protocol"))?;
    }
    Ok(names)
}

/// An inline endpoint of a ServiceEntry: a WorkloadEntry whose address must fit the
/// resolution (an IP or socket for STATIC) and whose ports name the entry's ports.
fn endpoint(
    e: &WorkloadEntry,
    resolution: &str,
    service_ports: &BTreeSet<&str>,
    warnings: &mut Vec<String>,
) -> Check {
    workload_entry(e, warnings)?;
    let unix = e.address.starts_with(UNIX_PREFIX);
    if resolution == "STATIC"
        && !unix
        && !e.address.is_empty()
        && e.address.parse::<IpAddr>().is_err()
    {
        return Err(invalid(format!(
            "address {:?} must be an IP address (or unix:// socket) for STATIC resolution",
            e.address
        )));
    }
    if unix && resolution == "STATIC" && service_ports.len() != 1 {
        return Err(invalid(format!(
            "address {:?}: exactly 1 service port is required for unix endpoints",
            e.address
        )));
    }
    for name in e.ports.keys() {
        if !service_ports.contains(name.as_str()) {
            return Err(invalid(format!(
                "ports[{name}]: endpoint port {name:?} is not defined by the service entry"
            )));
        }
    }
    Ok(())
}

/// A WorkloadEntry alone (or a ServiceEntry's endpoint): an address (or at least a
/// network: Istio then reaches it through that network's gateway), a Unix socket as an
/// absolute file path without ports, DNS-1123 port names, valid labels.
pub(super) fn workload_entry(we: &WorkloadEntry, warnings: &mut Vec<String>) -> Check {
    let address = we.address.as_str();
    if address.is_empty() {
        if we.network.is_empty() {
            return Err(invalid("address is required (or a network)"));
        }
        warnings.push(format!(
            "address is unset with network {:?}: reached through that network's gateway",
            we.network
        ));
    } else if let Some(path) = address.strip_prefix(UNIX_PREFIX) {
        unix_path(path).map_err(|why| invalid(format!("address {address:?}: {why}")))?;
        if !we.ports.is_empty() {
            return Err(invalid(format!(
                "address {address:?}: a unix endpoint must not include ports"
            )));
        }
    } else if address.parse::<IpAddr>().is_err() {
        fqdn(address).map_err(|why| {
            invalid(format!(
                "address {address:?} is not a valid IP address or FQDN: {why}"
            ))
        })?;
    }
    for (name, port) in &we.ports {
        if !dns1123_label(name) {
            return Err(invalid(format!(
                "ports[{name}]: invalid port name {name:?} (a DNS-1123 label is required)"
            )));
        }
        port_number(*port, &format!("ports[{name}]"))?;
    }
    labels(&we.labels, "labels")
}

/// A fully qualified DNS name: labels, no wildcard, a top-level domain that is not all
/// digits (so a mistyped IP is not taken for a name).
fn fqdn(name: &str) -> Result<(), &'static str> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if trimmed.is_empty() || name.len() > 255 {
        return Err("empty or longer than 255 characters");
    }
    let labels: Vec<&str> = trimmed.split('.').collect();
    if !labels.iter().all(|l| dns1123_label(l)) {
        return Err("each label must be a DNS-1123 label");
    }
    if labels
        .last()
        .is_some_and(|l| l.chars().all(|c| c.is_ascii_digit()))
    {
        return Err("the top-level domain cannot be all-numeric");
    }
    Ok(())
}

/// Istio's HTTP (`IsHTTP`) and TLS (`IsTLS`) protocols, which can tell hosts apart.
fn http_or_tls(protocol: &str) -> bool {
    [
        "HTTP",
        "HTTP2",
        "HTTP_PROXY",
        "GRPC",
        "GRPC-WEB",
        "HTTPS",
        "TLS",
    ]
    .iter()
    .any(|p| p.eq_ignore_ascii_case(protocol))
}

#[cfg(test)]
mod tests;
