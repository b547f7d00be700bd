//! Asking the edges' admin servers (`--http-addr`) for their debug pages: what
//! `shoal status` and `shoal proxy-status` share. The edges are given, or found in the
//! membership bucket on NATS.

use anyhow::Context;
use serde::de::DeserializeOwned;
use shoal_infra::cli::{NatsArgs, UsageError};
use shoal_infra::nats::{NatsMembership, NatsMembershipConfig};
use shoal_proto::transport::Membership;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Which edges to ask, and how to prove who asks.
#[derive(Debug, clap::Args)]
pub struct EdgesArgs {
    /// The admin addresses (`--http-addr`) of the edges, comma-separated; against the
    /// all-in-one, its `--http-addr`. Without it, the live edges of the membership bucket
    /// on `--nats-url`, each at its announced IP and `--admin-port`.
    #[arg(long, env = "SHOAL_EDGES", value_delimiter = ',')]
    edges: Vec<String>,
    #[command(flatten)]
    nats: NatsArgs,
    /// The edges' admin port, where they are found through NATS (the chart's 15014).
    #[arg(long, env = "SHOAL_ADMIN_PORT", default_value_t = 15014)]
    admin_port: u16,
    /// A file holding a bearer token, for edges on other hosts (their `/debug` pages
    /// answer other callers only with a token of the control plane's namespace).
    #[arg(long, env = "SHOAL_TOKEN_FILE")]
    token_file: Option<PathBuf>,
}

/// How long one edge has to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of the edges named by [`EdgesArgs`].
pub struct Edges {
    client: reqwest::Client,
    token: Option<String>,
    addrs: Vec<String>,
}

impl Edges {
    pub async fn new(args: &EdgesArgs) -> anyhow::Result<Self> {
        let token = match &args.token_file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| UsageError(format!("--token-file {}: {e}", path.display())))?
                    .trim()
                    .to_string(),
            ),
            None => None,
        };
        Ok(Edges {
            client: reqwest::Client::builder().timeout(ASK_TIMEOUT).build()?,
            token,
            addrs: match args.edges.is_empty() {
                false => args.edges.iter().map(|e| e.trim().to_string()).collect(),
                true => discover(&args.nats, args.admin_port).await?,
            },
        })
    }

    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// `GET /debug/<page>` on the edge at `addr`, as JSON of type `T`; the error names the
    /// URL and what went wrong, or the `error` the page answered.
    pub async fn get<T: DeserializeOwned>(&self, addr: &str, page: &str) -> Result<T, String> {
        let base = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("http://{addr}")
        };
        let url = format!("{}/debug/{page}", base.trim_end_matches('/'));
        let mut request = self.client.get(&url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
        let code = response.status();
        let body = response.bytes().await.map_err(|e| format!("{url}: {e}"))?;
        if !code.is_success() {
            let text = String::from_utf8_lossy(&body);
            return Err(format!("{url}: HTTP {code}: {}", text.trim()));
        }
        if let Ok(answer) = serde_json::from_slice::<PageError>(&body) {
            return Err(format!("{url}: {}", answer.error));
        }
        serde_json::from_slice(&body)
            .map_err(|e| format!("{url}: not the answer expected (is this an edge?): {e}"))
    }
}

/// The admin addresses of the live edges in the membership bucket: each edge's announced
/// IP (`--advertise-ip`) at `admin_port`.
async fn discover(nats: &NatsArgs, admin_port: u16) -> anyhow::Result<Vec<String>> {
    let client = nats.connect().await.with_context(|| {
        format!(
            "finding the edges through NATS at {} (or give --edges)",
            nats.nats_url
        )
    })?;
    let members = NatsMembership::open(client, NatsMembershipConfig::default())
        .await
        .context("opening the membership bucket")?
        .members()
        .await
        .context("listing the live edges")?;
    if members.is_empty() {
        anyhow::bail!("no live edge in the membership bucket at {}", nats.nats_url);
    }
    members
        .iter()
        .map(|m| {
            let addr: SocketAddr = m.xds_addr.parse().with_context(|| {
                format!("edge {} announces {:?}, not an address", m.id, m.xds_addr)
            })?;
            Ok(SocketAddr::new(addr.ip(), admin_port).to_string())
        })
        .collect()
}

/// `value` for a URL's query: every byte but the unreserved ones percent-encoded.
pub fn query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What a debug page answers to a query it cannot take.
#[derive(serde::Deserialize)]
struct PageError {
    error: String,
}
