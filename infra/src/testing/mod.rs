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

/// A loopback port free at the time of the call (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind a loopback port")
}
