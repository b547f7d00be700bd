//! `loadtest mesh`: writes a synthetic mesh (`shoal_test_support::meshgen`) and, beside
//! it, the spec it came from (`.loadtest-mesh.json`, hidden so ingest ignores it), which
//! `loadtest run` reads back to regenerate the same files and edit one of them.

use serde::{Deserialize, Serialize};
use shoal_test_support::meshgen::{Mesh, MeshSpec};
use std::fmt;
use std::path::{Path, PathBuf};

/// The spec's file name inside the mesh directory.
pub const SPEC_FILE: &str = ".loadtest-mesh.json";

#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("writing the mesh to {dir}: {source}")]
    Write {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading {path} (was the directory written by `loadtest mesh`?): {source}")]
    ReadSpec {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a mesh spec: {source}")]
    BadSpec {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

pub type Result<T, E = MeshError> = std::result::Result<T, E>;

/// [`MeshSpec`] as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct SpecFile {
    services: usize,
    endpoints_per_service: usize,
    namespaces: usize,
    vs_fraction: f64,
    dr_fraction: f64,
    sidecar_fraction: f64,
    seed: u64,
}

impl From<&MeshSpec> for SpecFile {
    fn from(s: &MeshSpec) -> Self {
        SpecFile {
            services: s.services,
            endpoints_per_service: s.endpoints_per_service,
            namespaces: s.namespaces,
            vs_fraction: s.vs_fraction,
            dr_fraction: s.dr_fraction,
            sidecar_fraction: s.sidecar_fraction,
            seed: s.seed,
        }
    }
}

impl From<SpecFile> for MeshSpec {
    fn from(s: SpecFile) -> Self {
        MeshSpec {
            services: s.services,
            endpoints_per_service: s.endpoints_per_service,
            namespaces: s.namespaces,
            vs_fraction: s.vs_fraction,
            dr_fraction: s.dr_fraction,
            sidecar_fraction: s.sidecar_fraction,
            seed: s.seed,
        }
    }
}

/// What was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeshSummary {
    pub dir: PathBuf,
    pub files: usize,
    pub services: usize,
    pub endpoints: usize,
    pub with_vs: usize,
    pub with_dr: usize,
    pub namespaces: usize,
    pub with_sidecar: usize,
}

impl MeshSummary {
    pub fn of(mesh: &Mesh, dir: &Path) -> Self {
        MeshSummary {
            dir: dir.to_path_buf(),
            files: mesh.files.len(),
            services: mesh.services.len(),
            endpoints: mesh.services.len() * mesh.spec.endpoints_per_service,
            with_vs: mesh.services.iter().filter(|s| s.has_vs).count(),
            with_dr: mesh.services.iter().filter(|s| s.has_dr).count(),
            namespaces: mesh.spec.namespaces.max(1),
            with_sidecar: mesh
                .files
                .iter()
                .filter(|(p, _)| p.ends_with("sidecar.yaml"))
                .count(),
        }
    }
}

impl fmt::Display for MeshSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "wrote {} files to {}", self.files, self.dir.display())?;
        writeln!(
            f,
            "  services    {} ({} endpoints), {} with a VirtualService, {} with a DestinationRule",
            self.services, self.endpoints, self.with_vs, self.with_dr
        )?;
        write!(
            f,
            "  namespaces  {}, {} with a Sidecar narrowing egress",
            self.namespaces, self.with_sidecar
        )
    }
}

/// Generates the mesh of `spec` into `dir`, with the spec beside it.
pub fn write_mesh(spec: &MeshSpec, dir: &Path) -> Result<MeshSummary> {
    let mesh = Mesh::generate(spec);
    let err = |source| MeshError::Write {
        dir: dir.to_path_buf(),
        source,
    };
    mesh.write(dir).map_err(err)?;
    let json = serde_json::to_vec_pretty(&SpecFile::from(spec)).map_err(std::io::Error::other);
    std::fs::write(dir.join(SPEC_FILE), json.map_err(err)?).map_err(err)?;
    Ok(MeshSummary::of(&mesh, dir))
}

/// The spec `loadtest mesh` stored in `dir`.
pub fn read_spec(dir: &Path) -> Result<MeshSpec> {
    let path = dir.join(SPEC_FILE);
    let text = std::fs::read(&path).map_err(|source| MeshError::ReadSpec {
        path: path.clone(),
        source,
    })?;
    let spec: SpecFile =
        serde_json::from_slice(&text).map_err(|source| MeshError::BadSpec { path, source })?;
    Ok(spec.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_back_the_spec() {
        let dir = tempfile::tempdir().unwrap();
        let spec = MeshSpec {
            services: 20,
            endpoints_per_service: 3,
            namespaces: 4,
            seed: 7,
            ..MeshSpec::default()
        };
        let summary = write_mesh(&spec, dir.path()).unwrap();
        assert_eq!(summary.services, 20);
        assert_eq!(summary.with_sidecar, 4);
        assert_eq!(summary.files, 24);
        assert!(dir.path().join("ns-1/svc-1.yaml").exists());
        assert_eq!(read_spec(dir.path()).unwrap(), spec);
        assert!(matches!(
            read_spec(&dir.path().join("ns-1")),
            Err(MeshError::ReadSpec { .. })
        ));
    }
}
