//! The change a run makes, through the real path: one service's file in the config
//! directory, rewritten atomically (temp file + rename) with a value no proxy has seen.

use crate::client::{Expect, Marker, Target};
use serde::Serialize;
use shoal_test_support::meshgen::{Mesh, SERVICE_PORT, ServiceInfo};
use std::path::{Path, PathBuf};

/// What to change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// A VirtualService's route timeout.
    Vs,
    /// One endpoint's address.
    Endpoint,
    /// `--changes` edits at `--rate` per second, endpoints and VirtualServices of other
    /// services mixed, then a VirtualService's route timeout: convergence is to that last
    /// one.
    Storm,
    /// Nothing: measure the initial sync only.
    #[default]
    None,
}

#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("the mesh has no service with a VirtualService (generate it with --vs-fraction > 0)")]
    NoVirtualService,
    #[error("the mesh has no services")]
    NoServices,
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A change ready to be written.
#[derive(Clone, Debug)]
pub struct Plan {
    pub kind: ChangeKind,
    /// `<namespace>/<name>`.
    pub service: String,
    pub path: PathBuf,
    pub contents: String,
    /// The new value, as written (`"12345s"`, `"10.250.3.7"`).
    pub value: String,
    pub target: Target,
    /// For a storm, the edits written before this one, in order: `(path, contents)`.
    pub before: Vec<(PathBuf, String)>,
}

/// The EDS cluster (and cluster) of a generated service's port.
pub fn cluster_name(s: &ServiceInfo) -> String {
    format!("outbound|{SERVICE_PORT}||{}", s.hostname)
}

/// Plans a change of `kind` to `mesh`, written under `dir`, using `entropy` to pick a
/// value that the file does not hold already.
pub fn plan(
    kind: ChangeKind,
    mesh: &Mesh,
    dir: &Path,
    entropy: u64,
) -> Result<Option<Plan>, ChangeError> {
    let (service, value, (rel, contents), target) = match kind {
        ChangeKind::None => return Ok(None),
        ChangeKind::Storm => {
            let Some(last) = plan(ChangeKind::Vs, mesh, dir, entropy)? else {
                return Ok(None);
            };
            return Ok(Some(Plan {
                kind,
                before: Vec::new(),
                ..last
            }));
        }
        ChangeKind::Vs => {
            let s = mesh.first_with_vs().ok_or(ChangeError::NoVirtualService)?;
            let current = current(dir, mesh, s);
            let mut secs = 10 + entropy % 86_000;
            while current.contains(&format!("timeout: {secs}s")) {
                secs += 1;
            }
            let value = format!("{secs}s");
            let target = Target {
                marker: Marker::RouteTimeout {
                    seconds: secs as i64,
                },
                expect: Expect::Cluster(cluster_name(s)),
            };
            (s, value.clone(), mesh.vs_change(s, &value), target)
        }
        ChangeKind::Endpoint => {
            // A service without a VirtualService (so the edit cannot undo a routing
            // change) and, if possible, without Pods (so only endpoints change).
            let s = mesh
                .services
                .iter()
                .find(|s| !s.has_vs && !s.has_dr)
                .or_else(|| mesh.services.iter().find(|s| !s.has_vs))
                .or_else(|| mesh.services.first())
                .ok_or(ChangeError::NoServices)?;
            let current = current(dir, mesh, s);
            let mut n = entropy % 65_000;
            let ip = loop {
                let ip = format!("10.250.{}.{}", (n >> 8) & 0xff, 1 + (n & 0xff) % 254);
                if !current.contains(&format!("[{ip}]")) {
                    break ip;
                }
                n += 1;
            };
            let target = Target {
                marker: Marker::Address(ip.clone()),
                expect: Expect::EdsName(cluster_name(s)),
            };
            (s, ip.clone(), mesh.endpoint_change(s, &ip), target)
        }
    };
    Ok(Some(Plan {
        kind,
        service: format!("{}/{}", service.namespace, service.name),
        path: dir.join(rel),
        contents,
        value,
        target,
        before: Vec::new(),
    }))
}

