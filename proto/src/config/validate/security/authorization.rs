//! AuthorizationPolicy validation (Istio's `ValidateAuthorizationPolicy`).

use super::super::{Check, invalid};
use super::attributes::{
    attribute_key, attribute_values, ips, path_templates, ports, service_accounts, trust_domains,
};
use super::{action, attachment, non_empty};
use crate::config::security::{
    AuthorizationPolicy, AuthorizationRule, Condition, Operation, Source,
};

/// At most this many rules, and `from` entries in one rule (the CRD's bounds).
const MAX_RULES: usize = 512;
const MAX_FROM: usize = 512;

pub(crate) fn authorization_policy(ap: &AuthorizationPolicy, warnings: &mut Vec<String>) -> Check {
    attachment(
        ap.selector.as_ref(),
        ap.target_ref.as_ref(),
        &ap.target_refs,
        warnings,
    )?;
    let action = action(ap);
    if !matches!(action, "ALLOW" | "DENY" | "AUDIT" | "CUSTOM") {
        return Err(invalid(format!(
            "spec.action: unknown action {action:?} (ALLOW, DENY, AUDIT or CUSTOM)"
        )));
    }
    // Without rules, a CUSTOM or DENY policy never matches: surely not what was meant.
    if matches!(action, "CUSTOM" | "DENY") && ap.rules.is_empty() {
        return Err(invalid(format!(
            "spec.rules: {action} action without rules is meaningless as it will never be \
             triggered; add an empty rule {{}} if you want it triggered for every request"
        )));
    }
    match (&ap.provider, action) {
        (None, "CUSTOM") => {
            return Err(invalid(
                "spec.provider.name: must be set for the CUSTOM action",
            ));
        }
        (Some(p), "CUSTOM") if p.name.is_empty() => {
            return Err(invalid(
                "spec.provider.name: must not be empty for the CUSTOM action",
            ));
        }
        (Some(_), action) if action != "CUSTOM" => {
            return Err(invalid(format!(
                "spec.provider: only for the CUSTOM action, found action {action}"
            )));
        }
        _ => {}
    }
    if ap.rules.len() > MAX_RULES {
        return Err(invalid(format!(
            "spec.rules: {} rules, at most {MAX_RULES} are allowed",
            ap.rules.len()
        )));
    }
    for (i, rule) in ap.rules.iter().enumerate() {
        let field = format!("spec.rules[{i}]");
        if action == "CUSTOM" {
            custom_rule(rule, &field)?;
        }
        authorization_rule(rule, &field)?;
        if action == "DENY" && denies_tcp(rule) {
            warnings.push(format!(
                "{field}: configured AuthorizationPolicy will deny all traffic to TCP ports under \
                 its scope due to the use of only HTTP attributes in a DENY rule; it is \
                 recommended to explicitly specify the port"
            ));
        }
    }
    Ok(())
}

fn authorization_rule(rule: &AuthorizationRule, field: &str) -> Check {
    if rule.from.len() > MAX_FROM {
        return Err(invalid(format!(
            "{field}.from: {} entries, at most {MAX_FROM} are allowed",
            rule.from.len()
        )));
    }
    for (j, from) in rule.from.iter().enumerate() {
        let f = format!("{field}.from[{j}].source");
        let Some(source) = &from.source else {
            return Err(invalid(format!("{f}: must be set")));
        };
        self::source(source, &f)?;
    }
    for (j, to) in rule.to.iter().enumerate() {
        let f = format!("{field}.to[{j}].operation");
        let Some(operation) = &to.operation else {
            return Err(invalid(format!("{f}: must be set")));
        };
        self::operation(operation, &f)?;
    }
    for (j, c) in rule.when.iter().enumerate() {
        condition(c, &format!("{field}.when[{j}]"))?;
    }
    Ok(())
}

