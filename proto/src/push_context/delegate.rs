//! VirtualService delegation: a route with `delegate` is replaced by the routes of the
//! named VirtualService (one without hosts), each narrowed by the delegating route's
//! match and inheriting what it does not set itself, as Istio merges them
//! (`mergeVirtualServicesIfNeeded`). A delegate route whose match cannot be a subset of
//! the root's is dropped.

use crate::config::istio::{HttpMatchRequest, HttpRoute, StringMatch};
use std::collections::BTreeMap;

/// The routes that take `root`'s place, from the delegate's `routes`.
pub fn merge_delegate(root: &HttpRoute, routes: &[HttpRoute]) -> Vec<HttpRoute> {
    routes
        .iter()
        .filter_map(|child| merge_route(root, child))
        .collect()
}

fn merge_route(root: &HttpRoute, child: &HttpRoute) -> Option<HttpRoute> {
    let mut out = child.clone();
    out.matches = merge_matches(&root.matches, &child.matches)?;
    out.delegate = None;
    out.name = joined(&root.name, &child.name);
    macro_rules! inherit {
        ($($field:ident),*) => {$(
            if out.$field.is_none() {
                out.$field = root.$field.clone();
            }
        )*};
    }
    inherit!(
        rewrite,
        timeout,
        retries,
        fault,
        mirror,
        mirror_percent,
        mirror_percentage,
        cors_policy,
        headers
    );
    Some(out)
}

fn joined(root: &str, child: &str) -> String {
    match (root.is_empty(), child.is_empty()) {
        (_, true) => root.to_string(),
        (true, false) => child.to_string(),
        (false, false) => format!("{root}-{child}"),
    }
}

/// Every child match narrowed by every root match it fits in; `None` (the route is
/// dropped) when some child match fits in no root match.
fn merge_matches(
    root: &[HttpMatchRequest],
    child: &[HttpMatchRequest],
) -> Option<Vec<HttpMatchRequest>> {
    if root.is_empty() {
        return Some(child.to_vec());
    }
    if child.is_empty() {
        return Some(root.to_vec());
    }
    let mut out = Vec::new();
    for c in child {
        let before = out.len();
        out.extend(
            root.iter()
                .filter(|r| !conflicts(r, c))
                .map(|r| merge_match(r, c)),
        );
        if out.len() == before {
            return None;
        }
    }
    Some(out)
}

fn merge_match(root: &HttpMatchRequest, child: &HttpMatchRequest) -> HttpMatchRequest {
    let mut out = child.clone();
    out.name = joined(&root.name, &child.name);
    for (mine, theirs) in [
        (&mut out.uri, &root.uri),
        (&mut out.scheme, &root.scheme),
        (&mut out.method, &root.method),
        (&mut out.authority, &root.authority),
    ] {
        if mine.is_none() {
            mine.clone_from(theirs);
        }
    }
    let union = |root: &BTreeMap<String, StringMatch>, child: &BTreeMap<String, StringMatch>| {
        let mut all = root.clone();
        all.extend(child.iter().map(|(k, v)| (k.clone(), v.clone())));
        all
    };
    out.headers = union(&root.headers, &child.headers);
    out.without_headers = union(&root.without_headers, &child.without_headers);
    out.query_params = union(&root.query_params, &child.query_params);
    let mut labels = root.source_labels.clone();
    labels.extend(child.source_labels.clone());
    out.source_labels = labels;
    if out.port.is_none() {
        out.port = root.port;
    }
    if out.source_namespace.is_empty() {
        out.source_namespace.clone_from(&root.source_namespace);
    }
    if out.gateways.is_empty() {
        out.gateways.clone_from(&root.gateways);
    }
    out
}

