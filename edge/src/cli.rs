//! The `edge` command line: flags and their environment variables.

use clap::Parser;
use shoal_infra::cli::{DrainArgs, HttpArgs, NatsArgs, RedisArgs, duration};
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "edge",
    version,
    about = "Shoal edge: holds proxies' ADS streams and generates xDS"
)]
pub struct Args {
    // NATS: snapshot announcements, membership.
    #[command(flatten)]
    pub nats: NatsArgs,
    #[command(flatten)]
    pub redis: RedisArgs,
    /// ADS gRPC listen address.
    #[arg(long, env = "SHOAL_XDS_ADDR", default_value = "127.0.0.1:15010")]
    pub xds_addr: SocketAddr,
    // Admin HTTP: /metrics, /healthz/ready, /debug/syncz, /debug/ring.
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub drain: DrainArgs,
    /// This edge's ID in the membership ring (default: hostname-pid).
    #[arg(long, env = "SHOAL_EDGE_ID")]
    pub edge_id: Option<String>,
    #[command(flatten)]
    pub push: PushArgs,
    /// Proxies handed to other edges per second, at least (on a ring change or a drain).
    #[arg(long, env = "SHOAL_HANDOFF_RATE", default_value_t = 200.0)]
    pub handoff_rate: f64,
    /// How often proxies served here for another edge (their owner could not be reached
    /// when they connected) are sent home; 0s: only on ring changes.
    #[arg(long, env = "SHOAL_REHOME_INTERVAL", default_value = "30s", value_parser = duration)]
    pub rehome_interval: Duration,
}

impl Args {
    /// How this edge hands proxies off: on drain, within 80% of `--drain-grace`, so their
    /// streams end before the process does.
    pub fn handoff(&self) -> crate::HandoffConfig {
        crate::HandoffConfig {
            rate: self.handoff_rate.max(1.0),
            drain_window: self.drain.drain_grace.mul_f64(0.8),
            rehome_every: self.rehome_interval,
        }
    }
}

/// Push-queue and stream bounds, shared with the all-in-one `shoal`.
#[derive(Clone, Debug, clap::Args)]
pub struct PushArgs {
    /// Pushes in flight at once across all streams.
    #[arg(long, env = "SHOAL_PUSH_THROTTLE", default_value_t = 100)]
    pub push_throttle: usize,
    /// A response not sent within this time closes its stream.
    #[arg(long, env = "SHOAL_SEND_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub send_timeout: Duration,
    /// Most ADS streams held at once; more are refused with RESOURCE_EXHAUSTED.
    #[arg(long, env = "SHOAL_XDS_MAX_STREAMS", default_value_t = 20_000)]
    pub max_streams: usize,
    /// New streams admitted per second (Istio's PILOT_MAX_REQUESTS_PER_SECOND); one that
    /// waits over a second is refused with RESOURCE_EXHAUSTED. 0: unlimited.
    #[arg(long, env = "SHOAL_MAX_REQUESTS_PER_SECOND", default_value_t = 0.0)]
    pub max_requests_per_second: f64,
    /// First responses of new streams generated at once; the others wait their turn.
    #[arg(long, env = "SHOAL_XDS_INITIAL_THROTTLE", default_value_t = 100)]
    pub initial_throttle: usize,
    /// A request reporting a snapshot newer than this edge holds (a proxy that moved from
    /// an edge further ahead) waits up to this long for the edge to catch up.
    #[arg(long, env = "SHOAL_XDS_RESUME_WAIT", default_value = "3s", value_parser = duration)]
    pub resume_wait: Duration,
    /// Resource names one ADS stream may subscribe to, over all its types (SotW and
    /// Delta); a request that would exceed it closes the stream with RESOURCE_EXHAUSTED.
    #[arg(long, env = "SHOAL_XDS_MAX_NAMES_PER_STREAM", default_value_t = crate::ads::DEFAULT_MAX_NAMES)]
    pub max_names_per_stream: usize,
}

impl PushArgs {
    pub fn apply(&self, xds: &mut crate::ads::XdsConfig) {
        xds.push_throttle = self.push_throttle;
        xds.send_timeout = self.send_timeout;
        xds.max_streams = self.max_streams;
        xds.max_requests_per_second = self.max_requests_per_second;
        xds.initial_throttle = self.initial_throttle;
        xds.resume_wait = self.resume_wait;
        xds.max_names_per_stream = self.max_names_per_stream;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn shared_flags_keep_their_defaults() {
        Args::command().debug_assert();
        let args = Args::try_parse_from(["x"]).unwrap();
        assert_eq!(args.nats.nats_url, "nats://127.0.0.1:4222");
        assert_eq!(args.redis.redis_url, "redis://127.0.0.1:6379");
        assert_eq!(args.http.http_addr, "127.0.0.1:15014".parse().unwrap());
        let mut xds = crate::ads::XdsConfig::default();
        args.push.apply(&mut xds);
        assert_eq!(
            xds.max_names_per_stream,
            crate::ads::XdsConfig::default().max_names_per_stream
        );
    }
}
