//! `shoal proxy-status [PROXY]`: every proxy across the edges in `istioctl proxy-status`'s
//! columns, from each edge's `/debug/syncz`, or one proxy's types in full.

mod table;

use crate::edges::{Edges, EdgesArgs};
use crate::output::{Format, OutputArgs};
use std::process::ExitCode;
use table::{Row, Synced};

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output: the table (one proxy: its types in full), or with -o json an \
    array of rows, each with every type's state and versions.\n\nExit status: 0 when every proxy shown is synced (or the one asked \
    for is), 1 when one is NACKED or STALE, 2 when the proxy asked for is not connected, \
    3 when an edge could not be asked."
)]
pub struct ProxyStatusArgs {
    /// One proxy: its ID (`sidecar~IP~POD.NS~NS.svc.cluster.local`) or `POD.NS`.
    proxy: Option<String>,
    #[command(flatten)]
    edges: EdgesArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[tokio::main(flavor = "current_thread")]
pub async fn run(args: ProxyStatusArgs) -> anyhow::Result<ExitCode> {
    let edges = Edges::new(&args.edges).await?;
    let asks = edges.addrs().iter().map(|addr| {
        let edges = &edges;
        async move {
            // The edge's ID names it in the table; its address where it does not say.
            let name = match edges.get::<Named>(addr, "push_status").await {
                Ok(Named { edge: Some(id) }) => id,
                Ok(Named { edge: None }) => addr.clone(),
                Err(why) => {
                    eprintln!("shoal proxy-status: naming the edge by its address: {why}");
                    addr.clone()
                }
            };
            let listed = edges.get::<Vec<Synced>>(addr, "syncz").await;
            (name, listed)
        }
    });
    let mut rows = Vec::new();
    let mut failed = false;
    for (edge, listed) in futures::future::join_all(asks).await {
        match listed {
            Ok(list) => rows.extend(list.into_iter().map(|s| Row::new(s, &edge))),
            Err(why) => {
                eprintln!("shoal proxy-status: {why}");
                failed = true;
            }
        }
    }
    if let Some(wanted) = &args.proxy {
        rows.retain(|r| r.proxy == *wanted || r.name == *wanted);
        if rows.is_empty() {
            eprintln!("shoal proxy-status: {wanted} is not connected to any edge asked");
            return Ok(ExitCode::from(if failed { 3 } else { 2 }));
        }
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.edge.cmp(&b.edge)));
    match (args.output.output, &args.proxy) {
        (Format::Json, _) => println!("{}", serde_json::to_string_pretty(&rows)?),
        (Format::Text, Some(_)) => rows.iter().for_each(|r| print!("{}", table::detail(r))),
        (Format::Text, None) => print!("{}", table::table(&rows)),
    }
    let code = if failed {
        3
    } else if rows.iter().all(Row::synced) {
        0
    } else {
        1
    };
    Ok(ExitCode::from(code))
}

/// The edge's ID, as `/debug/push_status` gives it.
#[derive(serde::Deserialize)]
struct Named {
    edge: Option<String>,
}

#[cfg(test)]
mod tests;
