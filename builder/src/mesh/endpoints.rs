//! Endpoints of one service: Kubernetes first (EndpointSlices, else v1 Endpoints, else
//! the Pods the selector picks), plus the WorkloadEntries its selector picks, then
//! ServiceEntry endpoints.

use super::NamespaceObjects;
use super::services::SourcedService;
use super::workloads::{self, Workload};
use shoal_proto::config::{Config, Kind, Spec, istio, k8s};
use shoal_proto::model::{Endpoint, ServiceEndpoints, ServicePort};
use std::collections::{BTreeMap, HashMap};

type PodsByName<'a> = BTreeMap<&'a str, (&'a Config, &'a k8s::PodSpec)>;

/// A namespace's Pods, EndpointSlices and Endpoints, indexed once per namespace build so
/// that each service finds its own without scanning the namespace (which made a
/// namespace's build quadratic in its size).
pub struct EndpointIndex<'a> {
    /// Pods by cluster, then by name (a later object with the same name wins).
    pods: HashMap<&'a str, PodsByName<'a>>,
    /// EndpointSlices by (cluster, `kubernetes.io/service-name`), in object order.
    slices: HashMap<(&'a str, &'a str), Vec<&'a k8s::EndpointSliceSpec>>,
    /// The first v1 Endpoints by (cluster, name).
    legacy: HashMap<(&'a str, &'a str), &'a k8s::EndpointsSpec>,
    /// WorkloadEntries, their groups applied.
    workloads: Vec<Workload<'a>>,
}

impl<'a> EndpointIndex<'a> {
    pub fn new(objects: &NamespaceObjects<'a>) -> Self {
        let mut pods: HashMap<&'a str, PodsByName<'a>> = HashMap::new();
        for c in objects.of(Kind::Pod) {
            if let Spec::Pod(p) = &c.spec {
                pods.entry(c.meta.origin.cluster.as_str())
                    .or_default()
                    .insert(c.meta.name.as_str(), (*c, p));
            }
        }
        let mut slices: HashMap<(&'a str, &'a str), Vec<_>> = HashMap::new();
        for c in objects.of(Kind::EndpointSlice) {
            if let Spec::EndpointSlice(s) = &c.spec {
                slices
                    .entry((c.meta.origin.cluster.as_str(), s.service_name.as_str()))
                    .or_default()
                    .push(s);
            }
        }
        let mut legacy = HashMap::new();
        for c in objects.of(Kind::Endpoints) {
            if let Spec::Endpoints(e) = &c.spec {
                legacy
                    .entry((c.meta.origin.cluster.as_str(), c.meta.name.as_str()))
                    .or_insert(e);
            }
        }
        EndpointIndex {
            pods,
            slices,
            legacy,
            workloads: workloads::resolve(objects),
        }
    }
}

pub fn build(
    source: &SourcedService<'_>,
    objects: &NamespaceObjects<'_>,
    index: &EndpointIndex<'_>,
) -> ServiceEndpoints {
    let mut out = Vec::new();
    for (config, spec) in &source.kube {
        kube_endpoints(config, spec, &source.service.ports, index, &mut out);
    }
    for (config, spec) in &source.entries {
        entry_endpoints(config, spec, objects, index, &mut out);
    }
    out.sort_by(|a, b| {
        (a.service_port, &a.address, a.port, &a.cluster).cmp(&(
            b.service_port,
            &b.address,
            b.port,
            &b.cluster,
        ))
    });
    out.dedup_by(|a, b| {
        a.service_port == b.service_port && a.address == b.address && a.port == b.port
    });
    ServiceEndpoints {
        service: source.service.key(),
        endpoints: out,
    }
}

fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Locality as Istio writes it, `region/zone/subzone`: the workload's `istio-locality`
/// label, else its Node's topology labels (`node_locality`, from the Kubernetes
/// registry), else the well-known labels on the workload itself and the EndpointSlice's
/// zone.
fn locality(labels: &BTreeMap<String, String>, node_locality: &str, zone: Option<&str>) -> String {
    if let Some(l) = labels.get("istio-locality") {
        return l.replace('.', "/");
    }
    if !node_locality.is_empty() {
        return node_locality.to_string();
    }
    let region = labels
        .get("topology.kubernetes.io/region")
        .map(String::as_str)
        .unwrap_or("");
    let zone = zone
        .or(labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str))
        .unwrap_or("");
    let subzone = labels
        .get("topology.istio.io/subzone")
        .map(String::as_str)
        .unwrap_or("");
    let mut parts = vec![region, zone, subzone];
    while parts.last() == Some(&"") {
        parts.pop();
    }
    parts.join("/")
}

