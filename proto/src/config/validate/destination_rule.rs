//! DestinationRule validation, by Istio's rules (`ValidateDestinationRule` and the
//! agent's `ValidateTLS`): what Istio rejects is rejected with the field named; what
//! Shoal accepts but cannot act on (`credentialName` on sidecars, `failoverPriority`) is
//! accepted with a warning.

use super::workload_group::labels;
use super::{
    Check, dns1123_label, duration_field, export_to, host, invalid, parse_duration, port_number,
    strict_duration, workload_selector,
};
use crate::config::istio;
use std::collections::BTreeSet;

/// Maglev tables must be prime and below this (Envoy's limit).
const MAGLEV_MAX_TABLE_SIZE: u64 = 5_000_011;

pub(super) fn destination_rule(
    dr: &istio::DestinationRule,
    namespace: &str,
    warnings: &mut Vec<String>,
) -> Check {
    host(&dr.host, "host")?;
    if let Some(tp) = &dr.traffic_policy {
        traffic_policy(tp, "trafficPolicy", warnings)?;
    }
    let mut names = BTreeSet::new();
    for (i, s) in dr.subsets.iter().enumerate() {
        if s.name.is_empty() {
            return Err(invalid(format!("subsets[{i}].name is required")));
        }
        if !dns1123_label(&s.name) {
            return Err(invalid(format!(
                "subsets[{i}].name: subset name {:?} is invalid (a DNS-1123 label is required)",
                s.name
            )));
        }
        labels(&s.labels, &format!("subsets[{i}].labels"))?;
        if !names.insert(&s.name) {
            return Err(invalid(format!(
                "subsets[{i}]: duplicate subset name {:?}",
                s.name
            )));
        }
        if let Some(tp) = &s.traffic_policy {
            traffic_policy(tp, &format!("subsets[{i}].trafficPolicy"), warnings)?;
        }
    }
    if let Some(selector) = &dr.workload_selector {
        workload_selector(selector, warnings)?;
        selector_export_to(&dr.export_to, namespace)?;
    }
    export_to(namespace, &dr.export_to, false)
}

fn traffic_policy(tp: &istio::TrafficPolicy, field: &str, warnings: &mut Vec<String>) -> Check {
    let outlier = tp.outlier_detection.is_some();
    load_balancer(&tp.load_balancer, outlier, field, warnings)?;
    connection_pool(&tp.connection_pool, field)?;
    outlier_detection(&tp.outlier_detection, field)?;
    tls(tp.tls.as_deref(), field, warnings)?;
    for (i, p) in tp.port_level_settings.iter().enumerate() {
        let f = format!("{field}.portLevelSettings[{i}]");
        match &p.port {
            Some(port) => port_number(port.number, &format!("{f}.port.number"))?,
            None => return Err(invalid(format!("{f}.port is required"))),
        }
        if p.load_balancer.is_none()
            && p.connection_pool.is_none()
            && p.outlier_detection.is_none()
            && p.tls.is_none()
        {
            return Err(invalid(format!(
                "{f}: port traffic policy must have at least one field"
            )));
        }
        load_balancer(
            &p.load_balancer,
            p.outlier_detection.is_some(),
            &f,
            warnings,
        )?;
        connection_pool(&p.connection_pool, &f)?;
        outlier_detection(&p.outlier_detection, &f)?;
        tls(p.tls.as_deref(), &f, warnings)?;
    }
    Ok(())
}

