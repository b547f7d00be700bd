//! VirtualService validation, by Istio's rules (`ValidateVirtualService`): what Istio
//! rejects is rejected with the field named; what it accepts is accepted.

use super::{
    Check, destination, duration_field, host, invalid, port_number, string_match, weights,
};
use crate::config::istio::{
    CorsPolicy, HeaderOperations, Headers, HttpFaultInjection, HttpMatchRequest, HttpRoute,
    Percent, VirtualService,
};

/// HTTP methods a CORS policy may allow.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// `retryOn` conditions Envoy knows (status codes are numbers).
const RETRY_ON: [&str; 16] = [
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "envoy-ratelimited",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

pub fn virtual_service(vs: &VirtualService) -> Check {
    // A VirtualService without hosts is a delegate: only another's `delegate` uses it.
    let delegate = vs.hosts.is_empty();
    for (i, h) in vs.hosts.iter().enumerate() {
        host(h, &format!("hosts[{i}]"))?;
    }
    if delegate {
        if !vs.gateways.is_empty() {
            return Err(invalid(
                "a delegate virtual service (no hosts) must not have gateways",
            ));
        }
        if !vs.tcp.is_empty() || !vs.tls.is_empty() {
            return Err(invalid(
                "a delegate virtual service (no hosts) must have only http routes",
            ));
        }
    }
    if vs.http.is_empty() && vs.tcp.is_empty() && vs.tls.is_empty() {
        return Err(invalid(
            "http, tcp or tls must be provided in virtual service",
        ));
    }
    for (i, route) in vs.http.iter().enumerate() {
        http_route(route, delegate, &format!("http[{i}]"))?;
    }
    for (i, route) in vs.tls.iter().enumerate() {
        let f = format!("tls[{i}]");
        if route.matches.is_empty() {
            return Err(invalid(format!(
                "{f}: TLS route must have at least one match condition"
            )));
        }
        for (j, m) in route.matches.iter().enumerate() {
            if m.sni_hosts.is_empty() {
                return Err(invalid(format!("{f}.match[{j}]: sniHosts must be set")));
            }
            for (k, sni) in m.sni_hosts.iter().enumerate() {
                host(sni, &format!("{f}.match[{j}].sniHosts[{k}]"))?;
            }
            if let Some(p) = m.port {
                port_number(p, &format!("{f}.match[{j}].port"))?;
            }
        }
        l4_destinations(route.route.iter().map(|d| (&d.destination, d.weight)), &f)?;
    }
    for (i, route) in vs.tcp.iter().enumerate() {
        let f = format!("tcp[{i}]");
        l4_destinations(route.route.iter().map(|d| (&d.destination, d.weight)), &f)?;
    }
    Ok(())
}

fn l4_destinations<'a>(
    dests: impl Iterator<Item = (&'a crate::config::istio::Destination, i32)> + Clone,
    f: &str,
) -> Check {
    let count = dests.clone().count();
    if count == 0 {
        return Err(invalid(format!("{f}: route is required")));
    }
    for (j, (d, _)) in dests.clone().enumerate() {
        destination(d, &format!("{f}.route[{j}].destination"))?;
    }
    weights(dests.map(|(_, w)| w), count, &format!("{f}.route"))
}

fn http_route(route: &HttpRoute, in_delegate: bool, f: &str) -> Check {
    let actions = [
        (!route.route.is_empty(), "route"),
        (route.redirect.is_some(), "redirect"),
        (route.direct_response.is_some(), "directResponse"),
        (route.delegate.is_some(), "delegate"),
    ];
    let set: Vec<&str> = actions.iter().filter(|a| a.0).map(|a| a.1).collect();
    match set.as_slice() {
        [] => {
            return Err(invalid(format!(
                "{f}: one of route, redirect, directResponse or delegate is required"
            )));
        }
        [_] => {}
        [a, b, ..] => {
            return Err(invalid(format!("{f}: {a} and {b} cannot both be set")));
        }
    }
    if let Some(d) = &route.delegate {
        if in_delegate {
            return Err(invalid(format!(
                "{f}.delegate: a delegate virtual service cannot delegate again"
            )));
        }
        if d.name.is_empty() {
            return Err(invalid(format!("{f}.delegate.name is required")));
        }
    }
    if route.redirect.is_some() || route.direct_response.is_some() {
        let what = if route.redirect.is_some() {
            "redirect"
        } else {
            "directResponse"
        };
        if route.rewrite.is_some() {
            return Err(invalid(format!(
                "{f}: rewrite and {what} cannot both be set"
            )));
        }
        if route.fault.is_some() {
            return Err(invalid(format!("{f}: fault and {what} cannot both be set")));
        }
    }
    for (j, m) in route.matches.iter().enumerate() {
        http_match(m, &format!("{f}.match[{j}]"))?;
    }
    for (j, d) in route.route.iter().enumerate() {
        let df = format!("{f}.route[{j}]");
        destination(&d.destination, &format!("{df}.destination"))?;
        if let Some(h) = &d.headers {
            headers(h, &format!("{df}.headers"))?;
        }
    }
    if !route.route.is_empty() {
        weights(
            route.route.iter().map(|d| d.weight),
            route.route.len(),
            &format!("{f}.route"),
        )?;
    }
    duration_field(&route.timeout, &format!("{f}.timeout"))?;
    if let Some(r) = &route.retries {
        if r.attempts < 0 {
            return Err(invalid(format!(
                "{f}.retries.attempts must not be negative"
            )));
        }
        duration_field(&r.per_try_timeout, &format!("{f}.retries.perTryTimeout"))?;
        for on in r
            .retry_on
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if on.parse::<u32>().is_err() && !RETRY_ON.contains(&on) {
                return Err(invalid(format!(
                    "{f}.retries.retryOn: {on:?} is not an Envoy retry condition or status code"
                )));
            }
        }
    }
    if let Some(rd) = &route.redirect {
        if rd.redirect_code != 0 && !matches!(rd.redirect_code, 301 | 302 | 303 | 307 | 308) {
            return Err(invalid(format!(
                "{f}.redirect.redirectCode {} is not a redirect status",
                rd.redirect_code
            )));
        }
        if let Some(p) = rd.port {
            port_number(p, &format!("{f}.redirect.port"))?;
        }
    }
    if let Some(dr) = &route.direct_response {
        if !(200..=599).contains(&dr.status) {
            return Err(invalid(format!(
                "{f}.directResponse.status {} is not in 200-599",
                dr.status
            )));
        }
        if let Some(body) = &dr.body
            && body.string.is_some() == body.bytes.is_some()
        {
            return Err(invalid(format!(
                "{f}.directResponse.body: exactly one of string or bytes must be set"
            )));
        }
    }
    if let Some(rw) = &route.rewrite
        && let Some(re) = &rw.uri_regex_rewrite
    {
        if !rw.uri.is_empty() {
            return Err(invalid(format!(
                "{f}.rewrite: uri and uriRegexRewrite cannot both be set"
            )));
        }
        regex::Regex::new(&re.pattern).map_err(|e| {
            invalid(format!(
                "{f}.rewrite.uriRegexRewrite.match: invalid regex: {e}"
            ))
        })?;
    }
    if let Some(fault) = &route.fault {
        fault_injection(fault, &format!("{f}.fault"))?;
    }
    if let Some(m) = &route.mirror {
        destination(m, &format!("{f}.mirror"))?;
    }
    if route.mirror_percent.is_some_and(|p| p > 100) {
        return Err(invalid(format!("{f}.mirrorPercent must be in 0-100")));
    }
    percentage(route.mirror_percentage, &format!("{f}.mirrorPercentage"))?;
    if route.mirror.is_some() && !route.mirrors.is_empty() {
        return Err(invalid(format!(
            "{f}: mirror and mirrors cannot both be set"
        )));
    }
    for (j, m) in route.mirrors.iter().enumerate() {
        destination(&m.destination, &format!("{f}.mirrors[{j}].destination"))?;
        percentage(m.percentage, &format!("{f}.mirrors[{j}].percentage"))?;
    }
    if let Some(cors) = &route.cors_policy {
        cors_policy(cors, &format!("{f}.corsPolicy"))?;
    }
    if let Some(h) = &route.headers {
        headers(h, &format!("{f}.headers"))?;
    }
    Ok(())
}

