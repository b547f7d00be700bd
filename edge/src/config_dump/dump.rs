//! A proxy's config in the layout of Envoy's admin `/config_dump`: one `*ConfigDump` per
//! type, the resources as the proxy acknowledged them.

use super::Held;
use super::json::resource_json;
use crate::xds::XdsResource;
use crate::xds::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET};
use serde_json::{Value, json};

const ADMIN: &str = "type.googleapis.com/envoy.admin.v3.";

/// Envoy's `/config_dump?include_eds` for what `held` says the proxy runs: clusters,
/// listeners, routes and secrets, then endpoints, as Envoy orders them. A resource that
/// cannot be written as JSON is shown with its `@type`, name and the reason.
pub fn config_dump(held: &[Held<'_>]) -> Value {
    let order = [CLUSTER, LISTENER, ROUTE, SECRET, ENDPOINT];
    let configs: Vec<Value> = order
        .iter()
        .filter_map(|t| held.iter().find(|h| h.type_url == *t))
        .map(type_dump)
        .collect();
    json!({ "configs": configs })
}

fn type_dump(h: &Held<'_>) -> Value {
    let version = h.version;
    let each = |wrap: &dyn Fn(&XdsResource, Value) -> Value| -> Vec<Value> {
        h.resources
            .iter()
            .map(|r| wrap(r, resource_or_reason(r)))
            .collect()
    };
    match h.type_url {
        CLUSTER => json!({
            "@type": format!("{ADMIN}ClustersConfigDump"),
            "version_info": version,
            "dynamic_active_clusters": each(&|_, c| json!({"version_info": version, "cluster": c})),
        }),
        LISTENER => json!({
            "@type": format!("{ADMIN}ListenersConfigDump"),
            "version_info": version,
            "dynamic_listeners": each(&|r, l| json!({
                "name": r.name,
                "active_state": {"version_info": version, "listener": l},
            })),
        }),
        ROUTE => json!({
            "@type": format!("{ADMIN}RoutesConfigDump"),
            "dynamic_route_configs": each(&|_, rc| json!({"version_info": version, "route_config": rc})),
        }),
        SECRET => json!({
            "@type": format!("{ADMIN}SecretsConfigDump"),
            "dynamic_active_secrets": each(&|r, s| json!({
                "name": r.name, "version_info": version, "secret": s,
            })),
        }),
        ENDPOINT => json!({
            "@type": format!("{ADMIN}EndpointsConfigDump"),
            "dynamic_endpoint_configs": each(&|_, e| json!({"version_info": version, "endpoint_config": e})),
        }),
        other => json!({ "@type": other, "version_info": version, "resources": each(&|_, v| v) }),
    }
}

/// The resource as JSON, or its type, name and why it could not be written.
pub(super) fn resource_or_reason(r: &XdsResource) -> Value {
    resource_json(&r.resource).unwrap_or_else(
        |e| json!({ "@type": r.resource.type_url, "name": r.name, "error": e.to_string() }),
    )
}
