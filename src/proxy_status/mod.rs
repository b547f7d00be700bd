//! `shoal proxy-status [PROXY]`: every proxy across the edges in `istioctl proxy-status`'s
//! columns, from each edge's `/debug/syncz`; or one proxy's types in full, and the diff
//! between what it ACKed and what its edge would send it now (`/debug/config_diff`).

mod diff;
mod table;

use crate::edges::{Edges, EdgesArgs, query_value};
use crate::output::{Format, OutputArgs};
use std::process::ExitCode;
pub(crate) use table::Row;
use table::Synced;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output: the table (one proxy: its types in full, then per type whether \
    what it ACKed matches what its edge would send now, with a unified diff of each \
    resource that differs, in Envoy's JSON), or with -o json an array of rows, each with \
    every type's state and versions (one proxy: and the edge's config_diff).\n\nExit status: 0 when every proxy shown is synced (or the one asked \
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
    let (mut rows, failed) = gather(&edges).await;
    if let Some(wanted) = &args.proxy {
        rows.retain(|r| r.proxy == *wanted || r.name == *wanted);
        if rows.is_empty() {
            eprintln!("shoal proxy-status: {wanted} is not connected to any edge asked");
            return Ok(ExitCode::from(if failed { 3 } else { 2 }));
        }
        for row in &mut rows {
            let page = format!("config_diff?proxyID={}", query_value(&row.proxy));
            match edges.get::<serde_json::Value>(&row.admin, &page).await {
                Ok(diff) => row.config_diff = Some(diff),
                Err(why) => eprintln!("shoal proxy-status: comparing its config: {why}"),
            }
        }
    }
    rows.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.edge.cmp(&b.edge)));
    match (args.output.output, &args.proxy) {
        (Format::Json, _) => println!("{}", serde_json::to_string_pretty(&rows)?),
        (Format::Text, Some(_)) => {
            for r in &rows {
                print!("{}", table::detail(r));
                let parsed = r.config_diff.clone().map(serde_json::from_value);
                match parsed {
                    Some(Ok(d)) => print!("{}", diff::render(&d)),
                    Some(Err(e)) => eprintln!("shoal proxy-status: the edge's diff: {e}"),
                    None => {}
                }
            }
        }
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

/// Every proxy on every edge, and whether some edge could not be asked (said on stderr).
pub(crate) async fn gather(edges: &Edges) -> (Vec<Row>, bool) {
    let asks = edges.addrs().iter().map(|addr| async move {
        // The edge's ID names it in the table; its address where it does not say.
        let name = match edges.get::<Named>(addr, "push_status").await {
            Ok(Named { edge: Some(id) }) => id,
            Ok(Named { edge: None }) => addr.clone(),
            Err(why) => {
                eprintln!("shoal: naming the edge by its address: {why}");
                addr.clone()
            }
        };
        let listed = edges.get::<Vec<Synced>>(addr, "syncz").await;
        (name, addr, listed)
    });
    let mut rows = Vec::new();
    let mut failed = false;
    for (edge, addr, listed) in futures::future::join_all(asks).await {
        match listed {
            Ok(list) => rows.extend(list.into_iter().map(|s| Row::new(s, &edge, addr))),
            Err(why) => {
                eprintln!("shoal: {why}");
                failed = true;
            }
        }
    }
    (rows, failed)
}

/// The edge's ID, as `/debug/push_status` gives it.
#[derive(serde::Deserialize)]
struct Named {
    edge: Option<String>,
}

#[cfg(test)]
mod tests;
