//! The values an AuthorizationPolicy matches on, by Istio's rules
//! (`pkg/config/security`): IPs and CIDRs, ports, service accounts, trust domains, path
//! templates, and the attributes a `when` condition may name.

use super::super::{Check, invalid, ip_or_cidr};
use super::non_empty;

/// At most this many service accounts in one list (Istio bounds the config's size).
const MAX_SERVICE_ACCOUNTS: usize = 16;
/// A service account value is at most this long.
const MAX_SERVICE_ACCOUNT_LEN: usize = 320;

/// IP addresses or CIDR blocks (`10.0.0.0/8`).
pub(super) fn ips(values: &[String], field: &str) -> Check {
    for (i, v) in values.iter().enumerate() {
        if !ip_or_cidr(v) {
            let what = if v.contains('/') {
                "bad CIDR range"
            } else {
                "bad IP address"
            };
            return Err(invalid(format!("{field}[{i}]: {what} {v:?}")));
        }
    }
    Ok(())
}

/// Port numbers as text (`"8080"`), 0-65535 as Istio takes them.
pub(super) fn ports(values: &[String], field: &str) -> Check {
    for (i, v) in values.iter().enumerate() {
        let numeric = !v.is_empty() && v.chars().all(|c| c.is_ascii_digit());
        if !numeric || !matches!(v.parse::<u32>(), Ok(p) if p <= 65535) {
            return Err(invalid(format!(
                "{field}[{i}]: bad port {v:?} (a number in 0-65535)"
            )));
        }
    }
    Ok(())
}

/// `serviceAccount` or `namespace/serviceAccount`, no wildcard, at most 16.
pub(super) fn service_accounts(values: &[String], field: &str) -> Check {
    if values.len() > MAX_SERVICE_ACCOUNTS {
        return Err(invalid(format!(
            "{field}: {} values, at most {MAX_SERVICE_ACCOUNTS} are allowed",
            values.len()
        )));
    }
    non_empty(values, field)?;
    for (i, v) in values.iter().enumerate() {
        let f = format!("{field}[{i}]");
        if v.contains('*') {
            return Err(invalid(format!("{f}: wildcard not allowed in {v:?}")));
        }
        if v.len() > MAX_SERVICE_ACCOUNT_LEN {
            return Err(invalid(format!(
                "{f}: longer than {MAX_SERVICE_ACCOUNT_LEN} characters"
            )));
        }
        let form = match v.split_once('/') {
            None => true,
            Some((ns, sa)) => !ns.is_empty() && !sa.is_empty() && !sa.contains('/'),
        };
        if !form {
            return Err(invalid(format!(
                "{f}: {v:?} is not 'serviceAccount' or 'namespace/serviceAccount'"
            )));
        }
    }
    Ok(())
}

/// Values with at most one `*`, at the start or the end (or `*` alone).
pub(super) fn wildcard_values(values: &[String], field: &str) -> Check {
    non_empty(values, field)?;
    for (i, v) in values.iter().enumerate() {
        let stars = v.matches('*').count();
        let placed = v == "*" || v.starts_with('*') || v.ends_with('*');
        if stars > 1 || (stars == 1 && !placed) {
            return Err(invalid(format!(
                "{field}[{i}]: {v:?}: at most one wildcard, only at the start or the end"
            )));
        }
    }
    Ok(())
}

/// Trust domains: wildcard values without `/`.
pub(super) fn trust_domains(values: &[String], field: &str) -> Check {
    wildcard_values(values, field)?;
    match values.iter().position(|v| v.contains('/')) {
        Some(i) => Err(invalid(format!(
            "{field}[{i}]: a trust domain must not contain '/' ({:?})",
            values[i]
        ))),
        None => Ok(()),
    }
}

const MATCH_ONE: &str = "{*}";
const MATCH_ANY: &str = "{**}";

/// Paths with Istio's templates: `{*}` one segment, `{**}` the rest (last); no other
/// braces, and with a template, every other segment an RFC 3986 `pchar` literal.
pub(super) fn path_templates(paths: &[String], field: &str) -> Check {
    for (i, path) in paths.iter().enumerate() {
        let templated = path.contains(MATCH_ONE) || path.contains(MATCH_ANY);
        let mut any_seen = false;
        for segment in path.trim_matches('/').split('/') {
            let reason = match segment {
                MATCH_ONE | MATCH_ANY if any_seen => Some("{**} is not the last operator"),
                MATCH_ONE => None,
                MATCH_ANY => {
                    any_seen = true;
                    None
                }
                s if s.contains(['{', '}']) => {
                    Some("it has '{' or '}' beyond a supported path template")
                }
                s if templated && !literal(s) => {
                    Some("a segment beside a template is not a valid path literal")
                }
                _ => None,
            };
            if let Some(reason) = reason {
                return Err(invalid(format!(
                    "{field}[{i}]: invalid or unsupported path {path:?}: {reason}"
                )));
            }
        }
    }
    Ok(())
}

/// An RFC 3986 `pchar` run (unreserved, pct-encoded, sub-delims but `*`, `:` and `@`).
fn literal(segment: &str) -> bool {
    !segment.is_empty()
        && segment
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~%!$&'()+,;:@=".contains(c))
}

/// `a[b]`: a name and a non-empty bracketed key.
fn map_key(key: &str) -> Result<(), String> {
    match key.find('[') {
        Some(open) if key.ends_with(']') && open > 0 && open + 2 < key.len() => Ok(()),
        _ => Err(format!("bad key {key:?}: should have format a[b]")),
    }
}

/// A `when` condition's key, by Istio's list of supported attributes.
pub(super) fn attribute_key(key: &str, field: &str) -> Check {
    let checked = match key {
        k if k.starts_with("request.headers")
            || k.starts_with("request.auth.claims")
            || k.starts_with("experimental.envoy.filters.") =>
        {
            map_key(k)
        }
        "source.ip"
        | "remote.ip"
        | "destination.ip"
        | "destination.port"
        | "source.serviceAccount"
        | "source.trustDomain"
        | "source.namespace"
        | "source.principal"
        | "request.auth.principal"
        | "request.auth.audiences"
        | "request.auth.presenter"
        | "connection.sni" => Ok(()),
        "destination.namespace" => {
            Err("replaced by the policy's own namespace (metadata.namespace)".into())
        }
        k if k.starts_with("destination.labels") => Err("replaced by the selector".into()),
        "destination.name" | "destination.user" => {
            Err("deprecated attribute, only supported in v1alpha1".into())
        }
        _ => Err("unknown attribute".into()),
    };
    checked.map_err(|reason| invalid(format!("{field}: {key:?}: {reason}")))
}

/// The values (or not-values) of a `when` condition on the attribute `key`.
pub(super) fn attribute_values(key: &str, values: &[String], field: &str) -> Check {
    non_empty(values, field)?;
    match key {
        "source.ip" | "remote.ip" | "destination.ip" => ips(values, field),
        "destination.port" => ports(values, field),
        "source.serviceAccount" => service_accounts(values, field),
        "source.trustDomain" => wildcard_values(values, field),
        _ => Ok(()),
    }
}