fn network(labels: &BTreeMap<String, String>) -> String {
    labels
        .get("topology.istio.io/network")
        .cloned()
        .unwrap_or_default()
}

/// The service port an endpoint port serves: by name, or the only port when unnamed.
fn service_port_for(ports: &[ServicePort], name: &str) -> Option<u32> {
    ports
        .iter()
        .find(|p| p.name == name)
        .or_else(|| (ports.len() == 1 && name.is_empty()).then(|| &ports[0]))
        .map(|p| p.port)
}

fn kube_endpoints(
    config: &Config,
    spec: &k8s::ServiceSpec,
    ports: &[ServicePort],
    index: &EndpointIndex<'_>,
    out: &mut Vec<Endpoint>,
) {
    pod_endpoints(config, spec, ports, index, out);
    // Istio adds the WorkloadEntries a Service selects whatever its Pods' endpoints
    // come from, for client-side load-balanced Services only.
    if spec.cluster_ip != "None" && spec.service_type != "ExternalName" {
        for workload in &index.workloads {
            selected_workload_endpoints(spec, workload, out);
        }
    }
}

/// The endpoints Kubernetes gives the Service: EndpointSlices, else v1 Endpoints, else
/// the Pods its selector picks.
fn pod_endpoints(
    config: &Config,
    spec: &k8s::ServiceSpec,
    ports: &[ServicePort],
    index: &EndpointIndex<'_>,
    out: &mut Vec<Endpoint>,
) {
    let cluster = config.meta.origin.cluster.as_str();
    let name = config.meta.name.as_str();
    let pods = index.pods.get(cluster);
    let pod_of = |r: &Option<k8s::ObjectRef>| {
        r.as_ref()
            .filter(|r| r.kind == "Pod" || r.kind.is_empty())
            .and_then(|r| pods?.get(r.name.as_str()))
    };
    let endpoint = |address: &str,
                    port: u32,
                    service_port: u32,
                    pod: Option<&(&Config, &k8s::PodSpec)>,
                    zone: Option<&str>,
                    healthy: bool| {
        let labels = pod.map(|(c, _)| c.meta.labels.clone()).unwrap_or_default();
        let node_locality = pod.map_or("", |(_, p)| p.node_locality.as_str());
        Endpoint {
            address: address.to_string(),
            port,
            service_port,
            locality: locality(&labels, node_locality, zone),
            network: network(&labels),
            service_account: pod
                .map(|(_, p)| p.service_account.clone())
                .unwrap_or_default(),
            labels,
            cluster: cluster.to_string(),
            weight: 1,
            healthy,
        }
    };

    if let Some(slices) = index.slices.get(&(cluster, name)) {
        for slice in slices {
            if !matches!(slice.address_type.as_str(), "" | "IPv4" | "IPv6") {
                continue;
            }
            for ep in &slice.endpoints {
                let pod = pod_of(&ep.target_ref);
                let healthy = ep.conditions.ready != Some(false);
                for port in &slice.ports {
                    let Some(sp) = service_port_for(ports, &port.name) else {
                        continue;
                    };
                    for addr in &ep.addresses {
                        out.push(endpoint(
                            addr,
                            port.port,
                            sp,
                            pod,
                            ep.zone.as_deref(),
                            healthy,
                        ));
                    }
                }
            }
        }
        return;
    }

    if let Some(eps) = index.legacy.get(&(cluster, name)) {
        for subset in &eps.subsets {
            for port in &subset.ports {
                let Some(sp) = service_port_for(ports, &port.name) else {
                    continue;
                };
                let all = subset
                    .addresses
                    .iter()
                    .map(|a| (a, true))
                    .chain(subset.not_ready_addresses.iter().map(|a| (a, false)));
                for (addr, healthy) in all {
                    let pod = pod_of(&addr.target_ref);
                    out.push(endpoint(&addr.ip, port.port, sp, pod, None, healthy));
                }
            }
        }
        return;
    }

    // No endpoint objects: select Pods as the Kubernetes endpoints controller would.
    for (pod_config, pod) in pods.into_iter().flat_map(BTreeMap::values) {
        if pod.ip.is_empty() || !selects(&spec.selector, &pod_config.meta.labels) {
            continue;
        }
        for port in &spec.ports {
            let target = match port.target_port.as_deref() {
                None => Some(port.port),
                Some(t) => t.parse().ok().or_else(|| pod.named_ports.get(t).copied()),
            };
            if let Some(target) = target {
                out.push(endpoint(
                    &pod.ip,
                    target,
                    port.port,
                    Some(&(pod_config, pod)),
                    None,
                    pod.ready,
                ));
            }
        }
    }
}

