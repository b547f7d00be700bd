//! `security.istio.io` validation, by Istio's rules (`ValidatePeerAuthentication`,
//! `ValidateAuthorizationPolicy`, `ValidateRequestAuthentication`, the helpers of
//! `pkg/config/security` and the CRDs' schema rules): what Istio rejects is rejected with
//! the field named; what it warns about is a warning.
//!
//! A valid object of a kind Shoal does not enforce would then still be rejected by
//! [`not_enforced`] (none is left: every `security.istio.io` kind is enforced): a policy
//! that is read but not applied must be said, never silently served as if it held. Of
//! the kinds it enforces, what Shoal cannot express fails closed and is warned about
//! ([`fails_closed`]).

mod attributes;
mod authorization;
mod jwt;

use super::{Check, Invalid, invalid};
use crate::config::security::{PeerMutualTls, PolicySelector, PolicyTargetReference};
use crate::config::{Config, security};
pub(super) use authorization::authorization_policy;
/// A JWKS document's keys, checked as Istio checks an inline `jwks`.
pub use jwt::jwks as jwks_keys;
pub(super) use jwt::request_authentication;

/// At most this many `targetRefs` (the CRD's bound).
const MAX_TARGET_REFS: usize = 16;

/// Why a valid object of a security kind is not applied, as long as Shoal does not
/// enforce its kind (`None` for every other kind, and for a kind once it is enforced):
/// reported like a rejection (the log, `shoal_ingest_config_rejected`,
/// `/debug/rejections`, `shoal analyze`'s SHL0001), in the words used for kinds Shoal
/// does not read at all.
pub fn not_enforced(_config: &Config) -> Option<Invalid> {
    // Every security kind is enforced (RequestAuthentication since `jwt_authn`); a kind
    // read later but not applied returns its `consequence` here.
    None
}

/// What is not enforced of an object of the security `kind` (an AuthorizationPolicy's
/// by its `action`), for the reports of [`not_enforced`] and of versions Shoal does not
/// read.
pub(crate) fn consequence(kind: &str, action: &str) -> Option<&'static str> {
    Some(match kind {
        "AuthorizationPolicy" => match action {
            "DENY" => "its DENY rules are NOT enforced: traffic they would deny is let through",
            "ALLOW" | "" => {
                "its ALLOW rules are NOT enforced: traffic they would deny (everything they do not allow) is let through"
            }
            _ => "it is NOT enforced",
        },
        "PeerAuthentication" => "mTLS modes are not enforced",
        "RequestAuthentication" => "JWTs are not validated",
        _ => return None,
    })
}

/// What of an enforced AuthorizationPolicy Shoal cannot express, and how it fails
/// closed instead (an ALLOW that cannot be checked admits nothing more, a DENY that
/// cannot be checked denies more), as warnings on the object.
pub fn fails_closed(ap: &security::AuthorizationPolicy, warnings: &mut Vec<String>) {
    let action = action(ap);
    let widen = if action == "ALLOW" {
        "the rules using them never match (fail closed)"
    } else {
        "they are ignored, so the rules deny more (fail closed)"
    };
    if ap.target_ref.is_some() || !ap.target_refs.is_empty() {
        warnings.push(
            "spec.targetRef(s): Shoal does not serve Gateway API gateways or waypoints: the policy applies to no proxy".into(),
        );
    }
    // requestPrincipals and request.auth.* are enforced (RequestAuthentication's
    // `jwt_authn`); on a TCP port they cannot be seen and fail closed as in Istio.
    let trust = ap.rules.iter().any(|rule| {
        rule.from
            .iter()
            .filter_map(|f| f.source.as_ref())
            .any(|from| !from.trust_domains.is_empty() || !from.not_trust_domains.is_empty())
    });
    if trust {
        warnings.push(format!("trustDomains are not supported by Shoal: {widen}"));
    }
}

/// An AuthorizationPolicy's action; Istio's default is ALLOW.
pub(crate) fn action(ap: &security::AuthorizationPolicy) -> &str {
    match ap.action.as_deref() {
        None | Some("") => "ALLOW",
        Some(action) => action,
    }
}

