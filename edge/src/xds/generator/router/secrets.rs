//! SDS for routers: the certificates and CAs their TLS servers name, from Secrets in the
//! router's namespace. Not cached: a router asks for a few secrets, and only on change.

use super::super::super::XdsResource;
use super::super::super::cache::TypeStats;
use super::super::super::gateway::credential_resource;
use super::super::super::gateway::secrets::{CA_SUFFIX, secret};
use super::super::super::util::resource;
use super::super::table::{Request, ResourceGenerator};
use shoal_proto::push_context::gateway::MergedGateway;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct RouterSecrets;

impl ResourceGenerator for RouterSecrets {
    fn generate(&self, req: &Request<'_>, names: &[String]) -> Vec<Arc<XdsResource>> {
        let index = req.push.index();
        let wanted: Vec<String> = if names.is_empty() {
            // A wildcard request: every credential the router's servers name.
            let ports = req.push.service_instances().gateway_ports(&req.proxy.ip);
            let merged = MergedGateway::for_router(index, &req.proxy.labels, &ports);
            let mut all: Vec<String> = merged
                .ports
                .iter()
                .flat_map(|p| p.servers.iter())
                .filter_map(|s| s.server().tls.as_ref())
                .filter(|t| !t.credential_name.is_empty())
                .flat_map(|t| {
                    let name = credential_resource(&t.credential_name);
                    [format!("{name}{CA_SUFFIX}"), name]
                })
                .collect();
            all.sort();
            all.dedup();
            all
        } else {
            names.to_vec()
        };
        wanted
            .iter()
            .filter_map(|name| secret(index, &req.proxy.namespace, name))
            .map(|s| resource(s.name.clone(), &s))
            .collect()
    }

    fn stats(&self) -> TypeStats {
        TypeStats::default()
    }
}