/// A WorkloadEntry's endpoints for a Service that selects it (same namespace, labels a
/// superset of the selector). Ports as Istio's `serviceInstanceFromWorkloadInstance`: a
/// named targetPort is the entry's port of that name (no such port: none); a numbered
/// one (or none, which Kubernetes defaults to the port) is the entry's port named as the
/// service port, else that number.
fn selected_workload_endpoints(
    spec: &k8s::ServiceSpec,
    workload: &Workload<'_>,
    out: &mut Vec<Endpoint>,
) {
    if !selects(&spec.selector, &workload.labels) {
        return;
    }
    let we = workload.entry.as_ref();
    for port in &spec.ports {
        let target = match port.target_port.as_deref().map(|t| (t, t.parse::<u32>())) {
            Some((name, Err(_))) => we.ports.get(name).copied(),
            Some((_, Ok(number))) => Some(we.ports.get(&port.name).copied().unwrap_or(number)),
            None => Some(we.ports.get(&port.name).copied().unwrap_or(port.port)),
        };
        if let Some(target) = target {
            out.push(workload_endpoint(
                &workload.config.meta.origin.cluster,
                we,
                &workload.labels,
                target,
                port.port,
            ));
        }
    }
}

fn workload_endpoint(
    cluster: &str,
    we: &istio::WorkloadEntry,
    labels: &BTreeMap<String, String>,
    port: u32,
    service_port: u32,
) -> Endpoint {
    let labels = labels.clone();
    Endpoint {
        address: we.address.clone(),
        port,
        service_port,
        locality: if we.locality.is_empty() {
            locality(&labels, "", None)
        } else {
            we.locality.clone()
        },
        network: if we.network.is_empty() {
            network(&labels)
        } else {
            we.network.clone()
        },
        labels,
        cluster: cluster.to_string(),
        weight: we.weight.max(1),
        healthy: true,
        service_account: we.service_account.clone(),
    }
}

/// A ServiceEntry's endpoints: its inline ones, or the WorkloadEntries and Pods its
/// `workloadSelector` picks. A port is the workload's port named as the entry's port,
/// else the entry's `targetPort`, else its number.
fn entry_endpoints(
    config: &Config,
    spec: &istio::ServiceEntry,
    objects: &NamespaceObjects<'_>,
    index: &EndpointIndex<'_>,
    out: &mut Vec<Endpoint>,
) {
    let port_for = |named: &BTreeMap<String, u32>, se_port: &istio::ServiceEntryPort| {
        named
            .get(&se_port.name)
            .copied()
            .or(se_port.target_port)
            .unwrap_or(se_port.number)
    };
    let cluster = config.meta.origin.cluster.as_str();
    for we in &spec.endpoints {
        let mut labels = config.meta.labels.clone();
        labels.extend(we.labels.clone());
        for p in &spec.ports {
            out.push(workload_endpoint(
                cluster,
                we,
                &labels,
                port_for(&we.ports, p),
                p.number,
            ));
        }
    }
    let Some(selector) = &spec.workload_selector else {
        return;
    };
    for workload in &index.workloads {
        if !selects(&selector.labels, &workload.labels) {
            continue;
        }
        let we = workload.entry.as_ref();
        for p in &spec.ports {
            out.push(workload_endpoint(
                &workload.config.meta.origin.cluster,
                we,
                &workload.labels,
                port_for(&we.ports, p),
                p.number,
            ));
        }
    }
    for pod_config in objects.of(Kind::Pod) {
        let Spec::Pod(pod) = &pod_config.spec else {
            continue;
        };
        if pod.ip.is_empty() || !selects(&selector.labels, &pod_config.meta.labels) {
            continue;
        }
        for p in &spec.ports {
            out.push(Endpoint {
                address: pod.ip.clone(),
                port: port_for(&pod.named_ports, p),
                service_port: p.number,
                labels: pod_config.meta.labels.clone(),
                cluster: pod_config.meta.origin.cluster.clone(),
                network: network(&pod_config.meta.labels),
                locality: locality(&pod_config.meta.labels, &pod.node_locality, None),
                weight: 1,
                healthy: pod.ready,
                service_account: pod.service_account.clone(),
            });
        }
    }
}
