//! Synthetic meshes for load tests and benchmarks, as the YAML a user would write:
//! Services, EndpointSlices (with Pods where a DestinationRule selects by label),
//! VirtualServices, DestinationRules and namespace Sidecars that narrow egress.
//!
//! Deterministic for a seed. One file per service (`ns-<k>/svc-<i>.yaml`) so a change
//! rewrites one small file, and one `ns-<k>/sidecar.yaml` per narrowed namespace.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct MeshSpec {
    pub services: usize,
    pub endpoints_per_service: usize,
    pub namespaces: usize,
    /// Fraction of services with a VirtualService.
    pub vs_fraction: f64,
    /// Fraction of services with a DestinationRule (subsets v1/v2 by label).
    pub dr_fraction: f64,
    /// Fraction of namespaces with a Sidecar narrowing egress to `./*` and `istio-system/*`.
    pub sidecar_fraction: f64,
    pub seed: u64,
}

impl Default for MeshSpec {
    fn default() -> Self {
        Self {
            services: 100,
            endpoints_per_service: 10,
            namespaces: 10,
            vs_fraction: 0.5,
            dr_fraction: 0.5,
            sidecar_fraction: 1.0,
            seed: 1,
        }
    }
}

/// The service port every generated service exposes (HTTP).
pub const SERVICE_PORT: u32 = 8080;
/// The port endpoints listen on.
pub const TARGET_PORT: u32 = 9080;
/// The route timeout of every generated VirtualService (until a `vs_change`).
pub const ROUTE_TIMEOUT: &str = "5s";

/// One generated service and what was generated for it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceInfo {
    pub index: usize,
    pub name: String,
    pub namespace: String,
    pub hostname: String,
    pub has_vs: bool,
    pub has_dr: bool,
}

/// A generated mesh: files relative to the output directory.
#[derive(Clone, Debug)]
pub struct Mesh {
    pub spec: MeshSpec,
    pub services: Vec<ServiceInfo>,
    /// Namespaces with a Sidecar narrowing egress, in order.
    pub sidecars: Vec<String>,
    pub files: Vec<(PathBuf, String)>,
}

/// xorshift64*: tiny, deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn chance(&mut self, p: f64) -> bool {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }
}

pub fn namespace_name(k: usize) -> String {
    format!("ns-{k}")
}

/// The `version` label of endpoint `e`'s Pod (services with a DestinationRule): endpoints
/// alternate between subsets `v1` and `v2`.
pub fn endpoint_version(e: usize) -> &'static str {
    if e.is_multiple_of(2) { "v1" } else { "v2" }
}

/// The address of endpoint `e` of service `i`: unique across the mesh.
pub fn endpoint_ip(i: usize, e: usize) -> String {
    let n = i * 1000 + e;
    format!(
        "10.{}.{}.{}",
        1 + (n >> 16) % 200,
        (n >> 8) & 0xff,
        n & 0xff
    )
}

impl Mesh {
    pub fn generate(spec: &MeshSpec) -> Mesh {
        let mut rng = Rng::new(spec.seed);
        let namespaces = spec.namespaces.max(1);
        let mut services = Vec::with_capacity(spec.services);
        let mut files = Vec::with_capacity(spec.services + namespaces);
        let mut sidecars = Vec::new();
        for k in 0..namespaces {
            if rng.chance(spec.sidecar_fraction) {
                files.push((
                    PathBuf::from(namespace_name(k)).join("sidecar.yaml"),
                    sidecar(&namespace_name(k)),
                ));
                sidecars.push(namespace_name(k));
            }
        }
        for i in 0..spec.services {
            let ns = namespace_name(i % namespaces);
            let info = ServiceInfo {
                index: i,
                name: format!("svc-{i}"),
                hostname: format!("svc-{i}.{ns}.svc.cluster.local"),
                namespace: ns,
                has_vs: rng.chance(spec.vs_fraction),
                has_dr: rng.chance(spec.dr_fraction),
            };
            let text = service_file(&info, spec.endpoints_per_service, None, ROUTE_TIMEOUT);
            files.push((service_path(&info), text));
            services.push(info);
        }
        Mesh {
            spec: spec.clone(),
            services,
            sidecars,
            files,
        }
    }

