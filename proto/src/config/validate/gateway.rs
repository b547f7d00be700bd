//! Gateway validation, by Istio's rules (`ValidateGateway`): servers with a port, hosts
//! as `[namespace/]host`, TLS settings that fit the protocol and mode.

use super::super::istio::{Gateway, GatewayServer, ServerTlsSettings};
use super::{Check, dns1123_label, host, invalid, port_number, protocol, unix_path};
use std::collections::HashSet;
use std::net::IpAddr;

/// Protocols whose requests name their host (and so may carry only an HTTPS redirect).
const HTTP: [&str; 5] = ["HTTP", "HTTP2", "HTTP_PROXY", "GRPC", "GRPC-WEB"];

pub fn gateway(name: &str, gw: &Gateway, warnings: &mut Vec<String>) -> Check {
    // Listener and route names are built from it.
    if !dns1123_label(name) {
        return Err(invalid(format!(
            "metadata.name: invalid gateway name {name:?} (a DNS-1123 label, without dots, is required)"
        )));
    }
    if gw.servers.is_empty() {
        return Err(invalid("gateway must have at least one server"));
    }
    let (mut names, mut port_names) = (HashSet::new(), HashSet::new());
    for (i, s) in gw.servers.iter().enumerate() {
        let field = format!("servers[{i}]");
        server(s, &field, warnings)?;
        if !s.name.is_empty() && !names.insert(s.name.as_str()) {
            return Err(invalid(format!(
                "{field}.name: server name {:?} is used twice",
                s.name
            )));
        }
        // Route configurations are named after them (`https.<port>.<name>...`).
        if let Some(p) = &s.port
            && !p.name.is_empty()
            && !port_names.insert(p.name.as_str())
        {
            return Err(invalid(format!(
                "{field}.port.name: port names must be unique in a Gateway: {:?} is used twice",
                p.name
            )));
        }
    }
    Ok(())
}

fn server(s: &GatewayServer, field: &str, warnings: &mut Vec<String>) -> Check {
    let Some(port) = &s.port else {
        return Err(invalid(format!("{field}.port is required")));
    };
    let unix_bind = s.bind.strip_prefix("unix://");
    if port.number > 0 || unix_bind.is_none() {
        port_number(port.number, &format!("{field}.port.number"))?;
    }
    if port.protocol.is_empty() {
        return Err(invalid(format!("{field}.port.protocol is required")));
    }
    protocol(&port.protocol, &format!("{field}.port.protocol"))?;
    let protocol = port.protocol.to_ascii_uppercase();
    if port.name.is_empty() {
        return Err(invalid(format!("{field}.port.name must be set")));
    }
    if port.target_port.is_some_and(|t| t > 0) {
        return Err(invalid(format!(
            "{field}.port.targetPort has no impact on Gateways (the Service maps ports)"
        )));
    }
    match unix_bind {
        Some(path) => {
            unix_path(path).map_err(|why| invalid(format!("{field}.bind: {why}")))?;
            if port.number != 0 {
                return Err(invalid(format!(
                    "{field}.port.number must be 0 for a unix domain socket bind"
                )));
            }
            // Valid for Istio; Shoal's gateway listeners are IP ports only.
            return Err(invalid(format!(
                "{field}.bind: unix domain socket servers are not supported by Shoal (valid in Istio)"
            )));
        }
        None if !s.bind.is_empty() && s.bind.parse::<IpAddr>().is_err() => {
            return Err(invalid(format!(
                "{field}.bind: {:?} is not an IP address or unix:// socket",
                s.bind
            )));
        }
        None if !s.bind.is_empty() => warnings.push(format!(
            "{field}.bind is not supported by Shoal: ignored (the server listens on every address)"
        )),
        None => {}
    }
    if s.hosts.is_empty() {
        return Err(invalid(format!(
            "{field}.hosts: at least one host is required"
        )));
    }
    for (j, h) in s.hosts.iter().enumerate() {
        server_host(h, &format!("{field}.hosts[{j}]"))?;
    }
    let needs_tls = matches!(protocol.as_str(), "HTTPS" | "TLS");
    let http = HTTP.contains(&protocol.as_str());
    match &s.tls {
        None if needs_tls => Err(invalid(format!(
            "{field}.tls: {protocol} servers must have TLS settings"
        ))),
        None => Ok(()),
        Some(tls) if !needs_tls => {
            // Istio allows TLS settings on a plain HTTP server only to redirect to HTTPS:
            // a passthrough mode and no certificate.
            let passthrough = matches!(tls.mode.as_str(), "" | "PASSTHROUGH");
            let files = !tls.server_certificate.is_empty()
                || !tls.private_key.is_empty()
                || !tls.ca_certificates.is_empty();
            if !http {
                return Err(invalid(format!(
                    "{field}.tls: a {protocol} server cannot have TLS settings (only HTTPS and TLS servers)"
                )));
            }
            if !passthrough || files {
                return Err(invalid(format!(
                    "{field}.tls: a plain text {protocol} server cannot have TLS settings (only httpsRedirect)"
                )));
            }
            if !tls.https_redirect {
                warnings.push(format!(
                    "{field}.tls: ignored on a {protocol} server (only httpsRedirect applies)"
                ));
            }
            Ok(())
        }
        Some(tls) => {
            if tls.https_redirect {
                warnings.push(format!(
                    "{field}.tls.httpsRedirect should only be used with HTTP servers"
                ));
            }
            server_tls(tls, &format!("{field}.tls"))
        }
    }
}

