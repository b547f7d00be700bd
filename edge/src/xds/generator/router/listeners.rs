//! LDS for routers.

use super::super::super::XdsResource;
use super::super::super::gateway::listeners::{self, RouterContext};
use super::super::super::security::jwt;
use super::super::super::util::resource;
use super::super::table::Request;
use shoal_proto::push_context::gateway::MergedGateway;
use std::sync::Arc;

pub(super) fn build(
    req: &Request<'_>,
    merged: &MergedGateway,
) -> (Vec<Arc<XdsResource>>, Vec<String>) {
    let index = req.push.index();
    let authn = index
        .security
        .request_authentication(&req.proxy.namespace, &req.proxy.labels);
    let ctx = RouterContext {
        index,
        scope: req.scope,
        namespace: &req.proxy.namespace,
        authorization: index
            .security
            .authorization(&req.proxy.namespace, &req.proxy.labels),
        request_authn: jwt::http_filter(&authn, req.jwks),
    };
    let (built, warnings) = listeners::build(&ctx, merged);
    (
        built.iter().map(|l| resource(l.name.clone(), l)).collect(),
        warnings,
    )
}