    /// Writes every file under `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        for (path, text) in &self.files {
            let path = dir.join(path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)?;
        }
        Ok(())
    }

    /// The first service with a VirtualService.
    pub fn first_with_vs(&self) -> Option<&ServiceInfo> {
        self.services.iter().find(|s| s.has_vs)
    }

    /// A VirtualService edit: the service's file with the route timeout set to
    /// `timeout` (e.g. `"7.123s"`), so a client can tell the new route from the old.
    pub fn vs_change(&self, service: &ServiceInfo, timeout: &str) -> (PathBuf, String) {
        let text = service_file(service, self.spec.endpoints_per_service, None, timeout);
        (service_path(service), text)
    }

    /// An endpoint edit: the service's file with its first endpoint moved to `address`.
    pub fn endpoint_change(&self, service: &ServiceInfo, address: &str) -> (PathBuf, String) {
        let text = service_file(
            service,
            self.spec.endpoints_per_service,
            Some(address),
            ROUTE_TIMEOUT,
        );
        (service_path(service), text)
    }
}

fn service_path(s: &ServiceInfo) -> PathBuf {
    PathBuf::from(&s.namespace).join(format!("{}.yaml", s.name))
}

fn sidecar(ns: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata:\n  name: default\n  namespace: {ns}\nspec:\n  egress:\n  - hosts:\n    - ./*\n    - istio-system/*\n"
    )
}

/// One service's objects. Endpoints carry Pods (and so labels) when a DestinationRule
/// selects subsets by label; otherwise the slice stands alone, as for most services.
fn service_file(
    s: &ServiceInfo,
    endpoints: usize,
    first_address: Option<&str>,
    timeout: &str,
) -> String {
    let (name, ns) = (&s.name, &s.namespace);
    let mut out = String::new();
    let _ = write!(
        out,
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  selector:\n    app: {name}\n  ports:\n  - name: http\n    port: {SERVICE_PORT}\n    targetPort: {TARGET_PORT}\n"
    );
    let _ = write!(
        out,
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-1\n  namespace: {ns}\n  labels:\n    kubernetes.io/service-name: {name}\naddressType: IPv4\nports:\n- name: http\n  port: {TARGET_PORT}\nendpoints:\n"
    );
    for e in 0..endpoints {
        let ip = match (e, first_address) {
            (0, Some(a)) => a.to_string(),
            _ => endpoint_ip(s.index, e),
        };
        let _ = write!(out, "- addresses: [{ip}]\n  conditions: {{ready: true}}\n");
        if s.has_dr {
            let _ = writeln!(
                out,
                "  targetRef: {{kind: Pod, name: {name}-{e}, namespace: {ns}}}"
            );
        }
    }
    if s.has_dr {
        for e in 0..endpoints {
            let version = endpoint_version(e);
            let ip = match (e, first_address) {
                (0, Some(a)) => a.to_string(),
                _ => endpoint_ip(s.index, e),
            };
            let _ = write!(
                out,
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-{e}\n  namespace: {ns}\n  labels: {{app: {name}, version: {version}}}\nstatus:\n  podIP: {ip}\n"
            );
        }
        let _ = write!(
            out,
            "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  host: {name}\n  trafficPolicy:\n    connectionPool:\n      http:\n        http1MaxPendingRequests: 1024\n  subsets:\n  - name: v1\n    labels: {{version: v1}}\n  - name: v2\n    labels: {{version: v2}}\n"
        );
    }
    if s.has_vs {
        let route = if s.has_dr {
            format!(
                "    - destination: {{host: {name}, subset: v1}}\n      weight: 90\n    - destination: {{host: {name}, subset: v2}}\n      weight: 10\n"
            )
        } else {
            format!("    - destination: {{host: {name}}}\n")
        };
        let _ = write!(
            out,
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  hosts: [{name}]\n  http:\n  - route:\n{route}    timeout: {timeout}\n"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_for_a_seed() {
        let spec = MeshSpec::default();
        let (a, b) = (Mesh::generate(&spec), Mesh::generate(&spec));
        assert_eq!(a.files, b.files);
        let other = Mesh::generate(&MeshSpec { seed: 2, ..spec });
        assert_ne!(a.services, other.services);
    }

    #[test]
    fn fractions_and_layout() {
        let mesh = Mesh::generate(&MeshSpec {
            services: 1000,
            namespaces: 10,
            vs_fraction: 0.3,
            dr_fraction: 0.0,
            sidecar_fraction: 1.0,
            ..MeshSpec::default()
        });
        let with_vs = mesh.services.iter().filter(|s| s.has_vs).count();
        assert!((200..400).contains(&with_vs), "{with_vs}");
        assert_eq!(mesh.files.len(), 1000 + 10);
        assert!(
            mesh.files
                .iter()
                .any(|(p, _)| p == Path::new("ns-3/svc-13.yaml"))
        );
    }

    #[test]
    fn endpoint_addresses_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..10_000 {
            for e in 0..10 {
                assert!(seen.insert(endpoint_ip(i, e)));
            }
        }
    }
}
