//! RDS for routers.

use super::super::super::XdsResource;
use super::super::super::gateway::routes::{self, RouteContext};
use super::super::super::util::resource;
use super::super::table::Request;
use shoal_proto::push_context::gateway::MergedGateway;
use std::sync::Arc;

pub(super) fn build(
    req: &Request<'_>,
    merged: &MergedGateway,
) -> (Vec<Arc<XdsResource>>, Vec<String>) {
    let ctx = RouteContext {
        index: req.push.index(),
        scope: req.scope,
        namespace: &req.proxy.namespace,
        labels: &req.proxy.labels,
    };
    let (built, warnings) = routes::build(&ctx, merged);
    (
        built.iter().map(|r| resource(r.name.clone(), r)).collect(),
        warnings,
    )
}