pub(super) fn peer_authentication(
    pa: &security::PeerAuthentication,
    warnings: &mut Vec<String>,
) -> Check {
    selector(pa.selector.as_ref(), warnings)?;
    if let Some(mtls) = &pa.mtls {
        mtls_mode(mtls, "spec.mtls.mode")?;
    }
    let labelled = pa
        .selector
        .as_ref()
        .is_some_and(|s| !s.match_labels.is_empty());
    if !pa.port_level_mtls.is_empty() && !labelled {
        return Err(invalid(
            "spec.portLevelMtls: port level mTLS needs a selector with labels \
             (a mesh or namespace PeerAuthentication cannot have one)",
        ));
    }
    for (port, mtls) in &pa.port_level_mtls {
        let field = format!("spec.portLevelMtls.{port}");
        match port.parse::<u32>() {
            Ok(p) if (1..=65535).contains(&p) => {}
            _ => {
                return Err(invalid(format!(
                    "{field}: {port:?} is not a port in 1-65535"
                )));
            }
        }
        mtls_mode(mtls, &format!("{field}.mode"))?;
    }
    Ok(())
}

fn mtls_mode(mtls: &PeerMutualTls, field: &str) -> Check {
    match mtls.mode.as_deref() {
        None | Some("UNSET" | "DISABLE" | "PERMISSIVE" | "STRICT") => Ok(()),
        Some(mode) => Err(invalid(format!(
            "{field}: unknown mode {mode:?} (UNSET, DISABLE, PERMISSIVE or STRICT)"
        ))),
    }
}

/// `selector`, `targetRef` and `targetRefs`: at most one, each valid.
fn attachment(
    by_labels: Option<&PolicySelector>,
    target_ref: Option<&PolicyTargetReference>,
    target_refs: &[PolicyTargetReference],
    warnings: &mut Vec<String>,
) -> Check {
    let set = [
        by_labels.is_some(),
        target_ref.is_some(),
        !target_refs.is_empty(),
    ];
    if set.iter().filter(|s| **s).count() > 1 {
        return Err(invalid(
            "spec: only one of selector, targetRef or targetRefs may be set",
        ));
    }
    selector(by_labels, warnings)?;
    if let Some(r) = target_ref {
        target(r, "spec.targetRef")?;
    }
    if target_refs.len() > MAX_TARGET_REFS {
        return Err(invalid(format!(
            "spec.targetRefs: {} references, at most {MAX_TARGET_REFS} are allowed",
            target_refs.len()
        )));
    }
    for (i, r) in target_refs.iter().enumerate() {
        target(r, &format!("spec.targetRefs[{i}]"))?;
    }
    Ok(())
}

/// Istio's selector rules: no empty key, no wildcard; no labels at all selects every
/// workload of the namespace, allowed but suspicious.
fn selector(selector: Option<&PolicySelector>, warnings: &mut Vec<String>) -> Check {
    let Some(selector) = selector else {
        return Ok(());
    };
    for (k, v) in &selector.match_labels {
        if k.is_empty() {
            return Err(invalid(format!(
                "spec.selector.matchLabels: empty key is not supported in selector: \"{k}={v}\""
            )));
        }
        if k.contains('*') || v.contains('*') {
            return Err(invalid(format!(
                "spec.selector.matchLabels: wildcard is not supported in selector: \"{k}={v}\""
            )));
        }
    }
    if selector.match_labels.is_empty() {
        warnings.push(
            "spec.selector: workload selector specified without labels: selects every workload of the namespace"
                .into(),
        );
    }
    Ok(())
}

/// What a policy may be attached to (Istio's `allowedTargetRefs`: group and kind).
const TARGET_KINDS: [(&str, &str); 4] = [
    ("", "Service"),
    ("networking.istio.io", "ServiceEntry"),
    ("gateway.networking.k8s.io", "Gateway"),
    ("gateway.networking.k8s.io", "GatewayClass"),
];

fn target(r: &PolicyTargetReference, field: &str) -> Check {
    if r.name.is_empty() {
        return Err(invalid(format!("{field}.name: must be set")));
    }
    if !r.namespace.is_empty() {
        return Err(invalid(format!(
            "{field}.namespace: must not be set (cross namespace referencing is not supported)"
        )));
    }
    // Istio's canonical name of the core group.
    let group = if r.group == "core" { "" } else { &r.group };
    if !TARGET_KINDS.contains(&(group, r.kind.as_str())) {
        return Err(invalid(format!(
            "{field}: must refer to a Service, a ServiceEntry (networking.istio.io), a Gateway or \
             a GatewayClass (gateway.networking.k8s.io), not {:?} of group {:?}",
            r.kind, r.group
        )));
    }
    Ok(())
}

/// Every value of a list is non-empty (Istio's `CheckEmptyValues`).
fn non_empty(values: &[String], field: &str) -> Check {
    match values.iter().position(String::is_empty) {
        Some(i) => Err(invalid(format!("{field}[{i}]: empty value not allowed"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
