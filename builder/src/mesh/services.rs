//! Services from Kubernetes Services and ServiceEntries, merged across clusters.

use super::NamespaceObjects;
use shoal_proto::config::{Config, Kind, Spec, istio, k8s};
use shoal_proto::model::{DOMAIN_SUFFIX, ExportTo, Protocol, Resolution, Service, ServicePort};
use std::collections::BTreeMap;

/// A service and the objects that define it, so endpoints can be found for it.
#[derive(Debug)]
pub struct SourcedService<'a> {
    pub service: Service,
    pub kube: Vec<(&'a Config, &'a k8s::ServiceSpec)>,
    pub entries: Vec<(&'a Config, &'a istio::ServiceEntry)>,
}

pub fn build<'a>(namespace: &str, objects: &NamespaceObjects<'a>) -> Vec<SourcedService<'a>> {
    let mut by_host: BTreeMap<String, SourcedService<'a>> = BTreeMap::new();
    for config in objects.of(Kind::Service) {
        let Spec::Service(spec) = &config.spec else {
            continue;
        };
        let svc = from_kube(namespace, config, spec);
        merged(&mut by_host, svc).kube.push((config, spec));
    }
    for config in objects.of(Kind::ServiceEntry) {
        let Spec::ServiceEntry(spec) = &config.spec else {
            continue;
        };
        for svc in from_entry(namespace, config, spec) {
            merged(&mut by_host, svc).entries.push((config, spec));
        }
    }
    by_host.into_values().collect()
}

/// The entry for `svc`'s hostname, with `svc` merged into it.
fn merged<'m, 'a>(
    by_host: &'m mut BTreeMap<String, SourcedService<'a>>,
    svc: Service,
) -> &'m mut SourcedService<'a> {
    let entry = by_host
        .entry(svc.hostname.clone())
        .or_insert_with(|| SourcedService {
            service: Service {
                ports: Vec::new(),
                addresses: Vec::new(),
                clusters: Vec::new(),
                ..svc.clone()
            },
            kube: Vec::new(),
            entries: Vec::new(),
        });
    merge(&mut entry.service, svc);
    entry
}

/// Merges the same hostname from another cluster or object: ports and VIPs are unioned.
fn merge(into: &mut Service, other: Service) {
    for port in other.ports {
        if !into.ports.iter().any(|p| p.port == port.port) {
            into.ports.push(port);
        }
    }
    into.ports.sort_by_key(|p| p.port);
    for a in other.addresses {
        if !into.addresses.contains(&a) {
            into.addresses.push(a);
        }
    }
    into.addresses.sort();
    for c in other.clusters {
        if !into.clusters.contains(&c) {
            into.clusters.push(c);
        }
    }
    into.clusters.sort();
}

fn export_to_annotation(config: &Config) -> ExportTo {
    ExportTo(
        config
            .meta
            .annotations
            .get("networking.istio.io/exportTo")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    )
}

fn from_kube(namespace: &str, config: &Config, spec: &k8s::ServiceSpec) -> Service {
    let resolution = if spec.service_type == "ExternalName" {
        Resolution::Dns
    } else if spec.cluster_ip == "None" {
        Resolution::Passthrough
    } else {
        Resolution::ClientSideLb
    };
    Service {
        hostname: format!("{}.{namespace}.{DOMAIN_SUFFIX}", config.meta.name),
        namespace: namespace.to_string(),
        name: config.meta.name.clone(),
        ports: spec
            .ports
            .iter()
            .map(|p| ServicePort {
                name: p.name.clone(),
                port: p.port,
                protocol: Protocol::of_kubernetes_port(
                    &p.name,
                    p.app_protocol.as_deref(),
                    &p.protocol,
                ),
            })
            .collect(),
        addresses: match spec.cluster_ip.as_str() {
            "" | "None" => Vec::new(),
            ip => vec![ip.to_string()],
        },
        resolution,
        mesh_external: false,
        export_to: export_to_annotation(config),
        labels: config.meta.labels.clone(),
        clusters: vec![config.meta.origin.cluster.clone()],
        external_name: if resolution == Resolution::Dns {
            spec.external_name.clone()
        } else {
            String::new()
        },
    }
}

fn from_entry(namespace: &str, config: &Config, spec: &istio::ServiceEntry) -> Vec<Service> {
    let resolution = match spec.resolution.as_deref().unwrap_or("NONE") {
        "STATIC" => Resolution::ClientSideLb,
        "DNS" => Resolution::Dns,
        "DNS_ROUND_ROBIN" => Resolution::DnsRoundRobin,
        _ => Resolution::Passthrough,
    };
    spec.hosts
        .iter()
        .map(|host| Service {
            hostname: host.clone(),
            namespace: namespace.to_string(),
            name: config.meta.name.clone(),
            ports: spec
                .ports
                .iter()
                .map(|p| ServicePort {
                    name: p.name.clone(),
                    port: p.number,
                    protocol: Protocol::of_entry_port(&p.protocol, &p.name),
                })
                .collect(),
            addresses: spec.addresses.clone(),
            resolution,
            mesh_external: spec.location.as_deref() != Some("MESH_INTERNAL"),
            export_to: ExportTo(spec.export_to.clone()),
            labels: config.meta.labels.clone(),
            clusters: vec![config.meta.origin.cluster.clone()],
            external_name: String::new(),
        })
        .collect()
}
