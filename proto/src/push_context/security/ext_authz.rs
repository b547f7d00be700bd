//! The mesh config's ext_authz providers, checked as Istio checks them and resolved to
//! the cluster that reaches each (`outbound|<port>||<host>`), once per index generation.
//!
//! A provider with an error is kept with its reason: an AuthorizationPolicy with
//! `action: CUSTOM` naming it then fails closed (its rules deny), as in Istio, and the
//! reason is what `shoal analyze` and the edge's log give.

use crate::config::extension_provider::{ExtAuthzGrpc, ExtAuthzHttp, RequestBody};
use crate::config::mesh::MeshConfig;
use crate::config::validate::parse_duration;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Istio's timeout of a check when the provider sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// A usable ext_authz provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtAuthzProvider {
    pub name: String,
    /// The service's hostname (the HTTP check's authority).
    pub hostname: String,
    /// `outbound|<port>||<hostname>`.
    pub cluster: String,
    pub timeout: Duration,
    pub fail_open: bool,
    pub status_on_error: Option<u32>,
    pub body: Option<RequestBody>,
    pub api: ExtAuthzApi,
}

/// How the provider is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExtAuthzApi {
    Http(HttpCheck),
    Grpc,
}

/// The HTTP provider's request and response shaping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpCheck {
    pub path_prefix: String,
    /// Request headers sent to the authorizer (`includeRequestHeadersInCheck`).
    pub request_headers: Vec<String>,
    pub additional_headers: BTreeMap<String, String>,
    pub upstream_on_allow: Vec<String>,
    pub downstream_on_deny: Vec<String>,
    pub downstream_on_allow: Vec<String>,
}

/// Every provider of the mesh config by name: usable, or why not.
pub type ExtAuthzProviders = BTreeMap<String, Result<Arc<ExtAuthzProvider>, String>>;

/// Where a provider's `service` is: the hostnames of the registry's services by
/// namespace, to resolve `<host>` or `<namespace>/<host>`.
pub trait ServiceLookup {
    /// The namespaces that have a service `hostname`.
    fn namespaces_of(&self, hostname: &str) -> Vec<String>;
}

/// Resolves the mesh config's ext_authz providers (others kinds are not Shoal's).
pub fn resolve(mesh: &MeshConfig, services: &dyn ServiceLookup) -> ExtAuthzProviders {
    let mut out = ExtAuthzProviders::new();
    for (i, p) in mesh.extension_providers.iter().enumerate() {
        let built = match (&p.envoy_ext_authz_http, &p.envoy_ext_authz_grpc) {
            (Some(http), _) => http_provider(&p.name, http, services),
            (None, Some(grpc)) => grpc_provider(&p.name, grpc, services),
            (None, None) => continue,
        };
        let built = check_name(&p.name, i).and_then(|()| {
            if out.contains_key(&p.name) {
                Err(format!(
                    "extension provider name {:?} is not unique",
                    p.name
                ))
            } else {
                built
            }
        });
        let err = |e: String| format!("extensionProviders[{i}] ({:?}): {e}", p.name);
        out.entry(p.name.clone())
            .or_insert(built.map(Arc::new).map_err(err));
    }
    out
}

fn check_name(name: &str, i: usize) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!(
            "extensionProviders[{i}]: the name must not be empty"
        ));
    }
    Ok(())
}

struct Common<'a> {
    service: &'a str,
    port: u32,
    timeout: &'a Option<String>,
    status_on_error: &'a str,
}

/// `(hostname, cluster, timeout, status_on_error)` of a provider, or its errors.
fn common(c: Common<'_>, services: &dyn ServiceLookup) -> Result<Resolved, String> {
    let mut errs = Vec::new();
    if c.port == 0 || c.port > 65535 {
        errs.push(format!("port must be in [1, 65535], found {}", c.port));
    }
    let hostname = lookup(c.service, services).map_err(|e| errs.push(e)).ok();
    let timeout = match c.timeout.as_deref() {
        None => Some(DEFAULT_TIMEOUT),
        Some(t) => parse_duration(t)
            .map_err(|e| errs.push(format!("timeout: {}", e.0)))
            .ok(),
    };
    let status = match c.status_on_error {
        "" => Some(None),
        s => match s.parse::<u32>() {
            Ok(code) if (100..=599).contains(&code) => Some(Some(code)),
            _ => {
                errs.push(format!(
                    "statusOnError {s:?}: not an HTTP status code (100-599)"
                ));
                None
            }
        },
    };
    match (hostname, timeout, status) {
        (Some(hostname), Some(timeout), Some(status_on_error)) if errs.is_empty() => Ok(Resolved {
            cluster: format!("outbound|{}||{hostname}", c.port),
            hostname,
            timeout,
            status_on_error,
        }),
        _ => Err(errs.join("; ")),
    }
}

