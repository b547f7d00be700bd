//! Per-object validation with the rules Istio's own validation applies.
//!
//! An error rejects the object (an earlier valid version stays served); warnings accept
//! it and are logged, as Istio's analyzers would report them.

mod destination_rule;
mod gateway;
mod virtual_service;

use super::{Config, Spec, istio};
use destination_rule::destination_rule;
use gateway::gateway;
use std::collections::BTreeSet;
use std::time::Duration;
use virtual_service::virtual_service;

/// The reason an object was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid(pub String);

pub(super) type Check = Result<(), Invalid>;

pub(super) fn invalid(msg: impl Into<String>) -> Invalid {
    Invalid(msg.into())
}

/// Validates one object; `Ok` carries warnings.
pub fn validate(config: &Config) -> Result<Vec<String>, Invalid> {
    let mut warnings = Vec::new();
    match &config.spec {
        Spec::VirtualService(vs) => virtual_service(vs)?,
        Spec::DestinationRule(dr) => {
            destination_rule(dr, &config.meta.namespace, &mut warnings)?;
        }
        Spec::ServiceEntry(se) => service_entry(se)?,
        Spec::WorkloadEntry(we) => workload_entry(we)?,
        Spec::Sidecar(sc) => sidecar(sc)?,
        Spec::Gateway(gw) => gateway(gw, &mut warnings)?,
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
        Spec::Namespace(_) | Spec::Pod(_) | Spec::Endpoints(_) | Spec::Secret(_) => {}
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
    if !secs.is_finite() || secs < 0.0 {
        return Err(invalid(format!("duration {s:?} is out of range")));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub(super) fn duration_field(value: &Option<String>, field: &str) -> Check {
    if let Some(v) = value {
        let d = parse_duration(v).map_err(|e| invalid(format!("{field}: {}", e.0)))?;
        if d < Duration::from_millis(1) && d != Duration::ZERO {
            return Err(invalid(format!("{field}: duration must be at least 1ms")));
        }
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
    if let Some(re) = &m.regex {
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

fn service_entry(se: &istio::ServiceEntry) -> Check {
    if se.hosts.is_empty() {
        return Err(invalid("service entry must have at least one host"));
    }
    for (i, h) in se.hosts.iter().enumerate() {
        host(h, &format!("hosts[{i}]"))?;
    }
    if se.ports.is_empty() {
        return Err(invalid("service entry must have at least one port"));
    }
    let mut numbers = BTreeSet::new();
    for (i, p) in se.ports.iter().enumerate() {
        port_number(p.number, &format!("ports[{i}].number"))?;
        if !numbers.insert(p.number) {
            return Err(invalid(format!("ports[{i}]: duplicate port {}", p.number)));
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
    if resolution == "STATIC" && se.workload_selector.is_none() {
        for (i, e) in se.endpoints.iter().enumerate() {
            if e.address.parse::<std::net::IpAddr>().is_err() {
                return Err(invalid(format!(
                    "endpoints[{i}].address {:?} must be an IP for STATIC resolution",
                    e.address
                )));
            }
        }
    }
    if se.workload_selector.is_some() && !se.endpoints.is_empty() {
        return Err(invalid(
            "only one of endpoints or workloadSelector can be set",
        ));
    }
    for (i, e) in se.endpoints.iter().enumerate() {
        workload_entry(e).map_err(|e| invalid(format!("endpoints[{i}]: {}", e.0)))?;
    }
    Ok(())
}

fn workload_entry(we: &istio::WorkloadEntry) -> Check {
    if we.address.is_empty() {
        return Err(invalid("address is required"));
    }
    for (name, port) in &we.ports {
        port_number(*port, &format!("ports[{name}]"))?;
    }
    Ok(())
}

fn sidecar(sc: &istio::Sidecar) -> Check {
    if sc.egress.is_empty() && sc.outbound_traffic_policy.is_none() {
        return Err(invalid(
            "sidecar: empty configuration provided (set egress or outboundTrafficPolicy)",
        ));
    }
    for (i, e) in sc.egress.iter().enumerate() {
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
            if name != "*" {
                host(name, &format!("egress[{i}].hosts"))?;
            }
        }
        if let Some(p) = &e.port {
            port_number(p.number, &format!("egress[{i}].port.number"))?;
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
    if let Some(p) = &sc.outbound_traffic_policy
        && !matches!(p.mode.as_str(), "" | "ALLOW_ANY" | "REGISTRY_ONLY")
    {
        return Err(invalid(format!(
            "outboundTrafficPolicy.mode: unknown mode {:?}",
            p.mode
        )));
    }
    Ok(())
}
