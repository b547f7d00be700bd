//! VirtualService validation, by Istio's rules (`ValidateVirtualService`): what Istio
//! rejects is rejected with the field named; what it accepts is accepted.

use super::workload_group::labels;
use super::{
    Check, destination, dns1123_label, duration_field, header_name, host, invalid, ip_or_cidr,
    port_number, strict_duration, string_match, weights,
};
use crate::config::grpc_status;
use crate::config::istio::{
    CorsPolicy, HeaderOperations, Headers, HttpFaultInjection, HttpMatchRequest, HttpRoute,
    Percent, VirtualService,
};
use crate::model::{host_matches, hosts_intersect};

/// HTTP methods a CORS policy may allow.
const METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

/// HTTP/2 pseudo-headers a match may name.
const PSEUDO_HEADERS: [&str; 5] = [":method", ":scheme", ":authority", ":path", ":status"];

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

pub fn virtual_service(vs: &VirtualService, warnings: &mut Vec<String>) -> Check {
    // A VirtualService without hosts is a delegate: only another's `delegate` uses it.
    let delegate = vs.hosts.is_empty();
    let to_mesh = vs.gateways.is_empty() || vs.gateways.iter().any(|g| g == "mesh");
    for (i, h) in vs.hosts.iter().enumerate() {
        if h.parse::<std::net::IpAddr>().is_ok() {
            continue;
        }
        host(h, &format!("hosts[{i}]"))?;
        if h == "*" && to_mesh {
            return Err(invalid(format!(
                "hosts[{i}]: wildcard host * is not allowed for virtual services bound to the mesh gateway"
            )));
        }
    }
    // `*.foo.com` and `*.com` are duplicates too: one request would match both.
    for (i, a) in vs.hosts.iter().enumerate() {
        if let Some(b) = vs.hosts[i + 1..].iter().find(|b| hosts_intersect(a, b)) {
            return Err(invalid(format!(
                "hosts[{i}]: duplicate hosts in virtual service: {a} & {b}"
            )));
        }
    }
    gateway_names(&vs.gateways, "gateways")?;
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
        http_route(route, delegate, &format!("http[{i}]"), warnings)?;
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
                let field = format!("{f}.match[{j}].sniHosts[{k}]");
                if sni.parse::<std::net::IpAddr>().is_ok() {
                    warnings.push(format!(
                        "{field}: using an IP address ({sni:?}) goes against the SNI spec and most clients do not support it"
                    ));
                    continue;
                }
                host(sni, &field)?;
                let covered = vs.hosts.iter().any(|h| h == sni || host_matches(h, sni));
                if !covered {
                    return Err(invalid(format!(
                        "{field}: SNI host {sni:?} is not a compatible subset of any of the virtual service hosts: [{}]",
                        vs.hosts.join(", ")
                    )));
                }
            }
            l4_match(
                &m.destination_subnets,
                m.port,
                &m.source_labels,
                &m.gateways,
                &format!("{f}.match[{j}]"),
            )?;
        }
        l4_destinations(route.route.iter().map(|d| (&d.destination, d.weight)), &f)?;
    }
    for (i, route) in vs.tcp.iter().enumerate() {
        let f = format!("tcp[{i}]");
        for (j, m) in route.matches.iter().enumerate() {
            l4_match(
                &m.destination_subnets,
                m.port,
                &m.source_labels,
                &m.gateways,
                &format!("{f}.match[{j}]"),
            )?;
        }
        l4_destinations(route.route.iter().map(|d| (&d.destination, d.weight)), &f)?;
    }
    Ok(())
}

