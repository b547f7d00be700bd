//! RequestAuthentication validation (Istio's `ValidateRequestAuthentication` and
//! `validateJwtRule`, with the CRD's schema rules).

use super::super::{Check, invalid, strict_duration};
use super::{attachment, non_empty};
use crate::config::security::{JwtRule, RequestAuthentication};
use serde_json::Value;

/// The CRD's bounds: JWT rules per object, `jwksUri` length, `spaceDelimitedClaims`.
const MAX_JWT_RULES: usize = 4096;
const MAX_JWKS_URI_LEN: usize = 2048;
const MAX_SPACE_DELIMITED_CLAIMS: usize = 64;

pub(crate) fn request_authentication(
    ra: &RequestAuthentication,
    warnings: &mut Vec<String>,
) -> Check {
    attachment(
        ra.selector.as_ref(),
        ra.target_ref.as_ref(),
        &ra.target_refs,
        warnings,
    )?;
    if ra.jwt_rules.len() > MAX_JWT_RULES {
        return Err(invalid(format!(
            "spec.jwtRules: {} rules, at most {MAX_JWT_RULES} are allowed",
            ra.jwt_rules.len()
        )));
    }
    for (i, rule) in ra.jwt_rules.iter().enumerate() {
        jwt_rule(rule, &format!("spec.jwtRules[{i}]"), warnings)?;
    }
    // What Shoal enforces otherwise than Istio, failing closed (said on the object).
    if ra.target_ref.is_some() || !ra.target_refs.is_empty() {
        warnings.push(
            "spec.targetRef(s): Shoal does not serve Gateway API gateways or waypoints: the policy applies to no proxy".into(),
        );
    }
    for (i, rule) in ra.jwt_rules.iter().enumerate() {
        if rule.jwks.is_empty() && rule.jwks_uri.is_empty() {
            warnings.push(format!(
                "spec.jwtRules[{i}]: keys by OIDC discovery from the issuer are not supported by Shoal: set jwksUri or jwks; tokens of this rule are refused (fail closed)"
            ));
        }
    }
    Ok(())
}

fn jwt_rule(rule: &JwtRule, field: &str, warnings: &mut Vec<String>) -> Check {
    if rule.issuer.is_empty() && rule.jwks_uri.is_empty() {
        return Err(invalid(format!(
            "{field}.issuer: issuer or jwksUri must be set"
        )));
    }
    non_empty(&rule.audiences, &format!("{field}.audiences"))?;
    if !rule.jwks_uri.is_empty() && !rule.jwks.is_empty() {
        return Err(invalid(format!(
            "{field}: only one of jwks or jwksUri may be set"
        )));
    }
    if !rule.jwks_uri.is_empty() {
        jwks_uri(&rule.jwks_uri).map_err(|reason| invalid(format!("{field}.jwksUri: {reason}")))?;
    }
    if !rule.jwks.is_empty() {
        let keys = jwks(&rule.jwks)
            .map_err(|reason| invalid(format!("{field}.jwks: jwks parse error: {reason}")))?;
        for (k, key) in keys.iter().enumerate() {
            if private(key) {
                warnings.push(format!(
                    "{field}.jwks: key at index {k} contains private key material; only public \
                     keys are used for verification"
                ));
            }
        }
    }
    for (k, header) in rule.from_headers.iter().enumerate() {
        if header.name.is_empty() {
            return Err(invalid(format!(
                "{field}.fromHeaders[{k}].name: must not be empty"
            )));
        }
    }
    non_empty(&rule.from_params, &format!("{field}.fromParams"))?;
    non_empty(&rule.from_cookies, &format!("{field}.fromCookies"))?;
    for (k, c) in rule.output_claim_to_headers.iter().enumerate() {
        let f = format!("{field}.outputClaimToHeaders[{k}]");
        if c.header.is_empty() {
            return Err(invalid(format!("{f}.header: must not be empty")));
        }
        if c.claim.is_empty() {
            return Err(invalid(format!("{f}.claim: must not be empty")));
        }
        // The CRD's pattern: a plain header name (no pseudo-header, no separators).
        if !c
            .header
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
        {
            return Err(invalid(format!(
                "{f}.header: {:?} is not a valid header name (letters, digits, '-' and '_')",
                c.header
            )));
        }
    }
    if let Some(timeout) = &rule.timeout {
        strict_duration(timeout, &format!("{field}.timeout"))?;
    }
    let claims = &rule.space_delimited_claims;
    if claims.len() > MAX_SPACE_DELIMITED_CLAIMS {
        return Err(invalid(format!(
            "{field}.spaceDelimitedClaims: {} claims, at most {MAX_SPACE_DELIMITED_CLAIMS} are allowed",
            claims.len()
        )));
    }
    non_empty(claims, &format!("{field}.spaceDelimitedClaims"))
}

/// An `http://` or `https://` URL with a host (and a valid port, if any).
fn jwks_uri(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_JWKS_URI_LEN {
        return Err(format!("longer than {MAX_JWKS_URI_LEN} characters"));
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{uri:?} is not a URL (it has white space)"));
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(format!("{uri:?}: url must have scheme http:// or https://"));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(format!(
            "URI scheme {scheme:?} is not supported (http or https)"
        ));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = match host_port.strip_prefix('[') {
        // An IPv6 literal: `[::1]:8443`.
        Some(v6) => match v6.split_once(']') {
            Some((ip, rest)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => {
                (ip, rest.strip_prefix(':'))
            }
            _ => return Err(format!("{uri:?}: bad IPv6 host")),
        },
        None => match host_port.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Err(format!("{uri:?} has no host"));
    }
    if let Some(port) = port
        && !port.is_empty()
        && port.parse::<u16>().is_err()
    {
        return Err(format!("{uri:?}: port {port:?} is not a number in 0-65535"));
    }
    Ok(())
}

/// The keys of an inline JWKS (`{"keys": [...]}`, or one key alone), each with a known
/// `kty` and the members that type needs. Also what the edge checks a fetched JWKS by.
pub fn jwks(text: &str) -> Result<Vec<Value>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let keys = match value.get("keys") {
        Some(Value::Array(keys)) => keys.clone(),
        Some(_) => return Err("\"keys\" is not an array".into()),
        None => vec![value],
    };
    for (i, key) in keys.iter().enumerate() {
        let Some(kty) = key.get("kty").and_then(Value::as_str) else {
            return Err(format!("key at index {i} has no \"kty\""));
        };
        let needs: &[&str] = match kty {
            "RSA" => &["n", "e"],
            "EC" => &["crv", "x", "y"],
            "OKP" => &["crv", "x"],
            "oct" => &["k"],
            _ => return Err(format!("key at index {i}: unknown kty {kty:?}")),
        };
        if let Some(missing) = needs.iter().find(|m| key.get(**m).is_none()) {
            return Err(format!(
                "key at index {i} ({kty}) has no {missing:?} member"
            ));
        }
    }
    Ok(keys)
}

/// A private (or symmetric) key, where Envoy only needs public keys.
fn private(key: &Value) -> bool {
    key.get("kty").and_then(Value::as_str) == Some("oct") || key.get("d").is_some()
}
