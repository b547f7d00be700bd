//! Real-server fixtures for integration tests (feature `test-util`): each starts its own
//! `nats-server` or `redis-server` on a free loopback port and kills it on drop, so tests
//! run in parallel without sharing state.
//!
//! ```text
//! let nats = NatsServer::start();   // nats-server -js on 127.0.0.1:<free>
//! let client = shoal_infra::nats::connect(&nats.url()).await?;
//! ```

mod nats;
mod process;
mod redis;

pub use nats::NatsServer;
pub use redis::RedisServer;

/// A loopback port free at the time of the call (the OS picks it).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind a loopback port")
}
