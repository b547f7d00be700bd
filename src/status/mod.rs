//! `shoal status`: did a config revision reach the proxies it concerned? Asks every edge's
//! `/debug/push_status` and sums the answers ([`fleet`]); `--wait` polls until the
//! revision converged, a proxy rejected it, or the timeout.

mod fleet;

use crate::edges::{Edges, EdgesArgs};
use crate::output::{Format, OutputArgs};
use fleet::{EdgeAnswer, FleetStatus, Outcome, Verdict};
use shoal_edge::convergence::PushStatus;
use shoal_infra::cli::duration;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output: a row per edge, the totals, the rejections and a verdict line, \
    or with -o json {revision, verdict, totals, edges: [...]}.\n\nExit status: 0 when every proxy the revision concerned ACKed it \
    (or left), 1 when a proxy NACKed it, 2 when proxies are still to answer (at the end of \
    --wait: its timeout), 3 when an edge could not be asked or has forgotten the revision."
)]
pub struct StatusArgs {
    #[command(flatten)]
    edges: EdgesArgs,
    /// The config revision to follow (a snapshot version; ingest logs `push published`
    /// with each push's); default: the newest any edge pushed.
    #[arg(long)]
    revision: Option<u64>,
    /// Wait until the revision converged or was rejected.
    #[arg(long)]
    wait: bool,
    /// How long `--wait` waits.
    #[arg(long, default_value = "60s", value_parser = duration)]
    timeout: Duration,
    #[command(flatten)]
    output: OutputArgs,
}

/// How often `--wait` asks again.
const POLL: Duration = Duration::from_millis(250);

#[tokio::main(flavor = "current_thread")]
pub async fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let asker = Asker(Edges::new(&args.edges).await?);
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
    match args.output.output {
        Format::Text => print!("{}", status.text()),
        Format::Json => println!("{}", serde_json::to_string_pretty(&status)?),
    }
    if args.wait && matches!(status.verdict, Verdict::Pending | Verdict::Unknown) {
        eprintln!("shoal status: not converged within {:?}", args.timeout);
    }
    Ok(ExitCode::from(status.verdict.exit_code()))
}

struct Asker(Edges);

impl Asker {
    /// Every edge's answer about `revision` (the latest each pushed when `None`).
    async fn ask(&self, revision: Option<u64>) -> Vec<EdgeAnswer> {
        let page = match revision {
            Some(r) => format!("push_status?revision={r}"),
            None => "push_status".to_string(),
        };
        let asks = self.0.addrs().iter().map(|addr| {
            let page = page.as_str();
            async move {
                let answer = self.0.get::<Named<PushStatus>>(addr, page).await;
                EdgeAnswer {
                    addr: addr.clone(),
                    edge: answer.as_ref().ok().and_then(|a| a.edge.clone()),
                    outcome: match answer {
                        Ok(a) => Outcome::Answered(a.inner),
                        Err(why) => Outcome::Failed(why),
                    },
                }
            }
        });
        futures::future::join_all(asks).await
    }

    /// The newest revision any edge pushed.
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
}

/// An edge's answer with the edge's ID beside it.
#[derive(serde::Deserialize)]
struct Named<T> {
    edge: Option<String>,
    #[serde(flatten)]
    inner: T,
}

#[cfg(test)]
mod tests;
