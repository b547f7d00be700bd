//! WorkloadGroup, by Istio's rules: a template is required (its address is not: entries
//! bring their own) with valid port names, metadata labels must be valid Kubernetes
//! labels (the template's are not checked, as in Istio), and a probe has non-negative
//! timings and exactly one well-formed method.

use super::{Check, dns1123_label, invalid, port_number, unix_path};
use crate::config::istio;
use std::collections::BTreeMap;

pub(super) fn workload_group(wg: &istio::WorkloadGroup) -> Check {
    let Some(template) = &wg.template else {
        return Err(invalid("template is required"));
    };
    // The CRD's rules for the template (Istio does not validate it as a WorkloadEntry:
    // address and labels are filled in per workload).
    for (name, port) in &template.ports {
        if !dns1123_label(name) {
            return Err(invalid(format!(
                "template.ports[{name}]: invalid port name {name:?}"
            )));
        }
        port_number(*port, &format!("template.ports[{name}]"))?;
    }
    if let Some(path) = template.address.strip_prefix("unix://") {
        unix_path(path).map_err(|why| invalid(format!("template.address: {why}")))?;
        if !template.ports.is_empty() {
            return Err(invalid(
                "template.address: a unix endpoint must not include ports",
            ));
        }
    }
    if let Some(metadata) = &wg.metadata {
        labels(&metadata.labels, "metadata.labels")?;
    }
    if let Some(probe) = &wg.probe {
        readiness_probe(probe)?;
    }
    Ok(())
}

fn readiness_probe(p: &istio::ReadinessProbe) -> Check {
    for (value, field) in [
        (p.period_seconds, "periodSeconds"),
        (p.initial_delay_seconds, "initialDelaySeconds"),
        (p.timeout_seconds, "timeoutSeconds"),
        (p.success_threshold, "successThreshold"),
        (p.failure_threshold, "failureThreshold"),
    ] {
        if value < 0 {
            return Err(invalid(format!("probe.{field} must be non-negative")));
        }
    }
    let methods = [
        p.http_get.is_some(),
        p.tcp_socket.is_some(),
        p.exec.is_some(),
    ];
    match methods.iter().filter(|m| **m).count() {
        0 => {
            return Err(invalid(
                "probe: one of httpGet, tcpSocket or exec is required",
            ));
        }
        1 => {}
        _ => {
            return Err(invalid(
                "probe: only one of httpGet, tcpSocket or exec may be set",
            ));
        }
    }
    if let Some(h) = &p.http_get {
        port_number(h.port, "probe.httpGet.port")?;
        if !matches!(h.scheme.as_str(), "" | "HTTP" | "HTTPS") {
            return Err(invalid(format!(
                "probe.httpGet.scheme: {:?} must be HTTP or HTTPS",
                h.scheme
            )));
        }
        for (i, header) in h.http_headers.iter().enumerate() {
            // Kubernetes' rule for probe headers, which Istio follows: letters, digits
            // and `-` only (narrower than an HTTP token).
            let valid = !header.name.is_empty()
                && header
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-');
            if !valid {
                return Err(invalid(format!(
                    "probe.httpGet.httpHeaders[{i}].name: {:?} is not a valid header name",
                    header.name
                )));
            }
        }
    }
    if let Some(t) = &p.tcp_socket {
        port_number(t.port, "probe.tcpSocket.port")?;
    }
    if let Some(e) = &p.exec
        && e.command.is_empty()
    {
        return Err(invalid("probe.exec.command is required"));
    }
    Ok(())
}

/// Kubernetes label syntax: `[prefix/]name` keys and name-like values (may be empty).
pub(super) fn labels(labels: &BTreeMap<String, String>, field: &str) -> Check {
    for (key, value) in labels {
        let (prefix, name) = match key.rsplit_once('/') {
            Some((p, n)) => (Some(p), n),
            None => (None, key.as_str()),
        };
        let prefix_ok = prefix.is_none_or(|p| {
            !p.is_empty()
                && p.len() <= 253
                && p.split('.').all(|l| {
                    !l.is_empty()
                        && l.chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                })
        });
        if !prefix_ok || name.is_empty() || !label_value(name) {
            return Err(invalid(format!("{field}: invalid label key {key:?}")));
        }
        if !label_value(value) {
            return Err(invalid(format!(
                "{field}: invalid value {value:?} for label {key:?}"
            )));
        }
    }
    Ok(())
}