/// What TLS and TCP matches share: subnets, a port, source labels and gateways.
fn l4_match(
    subnets: &[String],
    port: Option<u32>,
    source_labels: &std::collections::BTreeMap<String, String>,
    gateways: &[String],
    f: &str,
) -> Check {
    for (k, s) in subnets.iter().enumerate() {
        if !ip_or_cidr(s) {
            return Err(invalid(format!(
                "{f}.destinationSubnets[{k}]: {s:?} is not an IP address or CIDR block"
            )));
        }
    }
    if let Some(p) = port.filter(|p| *p != 0) {
        port_number(p, &format!("{f}.port"))?;
    }
    labels(source_labels, &format!("{f}.sourceLabels"))?;
    gateway_names(gateways, &format!("{f}.gateways"))
}

/// `namespace/name`, `mesh`, or a legacy `name.namespace...` name.
fn gateway_names(names: &[String], f: &str) -> Check {
    for (i, g) in names.iter().enumerate() {
        let valid = match g.split_once('/') {
            Some((ns, name)) => dns1123_label(ns) && dns1123_label(name),
            None => g.split('.').all(dns1123_label),
        };
        if !valid {
            return Err(invalid(format!(
                "{f}[{i}]: invalid gateway name {g:?} (namespace/name)"
            )));
        }
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

fn http_route(route: &HttpRoute, in_delegate: bool, f: &str, warnings: &mut Vec<String>) -> Check {
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
        if r.attempts == 0
            && (r.per_try_timeout.is_some()
                || !r.retry_on.is_empty()
                || r.retry_remote_localities.is_some())
        {
            return Err(invalid(format!(
                "{f}.retries: a retry policy is configured while attempts is 0 (retries disabled)"
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
        if rd.redirect_code != 0 && !(300..=399).contains(&rd.redirect_code) {
            return Err(invalid(format!(
                "{f}.redirect.redirectCode {} is not a valid redirect code, must be 3xx",
                rd.redirect_code
            )));
        }
        // Istio accepts any 3xx, but Envoy redirects with these only: the route is
        // dropped otherwise, as Istio drops it.
        if rd.redirect_code != 0 && !matches!(rd.redirect_code, 301 | 302 | 303 | 307 | 308) {
            warnings.push(format!(
                "{f}.redirect.redirectCode {} is not supported by Envoy: the route is not served",
                rd.redirect_code
            ));
        }
        if !matches!(rd.scheme.as_str(), "" | "http" | "https") {
            return Err(invalid(format!(
                "{f}.redirect.scheme: {:?} must be \"http\" or \"https\"",
                rd.scheme
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
        if let Some(body) = &dr.body {
            if body.string.is_some() == body.bytes.is_some() {
                return Err(invalid(format!(
                    "{f}.directResponse.body: exactly one of string or bytes must be set"
                )));
            }
            let size = body
                .string
                .as_ref()
                .or(body.bytes.as_ref())
                .map_or(0, String::len);
            if size > 1024 * 1024 {
                return Err(invalid(format!(
                    "{f}.directResponse.body: {size} bytes; large direct responses must be less than 1MB"
                )));
            }
        }
    }
    if let Some(rw) = &route.rewrite
        && rw.uri.is_empty()
        && rw.authority.is_empty()
        && rw.uri_regex_rewrite.is_none()
    {
        return Err(invalid(format!(
            "{f}.rewrite must specify at least one of uri, uriRegexRewrite or authority"
        )));
    }
    if let Some(rw) = &route.rewrite
        && let Some(re) = &rw.uri_regex_rewrite
    {
        if re.pattern.is_empty() || re.rewrite.is_empty() {
            return Err(invalid(format!(
                "{f}.rewrite.uriRegexRewrite requires both match and rewrite"
            )));
        }
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
            // Pseudo-headers and JWT claims (`@request.auth.claims.x`) are matchable too.
            let valid = header_name(name)
                || PSEUDO_HEADERS.contains(&name.as_str())
                || name.starts_with("@request.auth.claims");
            if !valid {
                return Err(invalid(format!(
                    "{f}.{field}: header name {name:?} is not a valid header name"
                )));
            }
            // `regex: "*"` in withoutHeaders means "present", not a regex.
            if !(field == "withoutHeaders" && sm.regex.as_deref() == Some("*")) {
                string_match(sm, &format!("{f}.{field}[{name}]"))?;
            }
        }
    }
    for (name, sm) in &m.query_params {
        string_match(sm, &format!("{f}.queryParams[{name}]"))?;
    }
    if let Some(p) = m.port.filter(|p| *p != 0) {
        port_number(p, &format!("{f}.port"))?;
    }
    labels(&m.source_labels, &format!("{f}.sourceLabels"))?;
    gateway_names(&m.gateways, &format!("{f}.gateways"))?;
    if !m.source_namespace.is_empty() && !dns1123_label(&m.source_namespace) {
        return Err(invalid(format!(
            "{f}.sourceNamespace: {:?} is not a namespace name",
            m.source_namespace
        )));
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
            (None, Some(g)) if grpc_status::NAMES.contains(&g.as_str()) => {}
            (None, Some(g)) => {
                return Err(invalid(format!(
                    "{f}.abort.grpcStatus: {g:?} is not a gRPC status name (e.g. UNAVAILABLE)"
                )));
            }
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
        let value = o.exact.as_ref().or(o.prefix.as_ref()).or(o.regex.as_ref());
        if value.is_none_or(String::is_empty) {
            return Err(invalid(format!(
                "{f}.allowOrigins[{i}]: an exact, prefix or regex origin is required"
            )));
        }
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
        if let Some(bad) = names.iter().find(|n| *n != "*" && !header_name(n)) {
            return Err(invalid(format!(
                "{f}.{field}: {bad:?} is not a valid header name"
            )));
        }
    }
    if let Some(age) = &cors.max_age {
        strict_duration(age, &format!("{f}.maxAge"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(spec: &str) -> Result<(), String> {
        let vs: VirtualService = serde_norway::from_str(spec).expect("spec parses");
        virtual_service(&vs, &mut Vec::new()).map_err(|e| e.0)
    }

    fn rejected(spec: &str, reason: &str) {
        match check(spec) {
            Err(e) => assert!(e.contains(reason), "{e:?} does not say {reason:?}"),
            Ok(()) => panic!("accepted, expected {reason:?}:\n{spec}"),
        }
    }

    const ROUTE: &str = "http:\n- route: [{destination: {host: a}}]\n";

    #[test]
    fn hosts_by_istio_rules() {
        rejected(
            &format!("hosts: ['*']\n{ROUTE}"),
            "not allowed for virtual services bound to the mesh",
        );
        assert!(check(&format!("hosts: ['*']\ngateways: [edge/gw]\n{ROUTE}")).is_ok());
        rejected(
            &format!("hosts: ['*.foo.com', '*.com']\n{ROUTE}"),
            "duplicate hosts in virtual service: *.foo.com & *.com",
        );
        rejected(&format!("hosts: [a, a]\n{ROUTE}"), "duplicate hosts");
        rejected(
            &format!("hosts: [a]\ngateways: [edge/my_gw]\n{ROUTE}"),
            "gateways[0]",
        );
    }

    #[test]
    fn timeouts_and_retries_by_istio_rules() {
        rejected(
            "hosts: [a]\nhttp:\n- route: [{destination: {host: a}}]\n  timeout: 0s\n",
            "at least 1ms",
        );
        rejected(
            "hosts: [a]\nhttp:\n- route: [{destination: {host: a}}]\n  retries: {attempts: 0, retryOn: 5xx}\n",
            "attempts is 0",
        );
        assert!(
            check(
                "hosts: [a]\nhttp:\n- route: [{destination: {host: a}}]\n  retries: {attempts: 0}\n"
            )
            .is_ok()
        );
    }

    #[test]
    fn matches_by_istio_rules() {
        let with_match = |m: &str| {
            format!("hosts: [a]\nhttp:\n- match: [{m}]\n  route: [{{destination: {{host: a}}}}]\n")
        };
        assert!(check(&with_match("{uri: {prefix: ''}}")).is_ok());
        rejected(
            &with_match("{method: {prefix: ''}}"),
            "prefix string match should not be empty",
        );
        rejected(
            &with_match("{headers: {'bad header': {exact: x}}}"),
            "not a valid header name",
        );
        assert!(
            check(&with_match(
                "{headers: {':authority': {exact: x}, '@request.auth.claims.sub': {exact: y}}}"
            ))
            .is_ok()
        );
        assert!(check(&with_match("{withoutHeaders: {x-debug: {regex: '*'}}}")).is_ok());
        rejected(
            &with_match("{sourceNamespace: Not_A_Namespace}"),
            "sourceNamespace",
        );
        rejected(&with_match("{sourceLabels: {app: 'a b'}}"), "sourceLabels");
        rejected(
            "hosts: [a]\nhttp:\n- route: [{destination: {host: a, subset: v1.0}}]\n",
            "subset name \"v1.0\" is invalid",
        );
    }

    #[test]
    fn tls_sni_hosts_must_be_the_virtual_services() {
        let tls = |sni: &str| {
            format!(
                "hosts: ['*.example.com']\ntls:\n- match: [{{sniHosts: [{sni}]}}]\n  route: [{{destination: {{host: a}}}}]\n"
            )
        };
        assert!(check(&tls("a.example.com")).is_ok());
        rejected(&tls("a.example.org"), "not a compatible subset");
        rejected(
            "hosts: [a]\ntcp:\n- match: [{destinationSubnets: [10.0.0.0/33]}]\n  route: [{destination: {host: a}}]\n",
            "destinationSubnets[0]",
        );
    }

    #[test]
    fn redirects_rewrites_and_faults_by_istio_rules() {
        let http = |h: &str| format!("hosts: [a]\nhttp:\n- {h}\n");
        let mut warnings = Vec::new();
        let vs: VirtualService =
            serde_norway::from_str(&http("redirect: {uri: /b, redirectCode: 304}")).unwrap();
        assert!(virtual_service(&vs, &mut warnings).is_ok());
        assert!(
            warnings[0].contains("redirectCode 304 is not supported by Envoy"),
            "{warnings:?}"
        );
        rejected(
            &http("redirect: {uri: /b, redirectCode: 200}"),
            "must be 3xx",
        );
        rejected(&http("redirect: {uri: /b, scheme: ftp}"), "redirect.scheme");
        rejected(
            &http("route: [{destination: {host: a}}]\n  rewrite: {}"),
            "at least one of uri",
        );
        rejected(
            &http(
                "route: [{destination: {host: a}}]\n  rewrite: {uriRegexRewrite: {match: '^/a'}}",
            ),
            "requires both match and rewrite",
        );
        rejected(
            &http("route: [{destination: {host: a}}]\n  fault: {abort: {grpcStatus: '14'}}"),
            "not a gRPC status name",
        );
        assert!(
            check(&http(
                "route: [{destination: {host: a}}]\n  fault: {abort: {grpcStatus: UNAVAILABLE}}"
            ))
            .is_ok()
        );
        let big = "x".repeat(1024 * 1024 + 1);
        rejected(
            &http(&format!(
                "directResponse: {{status: 200, body: {{string: {big}}}}}"
            )),
            "less than 1MB",
        );
    }

    #[test]
    fn cors_by_istio_rules() {
        let cors = |c: &str| {
            format!(
                "hosts: [a]\nhttp:\n- route: [{{destination: {{host: a}}}}]\n  corsPolicy: {c}\n"
            )
        };
        assert!(
            check(&cors(
                "{allowOrigins: [{exact: 'https://a.com'}], allowHeaders: ['*', x-a], maxAge: 24h}"
            ))
            .is_ok()
        );
        rejected(&cors("{allowOrigins: [{exact: ''}]}"), "allowOrigins[0]");
        rejected(&cors("{allowHeaders: ['x a']}"), "allowHeaders");
        rejected(&cors("{maxAge: 0s}"), "maxAge");
    }
}
