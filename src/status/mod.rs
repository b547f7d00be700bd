//! `shoal status`: did a config revision reach the proxies it concerned? Asks every edge's
//! `/debug/push_status` and sums the answers ([`fleet`]); `--wait` polls until the
//! revision converged, a proxy rejected it, or the timeout.

mod fleet;

use fleet::{EdgeAnswer, FleetStatus, Outcome, Verdict};
use shoal_edge::convergence::PushStatus;
use shoal_infra::cli::{UsageError, duration};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 when every proxy the revision concerned ACKed it \
    (or left), 1 when a proxy NACKed it, 2 when proxies are still to answer (at the end of \
    --wait: its timeout), 3 when an edge could not be asked or has forgotten the revision."
)]
pub struct StatusArgs {
    /// The admin addresses (`--http-addr`) of the edges, comma-separated; against the
    /// all-in-one, its `--http-addr`.
    #[arg(long, env = "SHOAL_EDGES", value_delimiter = ',', required = true)]
    edges: Vec<String>,
    /// The config revision to follow (a snapshot version, as ingest logs it); default: the
    /// newest any edge pushed.
    #[arg(long)]
    revision: Option<u64>,
    /// Wait until the revision converged or was rejected.
    #[arg(long)]
    wait: bool,
    /// How long `--wait` waits.
    #[arg(long, default_value = "60s", value_parser = duration)]
    timeout: Duration,
    /// A bearer token for edges on other hosts (their `/debug` pages answer other callers
    /// only with a token of the control plane's namespace).
    #[arg(long, env = "SHOAL_STATUS_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Format {
    /// A table per edge, the totals, the rejections and a verdict line.
    Text,
    /// `{revision, verdict, totals, edges: [...]}`.
    Json,
}

/// How often `--wait` asks again.
const POLL: Duration = Duration::from_millis(250);
/// How long one edge has to answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

#[tokio::main(flavor = "current_thread")]
pub async fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| UsageError(format!("--token-file {}: {e}", path.display())))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let client = reqwest::Client::builder().timeout(ASK_TIMEOUT).build()?;
    let asker = Asker {
        client,
        token,
        edges: args.edges.iter().map(|e| e.trim().to_string()).collect(),
    };
    let deadline = Instant::now() + args.timeout;
    let mut revision = args.revision;
    let status = loop {
        // The latest by default: the newest any edge pushed, fixed once known.
        if revision.is_none() {
            revision = asker.latest().await;
        }
        let status = FleetStatus::new(revision, asker.ask(revision).await);
        let waiting = matches!(status.verdict, Verdict::Pending | Verdict::Unknown);
        if !args.wait || !waiting || Instant::now() + POLL > deadline {
            break status;
        }
        tokio::time::sleep(POLL).await;
    };
    match args.output {
        Format::Text => print!("{}", status.text()),
        Format::Json => println!("{}", serde_json::to_string_pretty(&status)?),
    }
    if args.wait && matches!(status.verdict, Verdict::Pending | Verdict::Unknown) {
        eprintln!("shoal status: not converged within {:?}", args.timeout);
    }
    Ok(ExitCode::from(status.verdict.exit_code()))
}

struct Asker {
    client: reqwest::Client,
    token: Option<String>,
    edges: Vec<String>,
}

impl Asker {
    /// Every edge's answer about `revision` (the latest each pushed when `None`).
    async fn ask(&self, revision: Option<u64>) -> Vec<EdgeAnswer> {
        let asks = self.edges.iter().map(|addr| self.ask_one(addr, revision));
        futures::future::join_all(asks).await
    }

    /// The newest revision any edge pushed (or holds, where none pushed one).
    async fn latest(&self) -> Option<u64> {
        self.ask(None)
            .await
            .iter()
            .filter_map(|a| match &a.outcome {
                Outcome::Answered(s) => s.latest_pushed,
                Outcome::Failed(_) => None,
            })
            .max()
    }

    async fn ask_one(&self, addr: &str, revision: Option<u64>) -> EdgeAnswer {
        let base = if addr.contains("://") {
            addr.to_string()
        } else {
            format!("http://{addr}")
        };
        let mut url = format!("{}/debug/push_status", base.trim_end_matches('/'));
        if let Some(r) = revision {
            url.push_str(&format!("?revision={r}"));
        }
        let mut request = self.client.get(&url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let answer = async {
            let response = request.send().await.map_err(|e| format!("{url}: {e}"))?;
            let code = response.status();
            let body = response.text().await.map_err(|e| format!("{url}: {e}"))?;
            if !code.is_success() {
                return Err(format!("{url}: HTTP {code}: {}", body.trim()));
            }
            let value: serde_json::Value =
                serde_json::from_str(&body).map_err(|e| format!("{url}: not JSON: {e}"))?;
            let edge = value
                .get("edge")
                .and_then(|e| e.as_str())
                .map(str::to_string);
            if let Some(error) = value.get("error").and_then(|e| e.as_str()) {
                return Err(format!("{url}: {error}"));
            }
            let status: PushStatus = serde_json::from_value(value)
                .map_err(|e| format!("{url}: not a push status (is this an edge?): {e}"))?;
            Ok((edge, status))
        };
        match answer.await {
            Ok((edge, status)) => EdgeAnswer {
                addr: addr.to_string(),
                edge,
                outcome: Outcome::Answered(status),
            },
            Err(why) => EdgeAnswer {
                addr: addr.to_string(),
                edge: None,
                outcome: Outcome::Failed(why),
            },
        }
    }
}

#[cfg(test)]
mod tests;
