//! Spawning a server binary and waiting until its port accepts connections.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Ports are picked then bound by the child, so another process may take one in between;
/// a few attempts with fresh ports make that race harmless.
const ATTEMPTS: usize = 3;

/// A running server process; killed (by PID) and reaped on drop.
pub(super) struct Process {
    pub child: Child,
    pub port: u16,
}

impl Process {
    /// Kills and reaps the child; a second call is a no-op.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `env` if set, else the first of `candidates` that exists, else `name` (looked up on PATH).
pub(super) fn find_binary(env: &str, candidates: &[PathBuf], name: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Spawns `binary` with `args(port)` until one run accepts on its port. `log` receives the
/// child's output, shown if it fails.
pub(super) fn spawn(
    binary: &Path,
    install_hint: &str,
    log: &Path,
    args: impl Fn(u16) -> Vec<String>,
) -> Process {
    let mut last_error = String::new();
    for _ in 0..ATTEMPTS {
        let port = super::free_port();
        let child = spawn_once(binary, install_hint, log, &args(port));
        let mut process = Process { child, port };
        match wait_ready(&mut process) {
            Ok(()) => return process,
            Err(e) => {
                last_error = format!("{e}\n--- {} output ---\n{}", binary.display(), read(log));
            }
        }
    }
    panic!("{} did not start: {last_error}", binary.display());
}

/// Starts `binary` again with the same arguments (same port), e.g. after a restart.
pub(super) fn respawn(
    binary: &Path,
    install_hint: &str,
    log: &Path,
    args: &[String],
    port: u16,
) -> Process {
    let child = spawn_once(binary, install_hint, log, args);
    let mut process = Process { child, port };
    if let Err(e) = wait_ready(&mut process) {
        panic!("{} did not restart: {e}\n{}", binary.display(), read(log));
    }
    process
}

fn spawn_once(binary: &Path, install_hint: &str, log: &Path, args: &[String]) -> Child {
    let out = std::fs::File::create(log).expect("create server log file");
    let err = out.try_clone().expect("clone server log file");
    match Command::new(binary)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
    {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("{} not found ({e}). {install_hint}", binary.display())
        }
        Err(e) => panic!("cannot start {}: {e}", binary.display()),
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "servers start synchronously, before the test runs anything on its runtime"
)]
fn wait_ready(process: &mut Process) -> Result<(), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], process.port));
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = process.child.try_wait() {
            return Err(format!("exited with {status} before accepting on {addr}"));
        }
        // A connect alone is not proof: the port may be another process's listener (a
        // server that lost the bind race exits a moment later, and the test then meets a
        // port that goes away), so the listening socket must be the child's own.
        if listened_by(process.child.id(), process.port).unwrap_or(true)
            && TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("not accepting on {addr} after {READY_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Whether process `pid` holds a TCP socket listening on `port` (any local address),
/// read from Linux's `/proc`; `None` where `/proc` cannot tell.
fn listened_by(pid: u32, port: u16) -> Option<bool> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        inodes.extend(
            text.lines()
                .skip(1)
                .filter_map(|line| listening_inode(line, port)),
        );
    }
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    let held = fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| {
            let target = target.to_string_lossy();
            inodes
                .iter()
                .any(|inode| target == format!("socket:[{inode}]"))
        })
    });
    Some(held)
}

/// The socket inode of a `/proc/net/tcp{,6}` row that listens on `port`.
fn listening_inode(line: &str, port: u16) -> Option<u64> {
    // Columns: sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    let columns: Vec<&str> = line.split_whitespace().collect();
    let (local, state, inode) = (columns.get(1)?, columns.get(3)?, columns.get(9)?);
    let local_port = u16::from_str_radix(local.rsplit(':').next()?, 16).ok()?;
    const LISTEN: &str = "0A";
    (local_port == port && *state == LISTEN).then(|| inode.parse().ok())?
}

fn read(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_is_found_for_its_own_process_only() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listened_by(std::process::id(), port), Some(true));
        let mut other = Command::new("sleep").arg("5").spawn().unwrap();
        assert_eq!(listened_by(other.id(), port), Some(false));
        let _ = other.kill();
        let _ = other.wait();
        drop(listener);
        assert_eq!(listened_by(std::process::id(), port), Some(false));
    }

    #[test]
    fn proc_rows_are_read_by_port_and_state() {
        let listen = "   0: 0100007F:4062 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0";
        let connected = "   1: 0100007F:4062 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0";
        assert_eq!(listening_inode(listen, 0x4062), Some(12345));
        assert_eq!(listening_inode(listen, 0x4063), None);
        assert_eq!(listening_inode(connected, 0x4062), None);
    }
}
