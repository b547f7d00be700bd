//! The `edge` command line: flags and their environment variables.

use crate::security::{EdgeSecurity, SecurityArgs};
use crate::tls::files::CertFiles;
use crate::tls::incoming::HandshakeLimits;
use crate::xds::GeneratorConfig;
use crate::{Listen, SecureListen};
use clap::Parser;
use shoal_infra::cli::{DrainArgs, HttpArgs, NatsArgs, RedisArgs, duration};
use shoal_infra::telemetry::TelemetryArgs;
use shoal_proto::security::SpiffeId;
use std::net::SocketAddr;
use std::path::PathBuf;
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
    #[command(flatten)]
    pub listen: XdsListenArgs,
    #[command(flatten)]
    pub security: SecurityArgs,
    // Admin HTTP: /metrics, /healthz/ready, /debug/{syncz,ring,push_status,config_dump,
    // config_diff}.
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub drain: DrainArgs,
    #[command(flatten)]
    pub telemetry: TelemetryArgs,
    /// This edge's ID in the membership ring (default: hostname-pid).
    #[arg(long, env = "SHOAL_EDGE_ID")]
    pub edge_id: Option<String>,
    /// The IP other edges reach this one at (its relays, and `shoal status` through
    /// NATS), announced in the membership bucket; needed when the xDS listeners are bound
    /// to every address (the chart sets the pod IP).
    #[arg(long, env = "SHOAL_ADVERTISE_IP")]
    pub advertise_ip: Option<std::net::IpAddr>,
    #[command(flatten)]
    pub push: PushArgs,
    /// Proxies handed to other edges per second, at least (on a ring change or a drain).
    #[arg(long, env = "SHOAL_HANDOFF_RATE", default_value_t = 200.0)]
    pub handoff_rate: f64,
    /// On SIGTERM, the share of `--drain-grace` over which every proxy is handed off
    /// (0 < share ≤ 1): a smaller share leaves more of the grace for the proxies to
    /// reconnect and be served elsewhere, a larger one spreads their reconnects thinner.
    #[arg(long, env = "SHOAL_DRAIN_HANDOFF_SHARE", default_value_t = 0.8, value_parser = share)]
    pub drain_handoff_share: f64,
    /// How often proxies served here for another edge (their owner could not be reached
    /// when they connected) are sent home; 0s: only on ring changes.
    #[arg(long, env = "SHOAL_REHOME_INTERVAL", default_value = "30s", value_parser = duration)]
    pub rehome_interval: Duration,
}

impl Args {
    /// How this edge hands proxies off: on drain, within `--drain-handoff-share` of
    /// `--drain-grace`, so their streams end before the process does.
    pub fn handoff(&self) -> crate::HandoffConfig {
        crate::HandoffConfig {
            rate: self.handoff_rate.max(1.0),
            drain_window: self.drain.drain_grace.mul_f64(self.drain_handoff_share),
            rehome_every: self.rehome_interval,
        }
    }
}

/// The ADS listeners and the edge identity, shared with the all-in-one `shoal`.
#[derive(Clone, Debug, clap::Args)]
pub struct XdsListenArgs {
    /// ADS and the CA over TLS (istiod's 15012): every stream authenticated (client
    /// certificate or token). Served with a certificate of the edge's own CA, or that
    /// of --tls-cert-file.
    #[arg(long, env = "SHOAL_SECURE_XDS_ADDR", default_value = "127.0.0.1:15012")]
    pub secure_xds_addr: SocketAddr,
    /// Plaintext ADS (istiod's 15010); unset: none. Its streams are anonymous and are
    /// never sent a Secret.
    #[arg(long, env = "SHOAL_PLAINTEXT_XDS_ADDR")]
    pub plaintext_xds_addr: Option<SocketAddr>,
    /// PEM certificate chain (leaf first) of the secure listener, re-read when it changes.
    /// It is also presented to other edges when relaying: it must name the edge SPIFFE ID
    /// (spiffe://<trust-domain>/ns/<system-namespace>/sa/<service-account>).
    #[arg(long, env = "SHOAL_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, env = "SHOAL_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// PEM mesh root(s): client certificates and other edges are verified against them.
    /// Unset: no client certificates are asked for and streams are not relayed.
    #[arg(long, env = "SHOAL_TLS_CA_FILE", requires = "tls_cert_file")]
    pub tls_ca_file: Option<PathBuf>,
    /// How often the TLS files are checked for a change.
    #[arg(long, env = "SHOAL_TLS_RELOAD_INTERVAL", default_value = "10s", value_parser = duration)]
    pub tls_reload_interval: Duration,
    /// A TLS handshake not done within this is dropped.
    #[arg(long, env = "SHOAL_TLS_HANDSHAKE_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub tls_handshake_timeout: Duration,
    /// The mesh's trust domain.
    #[arg(long, env = "SHOAL_TRUST_DOMAIN", default_value = "cluster.local")]
    pub trust_domain: String,
    /// The namespace the edges run in (the edge SPIFFE ID's).
    #[arg(long, env = "SHOAL_SYSTEM_NAMESPACE", default_value = "istio-system")]
    pub system_namespace: String,
    /// The edges' service account (the edge SPIFFE ID's).
    #[arg(long, env = "SHOAL_SERVICE_ACCOUNT", default_value = "shoal-edge")]
    pub service_account: String,
}