/// At most 63 characters, alphanumerics, `-`, `_` or `.`, starting and ending with an
/// alphanumeric; empty is allowed.
fn label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && v.starts_with(|c: char| c.is_ascii_alphanumeric())
            && v.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(template: Option<istio::WorkloadEntry>) -> istio::WorkloadGroup {
        istio::WorkloadGroup {
            template,
            ..Default::default()
        }
    }

    #[test]
    fn template_is_required_and_needs_no_address() {
        assert_eq!(
            workload_group(&group(None)).unwrap_err().0,
            "template is required"
        );
        assert!(workload_group(&group(Some(istio::WorkloadEntry::default()))).is_ok());
    }

    #[test]
    fn labels_and_ports_are_checked() {
        let mut wg = group(Some(istio::WorkloadEntry::default()));
        wg.metadata = Some(istio::WorkloadGroupMetadata {
            labels: [("app".into(), "bad value!".into())].into(),
            ..Default::default()
        });
        assert!(
            workload_group(&wg)
                .unwrap_err()
                .0
                .contains("metadata.labels")
        );
        wg.metadata = None;
        wg.template.as_mut().unwrap().ports = [("http".into(), 0)].into();
        assert!(
            workload_group(&wg)
                .unwrap_err()
                .0
                .contains("template.ports[http]")
        );
        wg.template.as_mut().unwrap().ports = [("http_1".into(), 80)].into();
        assert!(
            workload_group(&wg)
                .unwrap_err()
                .0
                .contains("invalid port name")
        );
        // Istio does not check the template's labels (entries get them validated).
        wg.template = Some(istio::WorkloadEntry {
            labels: [("app".into(), "not valid!".into())].into(),
            ..Default::default()
        });
        assert!(workload_group(&wg).is_ok());
        assert!(labels(&[("example.com/app".into(), "v1".into())].into(), "l").is_ok());
        assert!(labels(&[("/app".into(), String::new())].into(), "l").is_err());
    }

    #[test]
    fn probes_by_istio_rules() {
        let mut wg = group(Some(istio::WorkloadEntry::default()));
        let check = |wg: &istio::WorkloadGroup| workload_group(wg).map_err(|e| e.0);
        wg.probe = Some(istio::ReadinessProbe::default());
        assert!(check(&wg).unwrap_err().contains("one of httpGet"));
        wg.probe = Some(istio::ReadinessProbe {
            period_seconds: -1,
            tcp_socket: Some(istio::TcpHealthCheck {
                port: 8080,
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(check(&wg).unwrap_err().contains("periodSeconds"));
        wg.probe.as_mut().unwrap().period_seconds = 5;
        assert!(check(&wg).is_ok());
        wg.probe.as_mut().unwrap().exec = Some(istio::ExecHealthCheck::default());
        assert!(check(&wg).unwrap_err().contains("only one"));
        wg.probe.as_mut().unwrap().tcp_socket = None;
        assert!(check(&wg).unwrap_err().contains("exec.command"));
        wg.probe = Some(istio::ReadinessProbe {
            http_get: Some(istio::HttpHealthCheck {
                port: 80,
                scheme: "FTP".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(check(&wg).unwrap_err().contains("scheme"));
    }

    #[test]
    fn probe_header_names_follow_kubernetes() {
        let probe = |name: &str| istio::WorkloadGroup {
            template: Some(istio::WorkloadEntry::default()),
            probe: Some(istio::ReadinessProbe {
                http_get: Some(istio::HttpHealthCheck {
                    port: 80,
                    http_headers: vec![istio::ProbeHeader {
                        name: name.into(),
                        value: "v".into(),
                    }],
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(workload_group(&probe("X-Probe-1")).is_ok());
        for bad in ["x_probe", "x.probe", "x!", ""] {
            let err = workload_group(&probe(bad)).unwrap_err().0;
            assert!(err.contains("httpHeaders[0].name"), "{bad}: {err}");
        }
    }
}
