//! The tiers as separate processes, as the end-to-end and fleet tests start them.

use super::process::Proc;
use super::{free_port, workspace_binary};
use shoal_test_support::pki::{EDGE_SPIFFE, TestCa};
use std::path::Path;
use std::sync::OnceLock;

/// A tier process and its admin port (`/healthz/ready`, `/metrics`, `/debug/...`).
pub struct Tier {
    pub proc: Proc,
    pub http: u16,
}

/// An edge process, its ADS ports and admin port.
pub struct Edge {
    pub proc: Proc,
    /// Plaintext ADS, where the tests' proxies connect.
    pub xds: u16,
    /// ADS over TLS, where the other edges relay to (mTLS as the edge identity).
    pub secure: u16,
    pub http: u16,
}

/// The mesh CA every edge of this test process trusts and is certified by.
fn mesh_ca() -> &'static TestCa {
    static CA: OnceLock<TestCa> = OnceLock::new();
    CA.get_or_init(|| TestCa::new("shoal test mesh"))
}

fn env() -> [(&'static str, String); 1] {
    [("RUST_LOG", "info".to_string())]
}

/// `RUST_LOG` and `extra` (e.g. `SHOAL_NATS_PASSWORD`, as the chart sets it from a Secret).
fn env_with(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    env().into_iter().chain(extra.iter().cloned()).collect()
}

/// The all-in-one `shoal` serving `config_dir`: plaintext ADS on `xds`, admin on `http`,
/// the secure port on any free one; `args` and `env` added (`RUST_LOG=info` set).
pub fn shoal(
    config_dir: &Path,
    xds: u16,
    http: u16,
    args: &[String],
    extra_env: &[(&'static str, String)],
    dir: &Path,
) -> Proc {
    let mut all = vec![
        "--config-dir".to_string(),
        config_dir.display().to_string(),
        "--plaintext-xds-addr".into(),
        format!("127.0.0.1:{xds}"),
        "--secure-xds-addr".into(),
        "127.0.0.1:0".into(),
        "--http-addr".into(),
        format!("127.0.0.1:{http}"),
    ];
    all.extend(args.iter().cloned());
    Proc::spawn(
        "shoal",
        Path::new(env!("CARGO_BIN_EXE_shoal")),
        &all,
        &env_with(extra_env),
        dir,
    )
}

/// `ingest --config-dir <config_dir>` for `cluster-1` on `nats`.
pub fn ingest(config_dir: &Path, nats: &str, dir: &Path) -> Tier {
    ingest_with(
        &["--config-dir", &config_dir.display().to_string()],
        nats,
        dir,
    )
}

/// `ingest` for `cluster-1` on `nats`, reading where `source` says.
pub fn ingest_with(source: &[&str], nats: &str, dir: &Path) -> Tier {
    ingest_of("cluster-1", source, nats, dir)
}

/// `ingest` for `cluster` on `nats`, reading where `source` says.
pub fn ingest_of(cluster: &str, source: &[&str], nats: &str, dir: &Path) -> Tier {
    ingest_env(cluster, source, nats, &[], dir)
}

/// `ingest` for `cluster` on `nats` with `flags` (where it reads, TLS, credentials) and
/// environment variables `envs`.
pub fn ingest_env(
    cluster: &str,
    flags: &[&str],
    nats: &str,
    envs: &[(&'static str, String)],
    dir: &Path,
) -> Tier {
    let (source, http) = (flags, free_port());
    let mut args: Vec<String> = source.iter().map(|a| a.to_string()).collect();
    args.extend([
        "--cluster-id".into(),
        cluster.into(),
        "--nats-url".into(),
        nats.into(),
        "--http-addr".into(),
        format!("127.0.0.1:{http}"),
    ]);
    let name = format!("ingest-{cluster}");
    let proc = Proc::spawn(
        &name,
        &workspace_binary("ingest"),
        &args,
        &env_with(envs),
        dir,
    );
    Tier { proc, http }
}

/// Builder `n` on `nats` and `redis`.
pub fn builder(n: usize, nats: &str, redis: &str, dir: &Path) -> Tier {
    builder_env(n, nats, redis, &[], &[], dir)
}

/// Builder `n` on `nats` and `redis` with `extra` flags and environment variables `envs`.
pub fn builder_env(
    n: usize,
    nats: &str,
    redis: &str,
    extra: &[&str],
    envs: &[(&'static str, String)],
    dir: &Path,
) -> Tier {
    let http = free_port();
    let mut args: Vec<String> = vec![
        "--nats-url".into(),
        nats.into(),
        "--redis-url".into(),
        redis.into(),
        "--http-addr".into(),
        format!("127.0.0.1:{http}"),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let proc = Proc::spawn(
        &format!("builder-{n}"),
        &workspace_binary("builder"),
        &args,
        &env_with(envs),
        dir,
    );
    Tier { proc, http }
}

/// Edge `n` (`--edge-id edge-<n>`) on `nats` and `redis`, with `extra` flags.
pub fn edge(n: usize, nats: &str, redis: &str, extra: &[&str], dir: &Path) -> Edge {
    edge_env(n, nats, redis, extra, &[], dir)
}

/// Edge `n` with `extra` flags and environment variables `envs`.
pub fn edge_env(
    n: usize,
    nats: &str,
    redis: &str,
    extra: &[&str],
    envs: &[(&'static str, String)],
    dir: &Path,
) -> Edge {
    let (xds, secure, http) = (free_port(), free_port(), free_port());
    // Its certificate names the edge SPIFFE ID: the other edges relay to it over mTLS.
    let leaf = mesh_ca().issue(&["127.0.0.1"], Some(EDGE_SPIFFE));
    let (cert, key, ca) = mesh_ca().write(&dir.join(format!("pki-edge-{n}")), "edge", &leaf);
    let mut args: Vec<String> = vec![
        "--nats-url".into(),
        nats.into(),
        "--redis-url".into(),
        redis.into(),
        "--edge-id".into(),
        format!("edge-{n}"),
        "--plaintext-xds-addr".into(),
        format!("127.0.0.1:{xds}"),
        "--secure-xds-addr".into(),
        format!("127.0.0.1:{secure}"),
        "--tls-cert-file".into(),
        cert.display().to_string(),
        "--tls-key-file".into(),
        key.display().to_string(),
        "--tls-ca-file".into(),
        ca.display().to_string(),
        "--http-addr".into(),
        format!("127.0.0.1:{http}"),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let proc = Proc::spawn(
        &format!("edge-{n}"),
        &workspace_binary("edge"),
        &args,
        &env_with(envs),
        dir,
    );
    Edge {
        proc,
        xds,
        secure,
        http,
    }
}
