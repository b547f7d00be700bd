//! SDS for routers: the certificates and CAs their TLS servers name, from Secrets in the
//! router's namespace. Not cached: a router asks for a few secrets, and only on change.
//! Every secret passes `security::authz::authorize` first: the one place that decides
//! whether a stream's identity may hold a gateway's key.

use super::super::super::XdsResource;
use super::super::super::cache::TypeStats;
use super::super::super::gateway::credential_resource;
use super::super::super::gateway::secrets::{CA_SUFFIX, secret};
use super::super::super::util::resource;
use super::super::table::{Request, ResourceGenerator};
use super::super::warnings::Warnings;
use shoal_proto::push_context::gateway::MergedGateway;
use shoal_proto::security::authz::{Decision, NoGrants, Requested, authorize};
use shoal_proto::xds::types::SECRET;
use std::sync::Arc;

#[derive(Default)]
pub(super) struct RouterSecrets {
    /// Refusals, logged once each.
    denied: Warnings,
}

impl RouterSecrets {
    /// Whether the router may be sent secret `name` of its namespace; a refusal is
    /// logged with its reason.
    fn allowed(&self, req: &Request<'_>, name: &str) -> bool {
        let proxy = req.proxy;
        let requested = Requested {
            type_url: SECRET,
            name,
            namespace: &proxy.namespace,
        };
        // No RBAC reaches the edge yet: no service account is granted other namespaces'
        // Secrets.
        match authorize(&proxy.identity, &proxy.namespace, &requested, &NoGrants) {
            Decision::Allow | Decision::AllowUnauthenticated => true,
            Decision::Deny { reason } => {
                self.denied.warn_once(&[format!(
                    "secret {name} not sent to {} ({}): {reason}",
                    proxy.id, proxy.identity
                )]);
                false
            }
        }
    }
}

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
            .filter(|name| self.allowed(req, name))
            .filter_map(|name| secret(index, &req.proxy.namespace, name))
            .map(|s| resource(s.name.clone(), &s))
            .collect()
    }

    fn stats(&self) -> TypeStats {
        TypeStats::default()
    }
}