fn http_match(m: &HttpMatchRequest, f: &str) -> Check {
    for (name, sm) in [
        ("uri", &m.uri),
        ("scheme", &m.scheme),
        ("method", &m.method),
        ("authority", &m.authority),
    ] {
        if let Some(sm) = sm {
            string_match(sm, &format!("{f}.{name}"))?;
        }
    }
    for (field, map) in [
        ("headers", &m.headers),
        ("withoutHeaders", &m.without_headers),
    ] {
        for (name, sm) in map {
            if name.is_empty() {
                return Err(invalid(format!("{f}.{field}: header name cannot be empty")));
            }
            string_match(sm, &format!("{f}.{field}[{name}]"))?;
        }
    }
    for (name, sm) in &m.query_params {
        string_match(sm, &format!("{f}.queryParams[{name}]"))?;
    }
    if let Some(p) = m.port {
        port_number(p, &format!("{f}.port"))?;
    }
    Ok(())
}

fn percentage(p: Option<Percent>, f: &str) -> Check {
    match p {
        Some(p) if !(0.0..=100.0).contains(&p.value) => Err(invalid(format!(
            "{f}: percentage {} is not in 0-100",
            p.value
        ))),
        _ => Ok(()),
    }
}

fn fault_injection(fault: &HttpFaultInjection, f: &str) -> Check {
    if fault.delay.is_none() && fault.abort.is_none() {
        return Err(invalid(format!("{f}: one of delay or abort must be set")));
    }
    if let Some(d) = &fault.delay {
        if d.fixed_delay.is_none() {
            return Err(invalid(format!("{f}.delay.fixedDelay is required")));
        }
        duration_field(&d.fixed_delay, &format!("{f}.delay.fixedDelay"))?;
        percentage(d.percentage, &format!("{f}.delay.percentage"))?;
        if d.percent.is_some_and(|p| p > 100) {
            return Err(invalid(format!("{f}.delay.percent must be in 0-100")));
        }
    }
    if let Some(a) = &fault.abort {
        match (a.http_status, &a.grpc_status) {
            (Some(s), None) if (200..=599).contains(&s) => {}
            (Some(s), None) => {
                return Err(invalid(format!(
                    "{f}.abort.httpStatus {s} is not in 200-599"
                )));
            }
            (None, Some(g)) if !g.is_empty() => {}
            _ => {
                return Err(invalid(format!(
                    "{f}.abort: exactly one of httpStatus or grpcStatus must be set"
                )));
            }
        }
        percentage(a.percentage, &format!("{f}.abort.percentage"))?;
    }
    Ok(())
}

