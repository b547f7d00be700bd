//! `RedisServer`: a throw-away `redis-server` without persistence.

use super::process::{self, Process};
use tempfile::TempDir;

const INSTALL_HINT: &str = "Install it with `apt-get install redis-server` (or your package \
     manager), or set SHOAL_REDIS_SERVER to its path.";

pub struct RedisServer {
    process: Process,
    binary: std::path::PathBuf,
    args: Vec<String>,
    dir: TempDir,
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
        let args = args(process.port);
        Self {
            process,
            binary,
            args,
            dir,
        }
    }

    /// Kills the server: clients see it unavailable until [`RedisServer::start_again`].
    pub fn stop(&mut self) {
        self.process.kill();
    }

    /// Starts a stopped server again on the same port, empty (it keeps nothing on disk).
    pub fn start_again(&mut self) {
        let log = self.dir.path().join("log");
        let port = self.process.port;
        self.process.kill();
        self.process = process::respawn(&self.binary, INSTALL_HINT, &log, &self.args, port);
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.process.port)
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }
}