impl XdsListenArgs {
    /// The SPIFFE ID every edge presents to the others.
    pub fn edge_identity(&self) -> SpiffeId {
        SpiffeId::new(
            &self.trust_domain,
            &self.system_namespace,
            &self.service_account,
        )
    }

    /// The TLS files, when given.
    pub fn cert_files(&self) -> Option<CertFiles> {
        Some(CertFiles {
            cert: self.tls_cert_file.clone()?,
            key: self.tls_key_file.clone()?,
            ca: self.tls_ca_file.clone(),
        })
    }

    /// The listeners: the secure one, always, with `security`'s certificate, CA and
    /// authenticators; the plaintext one when asked for.
    pub fn listen(&self, security: &EdgeSecurity) -> Listen {
        Listen {
            plaintext: self.plaintext_xds_addr,
            secure: Some(SecureListen {
                addr: self.secure_xds_addr,
                tls: security.tls.clone(),
                authenticator: security.authenticator.clone(),
                ca: Some(security.ca.clone()),
                handshake: HandshakeLimits {
                    timeout: self.tls_handshake_timeout,
                    ..HandshakeLimits::default()
                },
            }),
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
    /// Chunks of responses (up to two each) one stream may have waiting, queued or in
    /// HTTP/2 not yet written to its connection; beyond it sends wait, and time out.
    #[arg(long, env = "SHOAL_XDS_STREAM_BUFFER", default_value_t = crate::ads::XdsConfig::default().stream_buffer, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub stream_buffer: usize,
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
    /// Config revisions whose convergence (concerned, sent, ACKed, NACKed proxies) this
    /// edge keeps for `/debug/push_status` and `shoal status`.
    #[arg(long, env = "SHOAL_PUSH_STATUS_REVISIONS", default_value_t = crate::ads::XdsConfig::default().push_status_revisions, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub push_status_revisions: usize,
    /// Streams one HTTP/2 connection may have reset for its peer's protocol errors, over
    /// its life, before the edge closes it (a guard against hostile clients; relays
    /// between edges churn many streams on one connection). 0: no limit.
    #[arg(long, env = "SHOAL_XDS_MAX_RESETS_PER_CONNECTION", default_value_t = crate::ads::XdsConfig::default().max_resets_per_connection)]
    pub max_resets_per_connection: usize,
    /// Relayed streams one HTTP/2 connection to their owner carries; more open another
    /// connection to it (one connection for all would serialise them on one task).
    #[arg(long, env = "SHOAL_RELAY_STREAMS_PER_CONNECTION", default_value_t = crate::ads::XdsConfig::default().relay_streams_per_connection)]
    pub relay_streams_per_connection: usize,
    /// How long a relay waits for a live owner to take the stream before the proxy is told
    /// to reconnect (an owner that is down is not waited for: the proxy is served here).
    #[arg(long, env = "SHOAL_RELAY_OPEN_TIMEOUT", default_value = "120s", value_parser = duration)]
    pub relay_open_timeout: Duration,
    /// Relay a proxy's whole connection to its owner (its bytes copied both ways, the
    /// first stream's node deciding) rather than each stream's messages.
    #[arg(long, env = "SHOAL_RELAY_CONNECTIONS", default_value_t = true, action = clap::ArgAction::Set)]
    pub relay_connections: bool,
    /// What is read of a proxy's connection, at most, to find its first stream's node;
    /// a connection that sends more first is served where it landed.
    #[arg(long, env = "SHOAL_RELAY_PRELUDE_BYTES", default_value_t = crate::ads::XdsConfig::default().relay_prelude_bytes)]
    pub relay_prelude_bytes: usize,
    /// Bytes an owner's server may have written to a tunneled connection before the
    /// tunnel takes them; beyond it the server waits.
    #[arg(long, env = "SHOAL_TUNNEL_BUFFER_BYTES", default_value_t = crate::ads::XdsConfig::default().tunnel_buffer_bytes)]
    pub tunnel_buffer_bytes: usize,
    /// Bytes of a served connection's writes gathered before they go out (HTTP/2 writes
    /// each 16 KiB frame by itself otherwise); the buffer is freed once written. 0: each
    /// write goes out as it comes. At most 16 MiB (a buffer is held per busy connection).
    #[arg(long, env = "SHOAL_WRITE_COALESCE_BYTES", default_value_t = crate::ads::XdsConfig::default().write_coalesce_bytes, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=16 * 1024 * 1024))]
    pub write_coalesce_bytes: usize,
    /// Accepted (and tunneled) connections waiting for a listener's HTTP/2 server.
    #[arg(long, env = "SHOAL_ACCEPT_QUEUE", default_value_t = crate::ads::XdsConfig::default().accept_queue)]
    pub accept_queue: usize,
    #[command(flatten)]
    pub caches: CacheArgs,
    #[command(flatten)]
    pub jwks: JwksArgs,
}

/// Bounds of the generator's caches (entries; the oldest go first).
#[derive(Clone, Debug, clap::Args)]
pub struct CacheArgs {
    /// Generated CDS, LDS and RDS kept per scope: scopes × snapshot generations.
    #[arg(long, env = "SHOAL_XDS_SCOPE_CACHE", default_value_t = GeneratorConfig::default().scope_cache_capacity)]
    pub scope_cache: usize,
    /// Generated EDS kept: one per cluster (and service namespace).
    #[arg(long, env = "SHOAL_XDS_ENDPOINT_CACHE", default_value_t = GeneratorConfig::default().endpoint_cache_capacity)]
    pub endpoint_cache: usize,
    /// Encoded response bodies kept for streams to share: one per distinct body (scope ×
    /// type × what changed) of the snapshots in flight.
    #[arg(long, env = "SHOAL_XDS_ENCODED_CACHE", default_value_t = GeneratorConfig::default().encoded_cache_capacity)]
    pub encoded_cache: usize,
}

impl CacheArgs {
    pub fn apply(&self, generator: &mut GeneratorConfig) {
        generator.scope_cache_capacity = self.scope_cache;
        generator.endpoint_cache_capacity = self.endpoint_cache;
        generator.encoded_cache_capacity = self.encoded_cache;
    }
}

/// How the edge fetches RequestAuthentications' `jwksUri`s (`crate::jwks`).
#[derive(Clone, Debug, clap::Args)]
pub struct JwksArgs {
    /// Fetched keys are refetched this often (Istio's 20 minutes).
    #[arg(long, env = "SHOAL_JWKS_REFRESH_INTERVAL", default_value = "20m", value_parser = duration)]
    pub jwks_refresh_interval: Duration,
    /// A failed JWKS fetch is retried after this (the last good keys serve meanwhile).
    #[arg(long, env = "SHOAL_JWKS_RETRY_INTERVAL", default_value = "1m", value_parser = duration)]
    pub jwks_retry_interval: Duration,
    /// Timeout of one JWKS fetch, unless the rule's `timeout` says otherwise.
    #[arg(long, env = "SHOAL_JWKS_FETCH_TIMEOUT", default_value = "5s", value_parser = duration)]
    pub jwks_fetch_timeout: Duration,
    /// The largest JWKS document read, in bytes.
    #[arg(long, env = "SHOAL_JWKS_MAX_BYTES", default_value_t = shoal_proto::security::authn::jwt::MAX_JWKS_BYTES)]
    pub jwks_max_bytes: usize,
    /// The most distinct jwksUris fetched; the rules naming others refuse every token.
    #[arg(long, env = "SHOAL_JWKS_MAX_URIS", default_value_t = 256)]
    pub jwks_max_uris: usize,
}

impl JwksArgs {
    pub fn config(&self) -> crate::jwks::JwksFetchConfig {
        crate::jwks::JwksFetchConfig {
            refresh_interval: self.jwks_refresh_interval,
            retry_interval: self.jwks_retry_interval,
            timeout: self.jwks_fetch_timeout,
            max_bytes: self.jwks_max_bytes,
            max_uris: self.jwks_max_uris,
            ..Default::default()
        }
    }
}

impl PushArgs {
    pub fn apply(&self, xds: &mut crate::ads::XdsConfig) {
        xds.push_throttle = self.push_throttle;
        xds.send_timeout = self.send_timeout;
        xds.stream_buffer = self.stream_buffer;
        xds.max_streams = self.max_streams;
        xds.max_requests_per_second = self.max_requests_per_second;
        xds.initial_throttle = self.initial_throttle;
        xds.resume_wait = self.resume_wait;
        xds.max_names_per_stream = self.max_names_per_stream;
        xds.push_status_revisions = self.push_status_revisions;
        xds.max_resets_per_connection = self.max_resets_per_connection;
        xds.relay_streams_per_connection = self.relay_streams_per_connection;
        xds.relay_open_timeout = self.relay_open_timeout;
        xds.relay_connections = self.relay_connections;
        xds.relay_prelude_bytes = self.relay_prelude_bytes;
        xds.tunnel_buffer_bytes = self.tunnel_buffer_bytes;
        xds.write_coalesce_bytes = self.write_coalesce_bytes;
        xds.accept_queue = self.accept_queue;
    }
}

/// A share of a whole: a number in (0, 1].
fn share(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("{s} is not in (0, 1]"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_drain_hands_off_within_its_share_of_the_grace() {
        let args = Args::try_parse_from(["x", "--drain-grace", "20s"]).unwrap();
        assert_eq!(args.handoff().drain_window, Duration::from_secs(16));
        let args =
            Args::try_parse_from(["x", "--drain-grace", "20s", "--drain-handoff-share", "0.5"])
                .unwrap();
        assert_eq!(args.handoff().drain_window, Duration::from_secs(10));
        for bad in ["0", "1.5", "-0.2", "half"] {
            assert!(
                Args::try_parse_from(["x", "--drain-handoff-share", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn shared_flags_keep_their_defaults() {
        Args::command().debug_assert();
        let args = Args::try_parse_from(["x"]).unwrap();
        assert_eq!(args.nats.nats_url, "nats://127.0.0.1:4222");
        assert_eq!(args.redis.redis_url, "redis://127.0.0.1:6379");
        assert_eq!(args.http.http_addr, "127.0.0.1:15014".parse().unwrap());
        assert_eq!(
            args.listen.secure_xds_addr,
            "127.0.0.1:15012".parse().unwrap()
        );
        assert_eq!(args.listen.plaintext_xds_addr, None, "plaintext ADS is off");
        assert_eq!(
            args.listen.edge_identity().to_string(),
            "spiffe://cluster.local/ns/istio-system/sa/shoal-edge"
        );
        assert_eq!(
            args.push.jwks.config(),
            crate::jwks::JwksFetchConfig::default()
        );
        let mut generator = GeneratorConfig::default();
        args.push.caches.apply(&mut generator);
        assert_eq!(generator, GeneratorConfig::default());
        let mut xds = crate::ads::XdsConfig::default();
        args.push.apply(&mut xds);
        assert_eq!(
            xds.max_names_per_stream,
            crate::ads::XdsConfig::default().max_names_per_stream
        );
        assert_eq!(xds.stream_buffer, 8);
    }

    #[test]
    fn the_stream_buffer_is_set_within_its_range() {
        let args = Args::try_parse_from(["x", "--stream-buffer", "2"]).unwrap();
        let mut xds = crate::ads::XdsConfig::default();
        args.push.apply(&mut xds);
        assert_eq!(xds.stream_buffer, 2);
        for bad in ["0", "1025", "many"] {
            assert!(
                Args::try_parse_from(["x", "--stream-buffer", bad]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn write_coalescing_is_set_within_its_range() {
        let mut xds = crate::ads::XdsConfig::default();
        assert_eq!(xds.write_coalesce_bytes, 64 * 1024);
        let args = Args::try_parse_from(["x", "--write-coalesce-bytes", "0"]).unwrap();
        args.push.apply(&mut xds);
        assert_eq!(xds.write_coalesce_bytes, 0, "off");
        for bad in ["16777217", "-1", "big"] {
            assert!(
                Args::try_parse_from(["x", "--write-coalesce-bytes", bad]).is_err(),
                "{bad}"
            );
        }
    }
}

#[cfg(test)]
mod listen_tests {
    use super::*;

    #[test]
    fn a_certificate_needs_its_key() {
        assert!(Args::try_parse_from(["x", "--tls-cert-file", "c.pem"]).is_err());
        let args = Args::try_parse_from(["x"]).unwrap();
        assert_eq!(
            args.listen.plaintext_xds_addr, None,
            "plaintext is off by default"
        );
        assert_eq!(args.listen.secure_xds_addr.to_string(), "127.0.0.1:15012");
    }
}
