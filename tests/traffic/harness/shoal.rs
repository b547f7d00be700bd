//! The all-in-one `shoal` (ingest, builder and edge in one process) on a config
//! directory, started as a user starts it.

use crate::support::free_port;
use crate::support::process::{Proc, wait_http_ok};
use std::path::Path;
use std::time::Duration;

pub struct Shoal {
    pub proc: Proc,
    pub xds_port: u16,
}

/// Starts `shoal --config-dir config_dir` and waits until it is ready.
pub async fn start(config_dir: &Path, log_dir: &Path) -> Shoal {
    let (http_port, xds_port) = (free_port(), free_port());
    let mut proc = Proc::spawn(
        "shoal",
        Path::new(env!("CARGO_BIN_EXE_shoal")),
        &[
            "--config-dir".into(),
            config_dir.display().to_string(),
            "--plaintext-xds-addr".into(),
            format!("127.0.0.1:{xds_port}"),
            // The secure listener is always on: a free port, not 15012.
            "--secure-xds-addr".into(),
            "127.0.0.1:0".into(),
            "--http-addr".into(),
            format!("127.0.0.1:{http_port}"),
        ],
        &[("RUST_LOG", "info".to_string())],
        log_dir,
    );
    let ready = wait_http_ok(
        &format!("http://127.0.0.1:{http_port}/healthz/ready"),
        Duration::from_secs(30),
    )
    .await;
    if !ready {
        proc.assert_running();
        panic!("shoal not ready within 30 s:\n{}", proc.tail(40));
    }
    Shoal { proc, xds_port }
}
