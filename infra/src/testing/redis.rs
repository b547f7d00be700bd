//! `RedisServer`: a throw-away `redis-server` without persistence.

use super::process::{self, Process};
use tempfile::TempDir;

const INSTALL_HINT: &str = "Install it with `apt-get install redis-server` (or your package \
     manager), or set SHOAL_REDIS_SERVER to its path.";

pub struct RedisServer {
    process: Process,
    _dir: TempDir,
}

impl RedisServer {
    /// Starts `$SHOAL_REDIS_SERVER` (else `redis-server` on PATH) on a free loopback port,
    /// with no RDB or AOF. Panics (with how to install it) if it does not run.
    pub fn start() -> Self {
        let binary = process::find_binary("SHOAL_REDIS_SERVER", &[], "redis-server");
        let dir = tempfile::tempdir().expect("create redis dir");
        let work = dir.path().display().to_string();
        let args = |port: u16| {
            [
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ]
            .into_iter()
            .chain(["--appendonly", "no", "--dir", &work])
            .map(String::from)
            .collect()
        };
        let process = process::spawn(&binary, INSTALL_HINT, &dir.path().join("log"), args);
        Self { process, _dir: dir }
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.process.port)
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }
}
