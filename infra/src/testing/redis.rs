//! `RedisServer`: a throw-away `redis-server` without persistence.

use super::ServerTls;
use super::process::{self, Process};
use tempfile::TempDir;

const INSTALL_HINT: &str = "Install it with `apt-get install redis-server` (or your package \
     manager), or set SHOAL_REDIS_SERVER to its path.";

pub struct RedisServer {
    process: Process,
    binary: std::path::PathBuf,
    args: Vec<String>,
    dir: TempDir,
    tls: bool,
}

impl RedisServer {
    /// Starts `$SHOAL_REDIS_SERVER` (else `redis-server` on PATH) on a free loopback port,
    /// with no RDB or AOF. Panics (with how to install it) if it does not run.
    pub fn start() -> Self {
        Self::start_with(None)
    }

    /// Starts a server that speaks only TLS (`--port 0 --tls-port <free>`) and admits only
    /// the ACL user `user` with `password` (the default user is off). Client certificates
    /// are required with `tls.verify_clients`, else optional.
    pub fn start_secure(tls: &ServerTls, user: &str, password: &str) -> Self {
        Self::start_with(Some((tls, user, password)))
    }

    fn start_with(secure: Option<(&ServerTls, &str, &str)>) -> Self {
        let binary = process::find_binary("SHOAL_REDIS_SERVER", &[], "redis-server");
        let dir = tempfile::tempdir().expect("create redis dir");
        let work = dir.path().display().to_string();
        let args = |port: u16| {
            let port = port.to_string();
            let mut args: Vec<String> = ["--bind", "127.0.0.1", "--save", ""]
                .into_iter()
                .chain(["--appendonly", "no", "--dir", &work])
                .map(String::from)
                .collect();
            match secure {
                None => args.extend(["--port".into(), port]),
                Some((tls, user, password)) => {
                    let clients = if tls.verify_clients {
                        "yes"
                    } else {
                        "optional"
                    };
                    let file = |p: &std::path::Path| p.display().to_string();
                    args.extend([
                        "--port".into(),
                        "0".into(),
                        "--tls-port".into(),
                        port,
                        "--tls-cert-file".into(),
                        file(&tls.cert),
                        "--tls-key-file".into(),
                        file(&tls.key),
                        "--tls-ca-cert-file".into(),
                        file(&tls.ca),
                        "--tls-auth-clients".into(),
                        clients.into(),
                        "--user".into(),
                        "default".into(),
                        "off".into(),
                        "--user".into(),
                        user.into(),
                        "on".into(),
                        format!(">{password}"),
                        "~*".into(),
                        "&*".into(),
                        "+@all".into(),
                    ]);
                }
            }
            args
        };
        let process = process::spawn(&binary, INSTALL_HINT, &dir.path().join("log"), args);
        let args = args(process.port);
        Self {
            process,
            binary,
            args,
            dir,
            tls: secure.is_some(),
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

    /// `rediss://127.0.0.1:<port>` for a secured server, else `redis://127.0.0.1:<port>`.
    pub fn secure_url(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.process.port)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.process.port)
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }
}
