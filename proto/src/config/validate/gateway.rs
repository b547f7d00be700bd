//! Gateway validation, by Istio's rules (`ValidateGateway`): servers with a port, hosts
//! as `[namespace/]host`, TLS settings that fit the protocol and mode.

use super::super::istio::{Gateway, GatewayServer, ServerTlsSettings};
use super::{Check, host, invalid, port_number};
use std::collections::HashSet;

const PROTOCOLS: [&str; 8] = [
    "HTTP", "HTTPS", "GRPC", "GRPC-WEB", "HTTP2", "MONGO", "TCP", "TLS",
];

pub fn gateway(gw: &Gateway, warnings: &mut Vec<String>) -> Check {
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
    port_number(port.number, &format!("{field}.port.number"))?;
    let protocol = port.protocol.to_ascii_uppercase();
    if !PROTOCOLS.contains(&protocol.as_str()) {
        return Err(invalid(format!(
            "{field}.port.protocol: unknown protocol {:?} (use one of {})",
            port.protocol,
            PROTOCOLS.join(", ")
        )));
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
    match &s.tls {
        None if needs_tls => Err(invalid(format!(
            "{field}.tls: {protocol} servers must have TLS settings"
        ))),
        None => Ok(()),
        Some(tls) if !needs_tls => {
            // Istio allows TLS settings on a plain server only to redirect to HTTPS.
            if !tls.https_redirect {
                warnings.push(format!(
                    "{field}.tls: ignored on a {protocol} server (only httpsRedirect applies)"
                ));
            }
            Ok(())
        }
        Some(tls) => server_tls(tls, &format!("{field}.tls")),
    }
}

/// `host`, `*`, `namespace/host`, `./host` or `*/host`.
fn server_host(h: &str, field: &str) -> Check {
    let (namespace, name) = match h.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, h),
    };
    if let Some(ns) = namespace
        && (ns.is_empty() || ns.contains('/'))
    {
        return Err(invalid(format!(
            "{field}: {h:?} must be host or namespace/host"
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
    match mode {
        "PASSTHROUGH" | "AUTO_PASSTHROUGH" | "ISTIO_MUTUAL" => Ok(()),
        "SIMPLE" | "MUTUAL" | "OPTIONAL_MUTUAL" => {
            let files = !tls.server_certificate.is_empty() && !tls.private_key.is_empty();
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
