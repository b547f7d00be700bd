//! `shoal proxy-config PROXY [--type T]`: one proxy's config in Envoy's own `/config_dump`
//! JSON, as it ACKed it, from the edge serving it (`/debug/config_dump`): what
//! `istioctl proxy-config all <pod> -o json` shows, without asking the proxy.

use crate::edges::{Edges, EdgesArgs, query_value};
use crate::proxy_status::{Row, gather};
use serde_json::Value;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Output: Envoy's config dump JSON ({\"configs\": [ClustersConfigDump, \
    ListenersConfigDump, RoutesConfigDump, SecretsConfigDump, EndpointsConfigDump]}), each \
    resource as the proxy last ACKed it, private keys redacted; with --type, that one \
    dump.\n\nExit status: 0 printed, 2 when the proxy is not connected to any edge asked, \
    3 when an edge could not be asked."
)]
pub struct ProxyConfigArgs {
    /// The proxy: its ID (`sidecar~IP~POD.NS~NS.svc.cluster.local`) or `POD.NS`.
    proxy: String,
    /// Only this type's dump.
    #[arg(long = "type", value_enum)]
    kind: Option<Kind>,
    #[command(flatten)]
    edges: EdgesArgs,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Kind {
    Cluster,
    Listener,
    Route,
    Secret,
    Endpoint,
}

impl Kind {
    /// The `@type` of its entry in the dump.
    fn dump_type(self) -> &'static str {
        match self {
            Kind::Cluster => "ClustersConfigDump",
            Kind::Listener => "ListenersConfigDump",
            Kind::Route => "RoutesConfigDump",
            Kind::Secret => "SecretsConfigDump",
            Kind::Endpoint => "EndpointsConfigDump",
        }
    }
}

#[tokio::main(flavor = "current_thread")]
pub async fn run(args: ProxyConfigArgs) -> anyhow::Result<ExitCode> {
    let edges = Edges::new(&args.edges).await?;
    // A full proxy ID is asked of each edge directly; `POD.NS` is looked up in their
    // stream lists first.
    let candidates: Vec<(String, String)> = if args.proxy.contains('~') {
        let addrs = edges.addrs().iter();
        addrs.map(|a| (args.proxy.clone(), a.clone())).collect()
    } else {
        let (rows, _failed) = gather(&edges).await;
        rows.into_iter()
            .filter(|r: &Row| r.name == args.proxy)
            .map(|r| (r.proxy, r.admin))
            .collect()
    };
    let mut failed = false;
    for (proxy, admin) in candidates {
        let page = format!("config_dump?proxyID={}", query_value(&proxy));
        match edges.get::<Value>(&admin, &page).await {
            Ok(dump) => {
                let shown = match args.kind {
                    None => dump,
                    Some(kind) => only(&dump, kind.dump_type()),
                };
                println!("{}", serde_json::to_string_pretty(&shown)?);
                return Ok(ExitCode::SUCCESS);
            }
            Err(why) if why.contains("is not connected to this edge") => {}
            Err(why) => {
                eprintln!("shoal proxy-config: {why}");
                failed = true;
            }
        }
    }
    eprintln!(
        "shoal proxy-config: {} is not connected to any edge asked",
        args.proxy
    );
    Ok(ExitCode::from(if failed { 3 } else { 2 }))
}

/// The dump's entry of `@type` `…/envoy.admin.v3.<dump_type>` (an empty one if none).
fn only(dump: &Value, dump_type: &str) -> Value {
    dump["configs"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|d| d["@type"].as_str().is_some_and(|t| t.ends_with(&format!(".{dump_type}"))))
        })
        .cloned()
        .unwrap_or_else(|| serde_json::json!({ "@type": format!("type.googleapis.com/envoy.admin.v3.{dump_type}") }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_picks_its_dump() {
        let dump = serde_json::json!({"configs": [
            {"@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump", "version_info": "3"},
            {"@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump"},
        ]});
        assert_eq!(only(&dump, Kind::Cluster.dump_type())["version_info"], "3");
        assert_eq!(
            only(&dump, Kind::Route.dump_type())["@type"],
            "type.googleapis.com/envoy.admin.v3.RoutesConfigDump"
        );
    }
}