struct Resolved {
    hostname: String,
    cluster: String,
    timeout: Duration,
    status_on_error: Option<u32>,
}

impl Resolved {
    fn provider(
        self,
        name: &str,
        fail_open: bool,
        body: &Option<RequestBody>,
        api: ExtAuthzApi,
    ) -> ExtAuthzProvider {
        ExtAuthzProvider {
            name: name.to_string(),
            hostname: self.hostname,
            cluster: self.cluster,
            timeout: self.timeout,
            fail_open,
            status_on_error: self.status_on_error,
            body: body.clone(),
            api,
        }
    }
}

/// Istio's `LookupCluster`: `<namespace>/<host>`, or a `<host>` that exactly one
/// namespace has.
fn lookup(service: &str, services: &dyn ServiceLookup) -> Result<String, String> {
    if service.is_empty() {
        return Err("service must not be empty".into());
    }
    if let Some((ns, host)) = service.split_once('/') {
        if services.namespaces_of(host).iter().any(|n| n == ns) {
            return Ok(host.to_string());
        }
    } else {
        let namespaces = services.namespaces_of(service);
        match namespaces.len() {
            1 => return Ok(service.to_string()),
            0 => {}
            _ => {
                return Err(format!(
                    "service {service} is in several namespaces ({}): name it as <namespace>/<host>",
                    namespaces.join(", ")
                ));
            }
        }
    }
    Err(format!("service {service} is not in the service registry"))
}

fn http_provider(
    name: &str,
    p: &ExtAuthzHttp,
    services: &dyn ServiceLookup,
) -> Result<ExtAuthzProvider, String> {
    let mut errs = Vec::new();
    let resolved = common(
        Common {
            service: &p.service,
            port: p.port,
            timeout: &p.timeout,
            status_on_error: &p.status_on_error,
        },
        services,
    )
    .map_err(|e| errs.push(e))
    .ok();
    if !p.path_prefix.is_empty() && !p.path_prefix.starts_with('/') {
        errs.push(format!(
            "pathPrefix must begin with '/', found {:?}",
            p.path_prefix
        ));
    }
    let request_headers = if p.include_request_headers_in_check.is_empty() {
        &p.include_headers_in_check
    } else {
        &p.include_request_headers_in_check
    };
    for (field, list) in [
        ("includeRequestHeadersInCheck", request_headers),
        ("headersToUpstreamOnAllow", &p.headers_to_upstream_on_allow),
        (
            "headersToDownstreamOnDeny",
            &p.headers_to_downstream_on_deny,
        ),
        (
            "headersToDownstreamOnAllow",
            &p.headers_to_downstream_on_allow,
        ),
    ] {
        if list.iter().any(|h| h == "*") {
            errs.push(format!(
                "{field}: a single wildcard \"*\" is not supported, use a prefix or suffix"
            ));
        }
    }
    match resolved {
        Some(r) if errs.is_empty() => Ok(r.provider(
            name,
            p.fail_open,
            &p.include_request_body_in_check,
            ExtAuthzApi::Http(HttpCheck {
                path_prefix: p.path_prefix.clone(),
                request_headers: request_headers.clone(),
                additional_headers: p.include_additional_headers_in_check.clone(),
                upstream_on_allow: p.headers_to_upstream_on_allow.clone(),
                downstream_on_deny: p.headers_to_downstream_on_deny.clone(),
                downstream_on_allow: p.headers_to_downstream_on_allow.clone(),
            }),
        )),
        _ => Err(errs.join("; ")),
    }
}

