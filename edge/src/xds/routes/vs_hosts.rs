//! Virtual hosts for the hosts of VirtualServices that name no service in the scope, as
//! Istio's sidecar route builder makes them (`separateVSHostsAndServices`): an external
//! host routed without a ServiceEntry, or the host of a multi-host VirtualService that
//! the scope has no service for.
//!
//! ```text
//!  VirtualService hosts [reviews, reviews.example.com]   reviews serves 9080 (HTTP)
//!    "9080" ── reviews.example.com:9080  domains [reviews.example.com, …:9080]
//!  VirtualService hosts [httpbin.org]   (no service)
//!    "80"   ── httpbin.org:80            (a VirtualService matching no service: port 80 only)
//! ```

use shoal_proto::config::istio::VirtualService;
use shoal_proto::model::{NamedConfig, host_matches};
use shoal_proto::push_context::SidecarScope;
use std::collections::{BTreeSet, HashMap};

/// The port a VirtualService that matches no service at all is served on (Istio's).
const NO_SERVICE_PORT: u32 = 80;

/// The hosts of one VirtualService that are no service of the scope, and the ports
/// their virtual hosts are on.
pub(super) struct VsHosts<'a> {
    pub vs: &'a NamedConfig<VirtualService>,
    pub hosts: Vec<&'a str>,
    /// The HTTP (or sniffed) ports of the services the VirtualService does name, or
    /// only port 80 when it names none.
    ports: BTreeSet<u32>,
}

impl VsHosts<'_> {
    pub fn on(&self, port: u32) -> bool {
        self.ports.contains(&port)
    }
}

/// Every VirtualService of `scope` with hosts that name no service, in scope order.
/// `first_vs` tells which VirtualService routes a service host (the first one for it):
/// a wildcard host adds the ports of the services it is the first VirtualService of.
pub(super) fn non_service_hosts<'a>(
    scope: &'a SidecarScope,
    http_ports: &BTreeSet<u32>,
    first_vs: impl Fn(&str) -> Option<&'a NamedConfig<VirtualService>>,
) -> Vec<VsHosts<'a>> {
    let services: HashMap<&str, _> = scope
        .services
        .iter()
        .map(|s| (s.hostname.as_str(), s))
        .collect();
    let mut out = Vec::new();
    for vs in &scope.virtual_services {
        let mut hosts = Vec::new();
        let mut matched = Vec::new();
        for host in &vs.spec.hosts {
            if !host.contains('*') {
                match services.get(host.as_str()) {
                    Some(svc) => matched.push(*svc),
                    None => hosts.push(host.as_str()),
                }
                continue;
            }
            let mut any = false;
            for svc in scope
                .services
                .iter()
                .filter(|s| host_matches(host, &s.hostname))
            {
                any = true;
                if first_vs(&svc.hostname).is_some_and(|first| std::ptr::eq(first, &**vs)) {
                    matched.push(svc);
                }
            }
            if !any {
                hosts.push(host.as_str());
            }
        }
        if hosts.is_empty() {
            continue;
        }
        let mut ports: BTreeSet<u32> = matched
            .iter()
            .flat_map(|s| s.ports.iter())
            .map(|p| p.port)
            .filter(|p| http_ports.contains(p))
            .collect();
        if matched.is_empty() {
            ports.insert(NO_SERVICE_PORT);
        }
        out.push(VsHosts { vs, hosts, ports });
    }
    out
}
