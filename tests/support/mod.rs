//! Test support for end-to-end tests: child processes stopped by PID, a real Envoy,
//! plain HTTP backends, and the example mesh written as users write it.
#![allow(dead_code)]

pub mod backend;
pub mod envoy;
pub mod mesh;
pub mod process;
pub mod tiers;

use std::net::TcpListener;
use std::path::PathBuf;

/// A free loopback port (bound and released; good enough for tests on one machine).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

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