fn grpc_provider(
    name: &str,
    p: &ExtAuthzGrpc,
    services: &dyn ServiceLookup,
) -> Result<ExtAuthzProvider, String> {
    let r = common(
        Common {
            service: &p.service,
            port: p.port,
            timeout: &p.timeout,
            status_on_error: &p.status_on_error,
        },
        services,
    )?;
    Ok(r.provider(
        name,
        p.fail_open,
        &p.include_request_body_in_check,
        ExtAuthzApi::Grpc,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::extension_provider::ExtensionProvider;

    struct Registry(Vec<(&'static str, &'static str)>);

    impl ServiceLookup for Registry {
        fn namespaces_of(&self, hostname: &str) -> Vec<String> {
            let mut out: Vec<String> = (self.0.iter())
                .filter(|(_, h)| *h == hostname)
                .map(|(ns, _)| ns.to_string())
                .collect();
            out.sort();
            out
        }
    }

    fn mesh(providers: Vec<ExtensionProvider>) -> MeshConfig {
        MeshConfig {
            extension_providers: providers,
            ..Default::default()
        }
    }

    fn http(name: &str, service: &str, port: u32) -> ExtensionProvider {
        ExtensionProvider {
            name: name.into(),
            envoy_ext_authz_http: Some(ExtAuthzHttp {
                service: service.into(),
                port,
                ..Default::default()
            }),
            envoy_ext_authz_grpc: None,
        }
    }

    const AUTHZ: &str = "ext-authz.foo.svc.cluster.local";

    #[test]
    fn a_provider_resolves_to_its_cluster_and_istios_defaults() {
        let reg = Registry(vec![("foo", AUTHZ)]);
        let out = resolve(&mesh(vec![http("authz", AUTHZ, 8000)]), &reg);
        let p = out["authz"].as_ref().unwrap();
        assert_eq!(p.cluster, "outbound|8000||ext-authz.foo.svc.cluster.local");
        assert_eq!(p.hostname, AUTHZ);
        assert_eq!(p.timeout, DEFAULT_TIMEOUT);
        assert!(!p.fail_open);
        let qualified = resolve(&mesh(vec![http("a", &format!("foo/{AUTHZ}"), 1)]), &reg);
        assert!(qualified["a"].is_ok());
    }

    #[test]
    fn a_broken_provider_is_kept_with_every_reason() {
        let reg = Registry(vec![("foo", AUTHZ), ("bar", AUTHZ)]);
        let mut bad = http("bad", "missing.svc", 0);
        let h = bad.envoy_ext_authz_http.as_mut().unwrap();
        h.timeout = Some("soon".into());
        h.status_on_error = "42".into();
        h.path_prefix = "check".into();
        h.headers_to_upstream_on_allow = vec!["*".into()];
        let out = resolve(
            &mesh(vec![bad, http("twice", AUTHZ, 80), http("", AUTHZ, 80)]),
            &reg,
        );
        let why = out["bad"].as_ref().unwrap_err();
        for reason in [
            "extensionProviders[0] (\"bad\")",
            "port must be in [1, 65535]",
            "missing.svc is not in the service registry",
            "timeout",
            "statusOnError \"42\"",
            "pathPrefix must begin with '/'",
            "headersToUpstreamOnAllow",
        ] {
            assert!(why.contains(reason), "{reason:?} in {why}");
        }
        let twice = out["twice"].as_ref().unwrap_err();
        assert!(twice.contains("several namespaces (bar, foo)"), "{twice}");
        assert!(out[""].as_ref().unwrap_err().contains("must not be empty"));
    }

    #[test]
    fn a_duplicate_name_keeps_the_first_and_other_kinds_are_ignored() {
        let reg = Registry(vec![("foo", AUTHZ)]);
        let zipkin = ExtensionProvider {
            name: "zipkin".into(),
            ..Default::default()
        };
        let out = resolve(
            &mesh(vec![http("a", AUTHZ, 1), http("a", "nope", 2), zipkin]),
            &reg,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(
            out["a"].as_ref().unwrap().cluster,
            format!("outbound|1||{AUTHZ}")
        );
    }

    #[test]
    fn mesh_config_yaml_reads_istios_form() {
        let yaml = r#"
extensionProviders:
- name: ext-authz-http
  envoyExtAuthzHttp:
    service: ext-authz.foo.svc.cluster.local
    port: "8000"
    includeRequestHeadersInCheck: ["x-ext-authz"]
    headersToUpstreamOnAllow: ["x-ext-authz-check-result"]
    timeout: 0.5s
- name: ext-authz-grpc
  envoyExtAuthzGrpc: {service: ext-authz.foo.svc.cluster.local, port: 9000, failOpen: true}
- name: otel
  opentelemetry: {service: otel.svc, port: 4317}
"#;
        let mesh: MeshConfig = serde_norway::from_str(yaml).unwrap();
        let out = resolve(&mesh, &Registry(vec![("foo", AUTHZ)]));
        let http = out["ext-authz-http"].as_ref().unwrap();
        assert_eq!(http.timeout, Duration::from_millis(500));
        let ExtAuthzApi::Http(check) = &http.api else {
            panic!("http")
        };
        assert_eq!(check.request_headers, ["x-ext-authz"]);
        let grpc = out["ext-authz-grpc"].as_ref().unwrap();
        assert!(grpc.fail_open && grpc.api == ExtAuthzApi::Grpc);
        assert_eq!(out.len(), 2);
    }
}
