//! Real-server fixtures for integration tests (feature `test-util`): each starts its own
//! `nats-server` or `redis-server` on a free loopback port and kills it on drop, so tests
//! run in parallel without sharing state.
//!
//! ```text
//! let nats = NatsServer::start();   // nats-server -js on 127.0.0.1:<free>
//! let client = shoal_infra::nats::connect(&nats.url()).await?;
//! let nats = NatsServer::start_secure(&tls, "shoal", "pw");   // TLS and a user
//! let redis = RedisServer::start_secure(&tls, "shoal", "pw"); // --port 0 --tls-port <free>
//! ```

mod nats;
mod process;
mod redis;

pub use nats::NatsServer;
pub use redis::RedisServer;

use std::path::PathBuf;

/// What a secured fixture serves TLS with: PEM files the test made (e.g.
/// `test_support::tls::TestPki`). With `verify_clients`, a client certificate signed by
/// `ca` is required; without, it is optional (Redis) or not asked for (NATS).
#[derive(Clone, Debug)]
pub struct ServerTls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub verify_clients: bool,
}

/// A loopback port free at the time of the call, taken from below the kernel's ephemeral
/// range. A port the OS picked for `:0` would be handed out again to the next process
/// that binds `:0` (a tier's admin server), and the test's Envoy then failed to bind it
/// (CI saw exactly that). Each process starts at its own offset so parallel test
/// binaries rarely meet; the bind check catches the rest.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = (PORTS_BELOW_EPHEMERAL_FROM, ephemeral_range_start());
    let span = u32::from(high - low);
    let offset = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = low + ((offset + n) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {low}..{high}")
}

/// The lowest port [`free_port`] hands out: above the well-known and registered ports
/// that servers on a test machine commonly use.
const PORTS_BELOW_EPHEMERAL_FROM: u16 = 12_000;

/// Where the kernel's ephemeral ports start (Linux default 32768).
fn ephemeral_range_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|&p| p > PORTS_BELOW_EPHEMERAL_FROM + 1_000)
        .unwrap_or(32_768)
}
