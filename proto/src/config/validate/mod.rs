//! Per-object validation with the rules Istio's own validation applies.
//!
//! An error rejects the object (an earlier valid version stays served); warnings accept
//! it and are logged, as Istio's analyzers would report them.

mod gateway;
mod virtual_service;

use super::{Config, Spec, istio};
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
            destination_rule(dr)?;
            if uses_failover_priority(dr) {
                warnings.push(
                    "localityLbSetting.failoverPriority is not supported by Shoal: ignored".into(),
                );
            }
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

fn traffic_policy(tp: &istio::TrafficPolicy, field: &str) -> Check {
    let lb = |lb: &Option<istio::LoadBalancerSettings>, f: &str| -> Check {
        if let Some(lb) = lb {
            if lb.simple.is_some() && lb.consistent_hash.is_some() {
                return Err(invalid(format!(
                    "{f}.loadBalancer: simple and consistentHash cannot both be set"
                )));
            }
            if let Some(l) = &lb.locality_lb_setting {
                locality_lb(l, &format!("{f}.loadBalancer.localityLbSetting"))?;
            }
            if let Some(s) = &lb.simple
                && !matches!(
                    s.as_str(),
                    "UNSPECIFIED"
                        | "ROUND_ROBIN"
                        | "LEAST_CONN"
                        | "LEAST_REQUEST"
                        | "RANDOM"
                        | "PASSTHROUGH"
                )
            {
                return Err(invalid(format!(
                    "{f}.loadBalancer.simple: unknown load balancer {s:?}"
                )));
            }
        }
        Ok(())
    };
    let pool = |cp: &Option<istio::ConnectionPoolSettings>, f: &str| -> Check {
        if let Some(cp) = cp {
            if let Some(tcp) = &cp.tcp {
                if tcp.max_connections.is_some_and(|v| v < 0) {
                    return Err(invalid(format!(
                        "{f}.connectionPool.tcp.maxConnections must not be negative"
                    )));
                }
                duration_field(
                    &tcp.connect_timeout,
                    &format!("{f}.connectionPool.tcp.connectTimeout"),
                )?;
            }
            if let Some(http) = &cp.http {
                for (name, v) in [
                    ("http1MaxPendingRequests", http.http1_max_pending_requests),
                    ("http2MaxRequests", http.http2_max_requests),
                    ("maxRequestsPerConnection", http.max_requests_per_connection),
                    ("maxRetries", http.max_retries),
                ] {
                    if v.is_some_and(|v| v < 0) {
                        return Err(invalid(format!(
                            "{f}.connectionPool.http.{name} must not be negative"
                        )));
                    }
                }
                duration_field(
                    &http.idle_timeout,
                    &format!("{f}.connectionPool.http.idleTimeout"),
                )?;
            }
        }
        Ok(())
    };
    let outlier = |od: &Option<istio::OutlierDetection>, f: &str| -> Check {
        if let Some(od) = od {
            duration_field(&od.interval, &format!("{f}.outlierDetection.interval"))?;
            duration_field(
                &od.base_ejection_time,
                &format!("{f}.outlierDetection.baseEjectionTime"),
            )?;
            if od
                .max_ejection_percent
                .is_some_and(|p| !(0..=100).contains(&p))
            {
                return Err(invalid(format!(
                    "{f}.outlierDetection.maxEjectionPercent must be in 0-100"
                )));
            }
        }
        Ok(())
    };
    lb(&tp.load_balancer, field)?;
    pool(&tp.connection_pool, field)?;
    outlier(&tp.outlier_detection, field)?;
    for (i, p) in tp.port_level_settings.iter().enumerate() {
        let f = format!("{field}.portLevelSettings[{i}]");
        match &p.port {
            Some(port) => port_number(port.number, &format!("{f}.port.number"))?,
            None => return Err(invalid(format!("{f}.port is required"))),
        }
        lb(&p.load_balancer, &f)?;
        pool(&p.connection_pool, &f)?;
        outlier(&p.outlier_detection, &f)?;
    }
    Ok(())
}

/// Istio's rules for a locality LB setting: distribute or failover, not both; each
/// distribute's weights sum to 100 and its localities use `*` only as the last part;
/// failover names two different regions, without wildcards.
fn locality_lb(l: &istio::LocalityLbSetting, f: &str) -> Check {
    if !l.distribute.is_empty() && !l.failover.is_empty() {
        return Err(invalid(format!(
            "{f}: distribute and failover cannot both be set"
        )));
    }
    let locality = |loc: &str, field: String| -> Check {
        let parts: Vec<&str> = loc.split('/').collect();
        let wildcard_inside = parts[..parts.len() - 1].contains(&"*");
        if loc.is_empty() || parts.len() > 3 || wildcard_inside {
            return Err(invalid(format!(
                "{field}: {loc:?} is not region/zone/subzone (with `*` only last)"
            )));
        }
        Ok(())
    };
    for (i, d) in l.distribute.iter().enumerate() {
        locality(&d.from, format!("{f}.distribute[{i}].from"))?;
        let mut total = 0u64;
        for (to, weight) in &d.to {
            locality(to, format!("{f}.distribute[{i}].to"))?;
            total += u64::from(*weight);
        }
        if total != 100 {
            return Err(invalid(format!(
                "{f}.distribute[{i}].to: weights sum to {total}, not 100"
            )));
        }
    }
    for (i, o) in l.failover.iter().enumerate() {
        if o.from == o.to {
            return Err(invalid(format!(
                "{f}.failover[{i}]: from and to must be different regions"
            )));
        }
        if o.from.contains(['*', '/']) || o.to.contains(['*', '/']) {
            return Err(invalid(format!(
                "{f}.failover[{i}]: from and to are regions, without `/` or `*`"
            )));
        }
    }
    Ok(())
}

fn uses_failover_priority(dr: &istio::DestinationRule) -> bool {
    let policies = dr
        .traffic_policy
        .iter()
        .chain(dr.subsets.iter().filter_map(|s| s.traffic_policy.as_ref()));
    policies
        .flat_map(|tp| {
            tp.load_balancer.iter().chain(
                tp.port_level_settings
                    .iter()
                    .filter_map(|p| p.load_balancer.as_ref()),
            )
        })
        .filter_map(|lb| lb.locality_lb_setting.as_ref())
        .any(|l| !l.failover_priority.is_empty())
}

fn destination_rule(dr: &istio::DestinationRule) -> Check {
    host(&dr.host, "host")?;
    if let Some(tp) = &dr.traffic_policy {
        traffic_policy(tp, "trafficPolicy")?;
    }
    let mut names = BTreeSet::new();
    for (i, s) in dr.subsets.iter().enumerate() {
        if s.name.is_empty() {
            return Err(invalid(format!("subsets[{i}].name is required")));
        }
        if !names.insert(&s.name) {
            return Err(invalid(format!(
                "subsets[{i}]: duplicate subset name {:?}",
                s.name
            )));
        }
        if let Some(tp) = &s.traffic_policy {
            traffic_policy(tp, &format!("subsets[{i}].trafficPolicy"))?;
        }
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