/// The `count` edits of a storm before its last one (`last`): endpoint moves and route
/// timeouts of every other service in turn (never `last`'s, whose file it rewrites),
/// each value fresh.
pub fn storm(
    mesh: &Mesh,
    dir: &Path,
    last: &Plan,
    count: usize,
    entropy: u64,
) -> Vec<(PathBuf, String)> {
    let others: Vec<&ServiceInfo> = mesh
        .services
        .iter()
        .filter(|s| format!("{}/{}", s.namespace, s.name) != last.service)
        .collect();
    if others.is_empty() {
        return Vec::new();
    }
    (0..count)
        .map(|i| {
            let s = others[i % others.len()];
            let n = entropy.wrapping_add(i as u64);
            let (rel, contents) = if s.has_vs && i % 2 == 1 {
                mesh.vs_change(s, &format!("{}s", 10 + n % 86_000))
            } else {
                let ip = format!("10.251.{}.{}", (n >> 8) & 0xff, 1 + (n & 0xff) % 254);
                mesh.endpoint_change(s, &ip)
            };
            (dir.join(rel), contents)
        })
        .collect()
}

/// The service's file as it is on disk now (as generated, if unreadable).
fn current(dir: &Path, mesh: &Mesh, s: &ServiceInfo) -> String {
    let (rel, generated) = mesh.vs_change(s, "5s");
    std::fs::read_to_string(dir.join(rel)).unwrap_or(generated)
}

/// Writes `contents` to `path` atomically: a hidden temp file beside it, then a rename.
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), ChangeError> {
    let err = |source| ChangeError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.loadtest.tmp"));
    std::fs::write(&tmp, contents).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_test_support::meshgen::MeshSpec;

    fn mesh() -> Mesh {
        Mesh::generate(&MeshSpec {
            services: 20,
            endpoints_per_service: 2,
            namespaces: 2,
            ..MeshSpec::default()
        })
    }

    #[test]
    fn vs_change_picks_a_fresh_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let mesh = mesh();
        mesh.write(dir.path()).unwrap();
        let p = plan(ChangeKind::Vs, &mesh, dir.path(), 0).unwrap().unwrap();
        assert_eq!(p.value, "10s");
        assert!(p.contents.contains("timeout: 10s"));
        write_atomically(&p.path, &p.contents).unwrap();
        // The same entropy again: the file already says 10s, so 11s.
        let q = plan(ChangeKind::Vs, &mesh, dir.path(), 0).unwrap().unwrap();
        assert_eq!(q.value, "11s");
        assert_eq!(q.target.marker, Marker::RouteTimeout { seconds: 11 });
        let s = mesh.first_with_vs().unwrap();
        assert_eq!(
            q.target.expect,
            Expect::Cluster(format!("outbound|8080||{}", s.hostname))
        );
        let names: Vec<_> = std::fs::read_dir(p.path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn a_storm_edits_other_services_then_the_measured_one() {
        let dir = tempfile::tempdir().unwrap();
        let mesh = mesh();
        mesh.write(dir.path()).unwrap();
        let last = plan(ChangeKind::Storm, &mesh, dir.path(), 3)
            .unwrap()
            .unwrap();
        assert_eq!(last.kind, ChangeKind::Storm);
        let before = storm(&mesh, dir.path(), &last, 25, 3);
        assert_eq!(before.len(), 25);
        assert!(before.iter().all(|(path, _)| *path != last.path));
        let files: std::collections::BTreeSet<_> = before.iter().map(|(p, _)| p).collect();
        assert_eq!(files.len(), 19, "every other service in turn");
    }

    #[test]
    fn endpoint_change_avoids_routing_and_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let mesh = mesh();
        mesh.write(dir.path()).unwrap();
        let p = plan(ChangeKind::Endpoint, &mesh, dir.path(), 5)
            .unwrap()
            .unwrap();
        let s = mesh
            .services
            .iter()
            .find(|s| format!("{}/{}", s.namespace, s.name) == p.service)
            .unwrap();
        assert!(!s.has_vs);
        assert!(p.contents.contains(&format!("[{}]", p.value)));
        write_atomically(&p.path, &p.contents).unwrap();
        let q = plan(ChangeKind::Endpoint, &mesh, dir.path(), 5)
            .unwrap()
            .unwrap();
        assert_ne!(p.value, q.value);
        assert!(
            plan(ChangeKind::None, &mesh, dir.path(), 5)
                .unwrap()
                .is_none()
        );
    }
}