/// `host`, `*`, `namespace/host`, `./host` or `*/host`: a fully qualified name (short
/// names are not allowed), a wildcard only as the whole first label, or an IP.
fn server_host(h: &str, field: &str) -> Check {
    let (namespace, name) = match h.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, h),
    };
    if let Some(ns) = namespace
        && !(ns == "*" || ns == "." || dns1123_label(ns))
    {
        return Err(invalid(format!(
            "{field}: {h:?} must be host or namespace/host (namespace *, . or a namespace name, not {ns:?})"
        )));
    }
    if name.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    if name != "*" && !name.contains('.') {
        return Err(invalid(format!(
            "{field}: {h:?}: short names (non FQDN) are not allowed"
        )));
    }
    host(name, field)
}

fn server_tls(tls: &ServerTlsSettings, field: &str) -> Check {
    let mode = if tls.mode.is_empty() {
        "PASSTHROUGH"
    } else {
        tls.mode.as_str()
    };
    let files = !tls.server_certificate.is_empty() && !tls.private_key.is_empty();
    match mode {
        "ISTIO_MUTUAL" => {
            let set = [
                ("serverCertificate", &tls.server_certificate),
                ("privateKey", &tls.private_key),
                ("caCertificates", &tls.ca_certificates),
                ("credentialName", &tls.credential_name),
            ];
            match set.iter().find(|(_, v)| !v.is_empty()) {
                Some((name, _)) => Err(invalid(format!(
                    "{field}.{name}: ISTIO_MUTUAL TLS cannot have an associated {name}"
                ))),
                None => Ok(()),
            }
        }
        "PASSTHROUGH" | "AUTO_PASSTHROUGH" => Ok(()),
        "SIMPLE" | "MUTUAL" | "OPTIONAL_MUTUAL" => {
            if files && !tls.credential_name.is_empty() {
                return Err(invalid(format!(
                    "{field}: only one of credentialName or serverCertificate/privateKey should be specified"
                )));
            }
            if tls.credential_name.is_empty() && !files {
                return Err(invalid(format!(
                    "{field}: {mode} mode requires credentialName, or serverCertificate and privateKey"
                )));
            }
            if mode != "SIMPLE" && tls.credential_name.is_empty() && tls.ca_certificates.is_empty()
            {
                return Err(invalid(format!(
                    "{field}: {mode} mode requires credentialName or caCertificates to verify clients"
                )));
            }
            for (name, v) in [
                ("minProtocolVersion", &tls.min_protocol_version),
                ("maxProtocolVersion", &tls.max_protocol_version),
            ] {
                if !matches!(
                    v.as_str(),
                    "" | "TLS_AUTO" | "TLSV1_0" | "TLSV1_1" | "TLSV1_2" | "TLSV1_3"
                ) {
                    return Err(invalid(format!(
                        "{field}.{name}: unknown TLS version {v:?}"
                    )));
                }
            }
            Ok(())
        }
        other => Err(invalid(format!("{field}.mode: unknown TLS mode {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(name: &str, servers: &str) -> Result<Vec<String>, String> {
        let gw: Gateway = serde_norway::from_str(&format!("servers:\n{servers}")).unwrap();
        let mut warnings = Vec::new();
        gateway(name, &gw, &mut warnings).map_err(|e| e.0)?;
        Ok(warnings)
    }

    fn rejected(servers: &str, reason: &str) {
        match check("gw", servers) {
            Err(e) => assert!(e.contains(reason), "{e:?} does not say {reason:?}"),
            Ok(w) => panic!("accepted ({w:?}), expected {reason:?}:\n{servers}"),
        }
    }

    const HTTP: &str = "- port: {number: 80, name: http, protocol: HTTP}\n";

    #[test]
    fn servers_by_istio_rules() {
        assert!(
            check(
                "gw",
                &format!(
                    "{HTTP}  hosts: ['*', '*.example.com', 'shop/a.example.com', '10.0.0.1']\n"
                )
            )
            .is_ok()
        );
        rejected(&format!("{HTTP}  hosts: [reviews]\n"), "short names");
        rejected(&format!("{HTTP}  hosts: [shop/reviews]\n"), "short names");
        rejected(
            "- port: {number: 80, protocol: HTTP}\n  hosts: ['*']\n",
            "servers[0].port.name must be set",
        );
        rejected(
            "- port: {number: 80, name: http, protocol: HTTP, targetPort: 8080}\n  hosts: ['*']\n",
            "targetPort has no impact",
        );
        assert!(
            check(
                "gw",
                "- port: {number: 6379, name: redis, protocol: REDIS}\n  hosts: ['*']\n"
            )
            .is_ok()
        );
        rejected(
            "- port: {number: 80, name: x, protocol: QUIC}\n  hosts: ['*']\n",
            "port.protocol",
        );
        rejected(
            &format!("{HTTP}  hosts: ['*']\n  bind: not-an-ip\n"),
            "servers[0].bind",
        );
        rejected(
            "- port: {number: 0, name: uds, protocol: HTTP}\n  hosts: ['*']\n  bind: unix:///var/run/gw.sock\n",
            "not supported by Shoal",
        );
        rejected(
            &format!("{HTTP}  hosts: ['*']\n  bind: unix:///var/run/gw.sock\n"),
            "must be 0 for a unix domain socket",
        );
        match check("my.gw", &format!("{HTTP}  hosts: ['*']\n")) {
            Err(e) => assert!(e.contains("invalid gateway name"), "{e}"),
            Ok(_) => panic!("a dotted name was accepted"),
        }
    }

    #[test]
    fn tls_on_plain_servers_is_only_a_redirect() {
        assert!(
            check(
                "gw",
                &format!("{HTTP}  hosts: ['*']\n  tls: {{httpsRedirect: true}}\n")
            )
            .is_ok()
        );
        rejected(
            &format!(
                "{HTTP}  hosts: ['*']\n  tls: {{httpsRedirect: true, mode: SIMPLE, credentialName: c}}\n"
            ),
            "plain text HTTP server cannot have TLS settings",
        );
        rejected(
            "- port: {number: 5432, name: pg, protocol: TCP}\n  hosts: ['*']\n  tls: {mode: SIMPLE, credentialName: c}\n",
            "TCP server cannot have TLS settings",
        );
    }

    #[test]
    fn tls_modes_by_istio_rules() {
        let https = "- port: {number: 443, name: https, protocol: HTTPS}\n  hosts: ['*']\n";
        rejected(
            &format!("{https}  tls: {{mode: ISTIO_MUTUAL, credentialName: c}}\n"),
            "ISTIO_MUTUAL TLS cannot have an associated credentialName",
        );
        rejected(
            &format!(
                "{https}  tls: {{mode: SIMPLE, credentialName: c, serverCertificate: /a, privateKey: /b}}\n"
            ),
            "only one of credentialName or serverCertificate/privateKey",
        );
        assert!(
            check(
                "gw",
                &format!("{https}  tls: {{mode: SIMPLE, serverCertificate: /a, privateKey: /b}}\n")
            )
            .is_ok()
        );
    }
}