/// The source's lists, by their field names.
fn source_lists(s: &Source) -> [(&'static str, &[String]); 14] {
    [
        ("principals", &s.principals),
        ("notPrincipals", &s.not_principals),
        ("requestPrincipals", &s.request_principals),
        ("notRequestPrincipals", &s.not_request_principals),
        ("namespaces", &s.namespaces),
        ("notNamespaces", &s.not_namespaces),
        ("serviceAccounts", &s.service_accounts),
        ("notServiceAccounts", &s.not_service_accounts),
        ("ipBlocks", &s.ip_blocks),
        ("notIpBlocks", &s.not_ip_blocks),
        ("remoteIpBlocks", &s.remote_ip_blocks),
        ("notRemoteIpBlocks", &s.not_remote_ip_blocks),
        ("trustDomains", &s.trust_domains),
        ("notTrustDomains", &s.not_trust_domains),
    ]
}

fn source(s: &Source, field: &str) -> Check {
    let lists = source_lists(s);
    if lists.iter().all(|(_, l)| l.is_empty()) {
        return Err(invalid(format!("{field}: must not be empty")));
    }
    let by_identity = [
        &s.principals,
        &s.not_principals,
        &s.namespaces,
        &s.not_namespaces,
    ];
    let by_account = [&s.service_accounts, &s.not_service_accounts];
    if by_identity.iter().any(|l| !l.is_empty()) && by_account.iter().any(|l| !l.is_empty()) {
        return Err(invalid(format!(
            "{field}: cannot set serviceAccounts with namespaces or principals"
        )));
    }
    for (name, values) in lists {
        let f = format!("{field}.{name}");
        match name {
            "serviceAccounts" | "notServiceAccounts" => service_accounts(values, &f)?,
            "trustDomains" | "notTrustDomains" => trust_domains(values, &f)?,
            _ => non_empty(values, &f)?,
        }
        if name.ends_with("pBlocks") {
            ips(values, &f)?;
        }
    }
    Ok(())
}

fn operation(o: &Operation, field: &str) -> Check {
    let lists: [(&str, &[String]); 8] = [
        ("hosts", &o.hosts),
        ("notHosts", &o.not_hosts),
        ("ports", &o.ports),
        ("notPorts", &o.not_ports),
        ("methods", &o.methods),
        ("notMethods", &o.not_methods),
        ("paths", &o.paths),
        ("notPaths", &o.not_paths),
    ];
    if lists.iter().all(|(_, l)| l.is_empty()) {
        return Err(invalid(format!("{field}: must not be empty")));
    }
    for (name, values) in lists {
        let f = format!("{field}.{name}");
        non_empty(values, &f)?;
        match name {
            "ports" | "notPorts" => ports(values, &f)?,
            "paths" | "notPaths" => path_templates(values, &f)?,
            _ => {}
        }
    }
    Ok(())
}

fn condition(c: &Condition, field: &str) -> Check {
    if c.key.is_empty() {
        return Err(invalid(format!("{field}.key: must not be empty")));
    }
    if c.values.is_empty() && c.not_values.is_empty() {
        return Err(invalid(format!(
            "{field}: at least one of values or notValues must be set for key {:?}",
            c.key
        )));
    }
    attribute_key(&c.key, &format!("{field}.key"))?;
    attribute_values(&c.key, &c.values, &format!("{field}.values"))?;
    attribute_values(&c.key, &c.not_values, &format!("{field}.notValues"))
}

/// What Istio's ext_authz (CUSTOM) filter cannot match on: identities, which it learns
/// only after the CUSTOM check.
fn custom_rule(rule: &AuthorizationRule, field: &str) -> Check {
    for (j, from) in rule.from.iter().enumerate() {
        let Some(s) = &from.source else { continue };
        // IP blocks are read from the connection: those it can match.
        let unsupported = source_lists(s)
            .into_iter()
            .find(|(name, values)| !values.is_empty() && !name.ends_with("pBlocks"));
        if let Some((name, _)) = unsupported {
            return Err(invalid(format!(
                "{field}.from[{j}].source.{name}: not supported with the CUSTOM action"
            )));
        }
    }
    for (j, c) in rule.when.iter().enumerate() {
        let identity = matches!(
            c.key.as_str(),
            "source.namespace"
                | "source.serviceAccount"
                | "source.trustDomain"
                | "source.principal"
        ) || c.key.starts_with("request.auth.");
        if identity {
            return Err(invalid(format!(
                "{field}.when[{j}].key: {:?} is not supported with the CUSTOM action",
                c.key
            )));
        }
    }
    Ok(())
}

/// A DENY rule that only HTTP attributes match: on a TCP port those cannot be read, so
/// the rule matches, and denies, every connection (Istio warns).
fn denies_tcp(rule: &AuthorizationRule) -> bool {
    let sources: Vec<&Source> = rule.from.iter().filter_map(|f| f.source.as_ref()).collect();
    let operations: Vec<&Operation> = rule
        .to
        .iter()
        .filter_map(|t| t.operation.as_ref())
        .collect();
    let tcp_in_from = sources.iter().any(|s| {
        [
            &s.principals,
            &s.not_principals,
            &s.ip_blocks,
            &s.not_ip_blocks,
            &s.namespaces,
            &s.not_namespaces,
            &s.remote_ip_blocks,
            &s.not_remote_ip_blocks,
            &s.service_accounts,
            &s.not_service_accounts,
        ]
        .iter()
        .any(|l| !l.is_empty())
    });
    let tcp_in_to = operations
        .iter()
        .any(|o| !o.ports.is_empty() || !o.not_ports.is_empty());
    (!sources.is_empty() && operations.is_empty() && !tcp_in_from)
        || (!operations.is_empty() && !tcp_in_to)
}
