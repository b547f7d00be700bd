//! Where a VirtualService sends traffic must exist (IST0101): each route, mirror and
//! delegate's host among the Services and ServiceEntries its namespace sees, the port
//! among that service's ports, and the subset in a DestinationRule for that host.

use super::Message;
use super::codes::REFERENCED_RESOURCE_NOT_FOUND;
use super::hosts::seen_from;
use super::inventory::Inventory;
use crate::config::istio::{Destination, VirtualService};
use crate::config::parse::Parsed;
use crate::model::{host_matches, resolve_short_name};

/// A destination and what refers to it (`host` for routes, `mirror host` for mirrors,
/// as Istio names them).
struct Reference<'a> {
    destination: &'a Destination,
    what: &'static str,
}

fn references(vs: &VirtualService) -> Vec<Reference<'_>> {
    let mut out = Vec::new();
    let route = |destination| Reference {
        destination,
        what: "host",
    };
    let mirror = |destination| Reference {
        destination,
        what: "mirror host",
    };
    for http in &vs.http {
        out.extend(http.route.iter().map(|r| route(&r.destination)));
        out.extend(http.mirror.iter().map(mirror));
        out.extend(http.mirrors.iter().map(|m| mirror(&m.destination)));
    }
    for tcp in &vs.tcp {
        out.extend(tcp.route.iter().map(|r| route(&r.destination)));
    }
    for tls in &vs.tls {
        out.extend(tls.route.iter().map(|r| route(&r.destination)));
    }
    out
}

pub(super) fn analyze(inventory: &Inventory, out: &mut Vec<Message>) {
    for (parsed, vs) in inventory.virtual_services() {
        let namespace = &parsed.config.meta.namespace;
        let from = seen_from(namespace, &vs.export_to);
        for reference in references(vs) {
            let d = reference.destination;
            let host = resolve_short_name(&d.host, namespace);
            let Some(service) = inventory.hosts.find(&host, from.as_deref()) else {
                out.push(not_found(parsed, reference.what, &host));
                continue;
            };
            if let Some(port) = &d.port
                && !service.ports.is_empty()
                && !service.ports.contains(&port.number)
            {
                let what = format!("{}:port", reference.what);
                out.push(not_found(parsed, &what, &format!("{host}:{}", port.number)));
            }
            if !d.subset.is_empty() && !subset_defined(inventory, &host, &d.subset) {
                let what = match reference.what {
                    "host" => "host+subset in destinationrule",
                    _ => "mirror+subset in destinationrule",
                };
                out.push(not_found(parsed, what, &format!("{host}+{}", d.subset)));
            }
        }
        for http in &vs.http {
            let Some(delegate) = &http.delegate else {
                continue;
            };
            let delegate_ns = match delegate.namespace.as_str() {
                "" => namespace.as_str(),
                ns => ns,
            };
            let exists = inventory.virtual_services().any(|(p, _)| {
                p.config.meta.namespace == delegate_ns && p.config.meta.name == delegate.name
            });
            if !exists {
                let name = format!("{delegate_ns}/{}", delegate.name);
                out.push(not_found(parsed, "delegate VirtualService", &name));
            }
        }
    }
}

/// Whether a DestinationRule for `host` (exact, or a wildcard covering it) defines `subset`.
fn subset_defined(inventory: &Inventory, host: &str, subset: &str) -> bool {
    inventory.destination_rules().any(|(p, dr)| {
        host_matches(
            &resolve_short_name(&dr.host, &p.config.meta.namespace),
            host,
        ) && dr.subsets.iter().any(|s| s.name == subset)
    })
}

fn not_found(parsed: &Parsed, what: &str, value: &str) -> Message {
    Message::about(
        REFERENCED_RESOURCE_NOT_FOUND,
        parsed,
        format!("Referenced {what} not found: {value:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::codes::REFERENCED_RESOURCE_NOT_FOUND;
    use super::super::testing::findings_with;

    const SERVICES: &str = "apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: shop}
spec:
  selector: {app: reviews}
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata:
  name: private
  namespace: other
  annotations: {networking.istio.io/exportTo: .}
spec:
  ports: [{name: http, port: 80}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: other}
spec:
  hosts: ['*.example.com']
  ports: [{number: 443, name: tls, protocol: TLS}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: shop}
spec:
  host: reviews.shop.svc.cluster.local
  subsets: [{name: v1, labels: {version: v1}}]
";

    fn check(vs_spec: &str) -> Vec<String> {
        let yaml = format!(
            "{SERVICES}---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: vs, namespace: shop}}\nspec:\n{vs_spec}"
        );
        findings_with(REFERENCED_RESOURCE_NOT_FOUND, &yaml)
    }

    #[test]
    fn routes_to_known_hosts_ports_and_subsets_pass() {
        let spec = "  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews, subset: v1, port: {number: 9080}}
    mirror: {host: api.example.com}
  tcp:
  - route:
    - destination: {host: reviews.shop.svc.cluster.local}
";
        assert_eq!(check(spec), Vec::<String>::new());
    }

    #[test]
    fn unknown_hosts_ports_subsets_and_delegates_are_reported() {
        let spec = "  hosts: [reviews]
  http:
  - match: [{uri: {prefix: /d}}]
    delegate: {name: missing}
  - match: [{uri: {prefix: /a}}]
    route:
    - destination: {host: ratings}
  - match: [{uri: {prefix: /b}}]
    route:
    - destination: {host: reviews, subset: v2}
  - match: [{uri: {prefix: /c}}]
    route:
    - destination: {host: reviews, port: {number: 80}}
  - route:
    - destination: {host: private.other.svc.cluster.local}
    mirrors:
    - destination: {host: nowhere.example.org}
";
        assert_eq!(
            check(spec),
            [
                "IST0101 Error VirtualService shop/vs: Referenced delegate VirtualService not found: \"shop/missing\"",
                "IST0101 Error VirtualService shop/vs: Referenced host not found: \"private.other.svc.cluster.local\"",
                "IST0101 Error VirtualService shop/vs: Referenced host not found: \"ratings.shop.svc.cluster.local\"",
                "IST0101 Error VirtualService shop/vs: Referenced host+subset in destinationrule not found: \"reviews.shop.svc.cluster.local+v2\"",
                "IST0101 Error VirtualService shop/vs: Referenced host:port not found: \"reviews.shop.svc.cluster.local:80\"",
                "IST0101 Error VirtualService shop/vs: Referenced mirror host not found: \"nowhere.example.org\"",
            ]
        );
    }
}