fn cors_policy(cors: &CorsPolicy, f: &str) -> Check {
    for (i, o) in cors.allow_origins.iter().enumerate() {
        string_match(o, &format!("{f}.allowOrigins[{i}]"))?;
    }
    for m in &cors.allow_methods {
        if !METHODS.contains(&m.as_str()) {
            return Err(invalid(format!(
                "{f}.allowMethods: {m:?} is not an HTTP method"
            )));
        }
    }
    for (field, names) in [
        ("allowHeaders", &cors.allow_headers),
        ("exposeHeaders", &cors.expose_headers),
    ] {
        if names.iter().any(String::is_empty) {
            return Err(invalid(format!("{f}.{field}: header name cannot be empty")));
        }
    }
    if let Some(age) = &cors.max_age {
        let d = super::parse_duration(age).map_err(|e| invalid(format!("{f}.maxAge: {}", e.0)))?;
        if d.subsec_nanos() != 0 {
            return Err(invalid(format!(
                "{f}.maxAge: only whole seconds are allowed"
            )));
        }
    }
    if let Some(u) = &cors.unmatched_preflights
        && !matches!(u.as_str(), "" | "UNSPECIFIED" | "FORWARD" | "IGNORE")
    {
        return Err(invalid(format!(
            "{f}.unmatchedPreflights: unknown value {u:?}"
        )));
    }
    Ok(())
}

fn headers(h: &Headers, f: &str) -> Check {
    for (field, ops) in [("request", &h.request), ("response", &h.response)] {
        if let Some(ops) = ops {
            header_operations(ops, &format!("{f}.{field}"))?;
        }
    }
    Ok(())
}

fn header_operations(ops: &HeaderOperations, f: &str) -> Check {
    let names = ops
        .set
        .keys()
        .map(|n| ("set", n))
        .chain(ops.add.keys().map(|n| ("add", n)))
        .chain(ops.remove.iter().map(|n| ("remove", n)));
    for (op, name) in names {
        if name.is_empty() {
            return Err(invalid(format!("{f}.{op}: header name cannot be empty")));
        }
        if name.starts_with(':') || name.eq_ignore_ascii_case("host") {
            return Err(invalid(format!(
                "{f}.{op}: {name:?} cannot be changed (use rewrite.authority for the host)"
            )));
        }
    }
    Ok(())
}