fn load_balancer(
    lb: &Option<istio::LoadBalancerSettings>,
    outlier: bool,
    f: &str,
    warnings: &mut Vec<String>,
) -> Check {
    let Some(lb) = lb else {
        return Ok(());
    };
    if lb.simple.is_some() && lb.consistent_hash.is_some() {
        return Err(invalid(format!(
            "{f}.loadBalancer: simple and consistentHash cannot both be set"
        )));
    }
    if let Some(l) = &lb.locality_lb_setting {
        locality_lb(l, &format!("{f}.loadBalancer.localityLbSetting"))?;
        if !l.failover_priority.is_empty() {
            warnings.push(format!(
                "{f}.loadBalancer.localityLbSetting.failoverPriority is not supported by Shoal: ignored"
            ));
        }
        if (!l.failover.is_empty() || !l.failover_priority.is_empty()) && !outlier {
            warnings.push(format!(
                "{f}.loadBalancer.localityLbSetting: outlier detection policy must be provided for failover (without it nothing fails over)"
            ));
        }
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
    if let Some(hash) = &lb.consistent_hash {
        consistent_hash(hash, &format!("{f}.loadBalancer.consistentHash"), warnings)?;
    }
    if let Some(w) = &lb.warmup {
        warmup(w, &format!("{f}.loadBalancer.warmup"))?;
        warnings.push(format!(
            "{f}.loadBalancer.warmup is not supported by Shoal: ignored (new endpoints get their full share at once)"
        ));
    }
    Ok(())
}

/// Istio's warmup rules: a duration is required, `minimumPercent` is a percentage and
/// `aggression`, when set, is above 0.
fn warmup(w: &istio::Warmup, f: &str) -> Check {
    let Some(duration) = &w.duration else {
        return Err(invalid(format!("{f}.duration is required")));
    };
    strict_duration(duration, &format!("{f}.duration"))?;
    if let Some(p) = w.minimum_percent
        && !(0.0..=100.0).contains(&p)
    {
        return Err(invalid(format!("{f}.minimumPercent: {p} is not in 0-100")));
    }
    if let Some(a) = w.aggression
        && (a.is_nan() || a <= 0.0)
    {
        return Err(invalid(format!(
            "{f}.aggression: {a} must be greater than 0"
        )));
    }
    Ok(())
}

/// One hash key and at most one algorithm (protobuf oneofs in Istio), a named cookie
/// with unique attributes, and a Maglev table Envoy accepts.
fn consistent_hash(h: &istio::ConsistentHashLb, f: &str, warnings: &mut Vec<String>) -> Check {
    let keys = [
        h.http_header_name.is_some(),
        h.http_cookie.is_some(),
        h.use_source_ip.is_some(),
        h.http_query_parameter_name.is_some(),
    ];
    if keys.iter().filter(|k| **k).count() > 1 {
        return Err(invalid(format!(
            "{f}: only one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName may be set"
        )));
    }
    if h.http_header_name.as_deref() == Some("") {
        return Err(invalid(format!("{f}.httpHeaderName must not be empty")));
    }
    if h.http_query_parameter_name.as_deref() == Some("") {
        return Err(invalid(format!(
            "{f}.httpQueryParameterName must not be empty"
        )));
    }
    if let Some(cookie) = &h.http_cookie {
        if cookie.name.is_empty() {
            return Err(invalid(format!(
                "{f}.httpCookie: name required for HttpCookie"
            )));
        }
        // Istio does not bound the ttl: `0s` is a session cookie.
        if let Some(ttl) = &cookie.ttl {
            parse_duration(ttl).map_err(|e| invalid(format!("{f}.httpCookie.ttl: {}", e.0)))?;
        }
        let mut names = BTreeSet::new();
        for (i, a) in cookie.attributes.iter().enumerate() {
            if a.name.is_empty() {
                return Err(invalid(format!(
                    "{f}.httpCookie.attributes[{i}]: cookie attribute name cannot be empty"
                )));
            }
            if !names.insert(&a.name) {
                return Err(invalid(format!(
                    "{f}.httpCookie.attributes[{i}]: duplicate cookie attribute name {:?}",
                    a.name
                )));
            }
        }
    }
    if h.ring_hash.is_some() && h.maglev.is_some() {
        return Err(invalid(format!(
            "{f}: only one of ringHash or maglev may be set"
        )));
    }
    if let Some(size) = h.minimum_ring_size.filter(|s| *s != 0) {
        if h.ring_hash.is_some() || h.maglev.is_some() {
            return Err(invalid(format!(
                "{f}: only one of minimumRingSize or maglev/ringHash can be specified"
            )));
        }
        warnings.push(format!(
            "{f}.minimumRingSize ({size}) is deprecated, use ringHash.minimumRingSize instead"
        ));
    }
    if let Some(m) = &h.maglev {
        let size = m.table_size;
        if size == 0 {
            return Err(invalid(format!(
                "{f}.maglev: tableSize must be set for maglev"
            )));
        }
        if size >= MAGLEV_MAX_TABLE_SIZE {
            return Err(invalid(format!(
                "{f}.maglev: tableSize {size} must be less than {MAGLEV_MAX_TABLE_SIZE}"
            )));
        }
        if !is_prime(size) {
            return Err(invalid(format!(
                "{f}.maglev: tableSize {size} must be a prime number"
            )));
        }
    }
    Ok(())
}

/// Trial division, as Envoy checks a Maglev table size.
fn is_prime(x: u64) -> bool {
    // Envoy's (and Istio's) test: 1, 2 and 3 pass.
    if x < 4 {
        return x > 0;
    }
    if x.is_multiple_of(2) {
        return false;
    }
    (3..)
        .step_by(2)
        .take_while(|d| d * d <= x)
        .all(|d| !x.is_multiple_of(d))
}

/// Istio's client TLS rules. `credentialName` is valid but has no effect on sidecars:
/// accepted, with a warning saying what is sent.
fn tls(t: Option<&istio::ClientTlsSettings>, field: &str, warnings: &mut Vec<String>) -> Check {
    let Some(t) = t else {
        return Ok(());
    };
    let f = format!("{field}.tls");
    let mode = t.mode.as_deref().unwrap_or("DISABLE");
    if !matches!(mode, "DISABLE" | "SIMPLE" | "MUTUAL" | "ISTIO_MUTUAL") {
        return Err(invalid(format!(
            "{f}.mode: unknown TLS mode {mode:?} (DISABLE, SIMPLE, MUTUAL or ISTIO_MUTUAL)"
        )));
    }
    let skip_verify = t.insecure_skip_verify == Some(true);
    let sans = !t.subject_alt_names.is_empty();
    if skip_verify
        && mode == "SIMPLE"
        && (!t.ca_certificates.is_empty() || !t.credential_name.is_empty() || sans)
    {
        return Err(invalid(format!(
            "{f}: cannot specify caCertificates, credentialName or subjectAltNames when insecureSkipVerify is true"
        )));
    }
    if skip_verify && mode == "MUTUAL" && (!t.ca_certificates.is_empty() || sans) {
        return Err(invalid(format!(
            "{f}: cannot specify caCertificates or subjectAltNames when insecureSkipVerify is true"
        )));
    }
    let originating = matches!(mode, "SIMPLE" | "MUTUAL");
    if originating && !t.credential_name.is_empty() {
        let files = [
            &t.client_certificate,
            &t.private_key,
            &t.ca_certificates,
            &t.ca_crl,
        ];
        if files.iter().any(|p| !p.is_empty()) {
            return Err(invalid(format!(
                "{f}: cannot specify clientCertificate, privateKey, caCertificates or caCrl if credentialName is set"
            )));
        }
        warnings.push(format!(
            "{f}.credentialName applies to gateways only, and Shoal configures sidecars: no TLS is originated (as Istio does for sidecars)"
        ));
        return Ok(());
    }
    if mode == "MUTUAL" {
        if t.client_certificate.is_empty() {
            return Err(invalid(format!(
                "{f}.clientCertificate: client certificate required for mutual tls"
            )));
        }
        if t.private_key.is_empty() {
            return Err(invalid(format!(
                "{f}.privateKey: private key required for mutual tls"
            )));
        }
    }
    Ok(())
}

/// A rule for some workloads of its namespace is not exported elsewhere.
fn selector_export_to(export_to: &[String], namespace: &str) -> Check {
    let local = |e: &String| e == "." || e == namespace;
    match export_to {
        [] => Ok(()),
        [only] if local(only) => Ok(()),
        many if many.iter().all(local) => Err(invalid(
            "exportTo: destination rule with workload selector cannot have multiple entries in exportTo",
        )),
        _ => Err(invalid(
            "exportTo: destination rule with workload selector cannot have exportTo beyond current namespace",
        )),
    }
}

fn connection_pool(cp: &Option<istio::ConnectionPoolSettings>, f: &str) -> Check {
    if let Some(cp) = cp {
        if cp.tcp.is_none() && cp.http.is_none() {
            return Err(invalid(format!(
                "{f}.connectionPool must have at least one field (tcp or http)"
            )));
        }
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
}

fn outlier_detection(od: &Option<istio::OutlierDetection>, f: &str) -> Check {
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
        let empty_part = parts[..parts.len() - 1].iter().any(|p| p.is_empty());
        if loc.is_empty() || parts.len() > 3 || wildcard_inside || empty_part {
            return Err(invalid(format!(
                "{field}: {loc:?} is not region/zone/subzone (with `*` only last)"
            )));
        }
        Ok(())
    };
    if !l.failover.is_empty()
        && let Some(label) = l.failover_priority.iter().find(|p| {
            matches!(
                p.as_str(),
                "topology.kubernetes.io/region"
                    | "topology.kubernetes.io/zone"
                    | "topology.istio.io/subzone"
            )
        })
    {
        return Err(invalid(format!(
            "{f}: can not simultaneously set failover and topology label {label:?} in failoverPriority"
        )));
    }
    for (i, d) in l.distribute.iter().enumerate() {
        locality(&d.from, format!("{f}.distribute[{i}].from"))?;
        if let Some(earlier) = l.distribute[..i]
            .iter()
            .find(|e| localities_overlap(&e.from, &d.from))
        {
            return Err(invalid(format!(
                "{f}.distribute[{i}].from: locality {:?} overlaps {:?} given before",
                d.from, earlier.from
            )));
        }
        let mut total = 0u64;
        let tos: Vec<&String> = d.to.keys().collect();
        for (j, (to, weight)) in d.to.iter().enumerate() {
            locality(to, format!("{f}.distribute[{i}].to"))?;
            if !(1..=100).contains(weight) {
                return Err(invalid(format!(
                    "{f}.distribute[{i}].to[{to}]: weight {weight} is not in 1-100"
                )));
            }
            if let Some(other) = tos[..j].iter().find(|o| localities_overlap(o, to)) {
                return Err(invalid(format!(
                    "{f}.distribute[{i}].to: locality {to:?} overlaps {other:?}"
                )));
            }
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

/// Whether two localities (`region[/zone[/subzone]]`, a trailing `*` for any) can name
/// one workload: one is a prefix of the other, part by part.
fn localities_overlap(a: &str, b: &str) -> bool {
    let parts = |l: &str| -> Vec<String> {
        l.trim_end_matches('*')
            .trim_end_matches('/')
            .split('/')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (parts(a), parts(b));
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

#[cfg(test)]
mod tests;
