//! Test support for end-to-end tests: child processes stopped by PID, a real Envoy,
//! plain HTTP backends, and the example mesh written as users write it.
#![allow(dead_code)]

pub mod backend;
pub mod envoy;
pub mod kube;
pub mod mesh;
pub mod process;
pub mod tiers;

use std::path::PathBuf;

pub use shoal_infra::testing::free_port;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A binary built from this workspace (`cargo build --workspace --bins` first).
pub fn workspace_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` before the end-to-end tests",
        path.display()
    );
    path
}

/// A tool from the project venv (`.venv/bin/<name>`), an env override, or PATH.
pub fn tool(name: &str, env_override: &str) -> PathBuf {
    if let Ok(p) = std::env::var(env_override) {
        return PathBuf::from(p);
    }
    let venv = workspace_root().join(".venv/bin").join(name);
    if venv.exists() {
        return venv;
    }
    PathBuf::from(name)
}