/// Whether `child` asks for something `root` cannot include.
fn conflicts(root: &HttpMatchRequest, child: &HttpMatchRequest) -> bool {
    let strings = [
        (&root.uri, &child.uri),
        (&root.scheme, &child.scheme),
        (&root.method, &child.method),
        (&root.authority, &child.authority),
    ];
    if strings
        .iter()
        .any(|(r, c)| string_conflict(r.as_ref(), c.as_ref()))
    {
        return true;
    }
    let maps = [
        (&root.headers, &child.headers),
        (&root.without_headers, &child.without_headers),
        (&root.query_params, &child.query_params),
    ];
    if maps
        .iter()
        .any(|(r, c)| c.iter().any(|(k, v)| string_conflict(r.get(k), Some(v))))
    {
        return true;
    }
    root.ignore_uri_case != child.ignore_uri_case
        || matches!((root.port, child.port), (Some(a), Some(b)) if a != b)
        || (!root.source_namespace.is_empty() && child.source_namespace != root.source_namespace)
        || child
            .source_labels
            .iter()
            .any(|(k, v)| root.source_labels.get(k).is_some_and(|r| r != v))
        || (!root.gateways.is_empty()
            && !child.gateways.is_empty()
            && !child.gateways.iter().all(|g| root.gateways.contains(g)))
}

/// Whether a child string match cannot be a subset of the root's: regexes only combine
/// with nothing, an exact root only with the same exact, a prefix root only with
/// matches that extend it.
fn string_conflict(root: Option<&StringMatch>, child: Option<&StringMatch>) -> bool {
    let (Some(root), Some(child)) = (root, child) else {
        return false;
    };
    if root.regex.is_some() || child.regex.is_some() {
        return true;
    }
    if let Some(exact) = &root.exact {
        return child.exact.as_ref() != Some(exact);
    }
    if let Some(prefix) = &root.prefix {
        let narrower = child.prefix.as_ref().or(child.exact.as_ref());
        return !narrower.is_some_and(|c| c.starts_with(prefix.as_str()));
    }
    // A root "present" match: any value of the child fits.
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::istio::{Destination, HttpRouteDestination};

    fn prefix(p: &str) -> Option<StringMatch> {
        Some(StringMatch {
            prefix: Some(p.into()),
            ..Default::default()
        })
    }

    fn route(name: &str, uri: Option<StringMatch>, host: &str) -> HttpRoute {
        HttpRoute {
            name: name.into(),
            matches: uri
                .map(|u| {
                    vec![HttpMatchRequest {
                        uri: Some(u),
                        ..Default::default()
                    }]
                })
                .unwrap_or_default(),
            route: vec![HttpRouteDestination {
                destination: Destination {
                    host: host.into(),
                    ..Default::default()
                },
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn children_narrow_the_root_match_and_inherit_its_settings() {
        let mut root = route("reviews", prefix("/reviews"), "");
        root.route.clear();
        root.timeout = Some("3s".into());
        let children = [
            route("v2", prefix("/reviews/v2"), "reviews-v2"),
            route("all", None, "reviews"),
            // Outside the root's prefix: dropped.
            route("other", prefix("/ratings"), "ratings"),
        ];
        let merged = merge_delegate(&root, &children);
        let summary: Vec<_> = merged
            .iter()
            .map(|r| {
                (
                    r.name.as_str(),
                    r.matches[0].uri.as_ref().and_then(|u| u.prefix.as_deref()),
                    r.timeout.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("reviews-v2", Some("/reviews/v2"), Some("3s")),
                ("reviews-all", Some("/reviews"), Some("3s")),
            ]
        );
    }

    #[test]
    fn headers_merge_and_conflicting_values_drop_the_route() {
        let header = |v: &str| StringMatch {
            exact: Some(v.into()),
            ..Default::default()
        };
        let root = HttpMatchRequest {
            headers: [("user".to_string(), header("jason"))].into(),
            ..Default::default()
        };
        let child = HttpMatchRequest {
            headers: [("team".to_string(), header("a"))].into(),
            ..Default::default()
        };
        let merged = merge_matches(std::slice::from_ref(&root), &[child]).unwrap();
        assert_eq!(merged[0].headers.len(), 2);
        let other = HttpMatchRequest {
            headers: [("user".to_string(), header("kim"))].into(),
            ..Default::default()
        };
        assert_eq!(merge_matches(&[root], &[other]), None);
    }
}
