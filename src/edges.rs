//! Asking the edges' admin servers (`--http-addr`) for their debug pages: what
//! `shoal status` and `shoal proxy-status` share.

use serde::de::DeserializeOwned;
use shoal_infra::cli::UsageError;
use std::path::PathBuf;
use std::time::Duration;

/// Which edges to ask, and how to prove who asks.
#[derive(Debug, clap::Args)]
pub struct EdgesArgs {
    /// The admin addresses (`--http-addr`) of the edges, comma-separated; against the
    /// all-in-one, its `--http-addr`.
    #[arg(long, env = "SHOAL_EDGES", value_delimiter = ',', required = true)]
    edges: Vec<String>,
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
    pub fn new(args: &EdgesArgs) -> anyhow::Result<Self> {
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
            addrs: args.edges.iter().map(|e| e.trim().to_string()).collect(),
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

/// What a debug page answers to a query it cannot take.
#[derive(serde::Deserialize)]
struct PageError {
    error: String,
}
