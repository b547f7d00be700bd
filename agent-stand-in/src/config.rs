//! The stand-in's settings: pilot-agent's environment variables where it has one, a
//! flag otherwise.

use crate::duration;
use anyhow::{Context, bail};
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "agent-stand-in",
    about = "A stand-in for Istio's pilot-agent (tests)"
)]
pub struct Args {
    /// The folder the agent's sockets live under (the pod's `/`).
    #[arg(long, default_value = ".")]
    pub work_dir: PathBuf,
    /// The discovery address (host:port); else `PROXY_CONFIG`'s `discoveryAddress`.
    #[arg(long)]
    pub discovery_address: Option<String>,
    /// The mesh config's proxy config (JSON or YAML), as the injector sets it.
    #[arg(long, env = "PROXY_CONFIG")]
    pub proxy_config: Option<String>,
    /// The CA's address; the discovery address when unset (as the agent).
    #[arg(long, env = "CA_ADDR")]
    pub ca_addr: Option<String>,
    /// The root PEM pinned for the discovery server.
    #[arg(long, env = "XDS_ROOT_CA")]
    pub xds_root_ca: Option<PathBuf>,
    /// The root PEM pinned for the CA; `XDS_ROOT_CA` when unset.
    #[arg(long, env = "CA_ROOT_CA")]
    pub ca_root_ca: Option<PathBuf>,
    /// The name the server's certificate must carry; the discovery host when unset.
    #[arg(long, env = "ISTIOD_SAN")]
    pub istiod_san: Option<String>,
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: String,
    #[arg(long, env = "SERVICE_ACCOUNT")]
    pub service_account: String,
    #[arg(long, env = "TRUST_DOMAIN", default_value = "cluster.local")]
    pub trust_domain: String,
    /// The projected service-account token (audience istio-ca), re-read on every call.
    #[arg(long, default_value = "/var/run/secrets/tokens/istio-token")]
    pub token_path: PathBuf,
    /// The certificate TTL requested (Go duration).
    #[arg(long, env = "SECRET_TTL", default_value = "24h0m0s")]
    pub secret_ttl: String,
    /// Renew when this fraction of the certificate's life is left.
    #[arg(long, env = "SECRET_GRACE_PERIOD_RATIO", default_value_t = 0.5)]
    pub secret_grace_period_ratio: f64,
    /// The longest wait between two failed certificate requests (Go duration).
    #[arg(long, default_value = "30s")]
    pub ca_retry_max: String,
    /// How long one CreateCertificate call may take (Go duration).
    #[arg(long, default_value = "10s")]
    pub ca_timeout: String,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub work_dir: PathBuf,
    pub discovery_address: String,
    pub ca_address: String,
    pub server_name: String,
    pub root_ca_path: PathBuf,
    pub root_ca_pem: String,
    pub xds_root_ca_pem: String,
    pub spiffe_id: String,
    pub token_path: PathBuf,
    pub secret_ttl: Duration,
    pub grace_ratio: f64,
    pub retry_max: Duration,
    pub ca_timeout: Duration,
}

/// istiod's default name, the agent's default discovery address.
const DEFAULT_DISCOVERY: &str = "istiod.istio-system.svc:15012";

impl Config {
    pub fn from_args(a: Args) -> anyhow::Result<Config> {
        let discovery_address = match (a.discovery_address, a.proxy_config.as_deref()) {
            (Some(d), _) => d,
            (None, Some(pc)) if !pc.trim().is_empty() => {
                discovery_from_proxy_config(pc)?.unwrap_or_else(|| DEFAULT_DISCOVERY.to_string())
            }
            _ => DEFAULT_DISCOVERY.to_string(),
        };
        let ca_address = a.ca_addr.unwrap_or_else(|| discovery_address.clone());
        let server_name = match a.istiod_san {
            Some(n) => n,
            None => host_of(&discovery_address).to_string(),
        };
        let default_root = a.work_dir.join("var/run/secrets/istio/root-cert.pem");
        let xds_root = a.xds_root_ca.unwrap_or(default_root);
        let ca_root = a.ca_root_ca.unwrap_or_else(|| xds_root.clone());
        let read = |p: &PathBuf| -> anyhow::Result<String> {
            if p.as_os_str() == "SYSTEM" {
                bail!("root \"SYSTEM\" (the OS trust store) is not supported by the stand-in");
            }
            std::fs::read_to_string(p).with_context(|| format!("read root {}", p.display()))
        };
        let root_ca_pem = read(&ca_root)?;
        let xds_root_ca_pem = read(&xds_root)?;
        if !(0.0..1.0).contains(&a.secret_grace_period_ratio) {
            bail!(
                "SECRET_GRACE_PERIOD_RATIO {} is not in [0, 1)",
                a.secret_grace_period_ratio
            );
        }
        let dur =
            |name: &str, v: &str| duration::parse(v).map_err(|e| anyhow::anyhow!("{name}: {e}"));
        Ok(Config {
            spiffe_id: format!(
                "spiffe://{}/ns/{}/sa/{}",
                a.trust_domain, a.pod_namespace, a.service_account
            ),
            work_dir: a.work_dir,
            discovery_address,
            ca_address,
            server_name,
            root_ca_path: ca_root,
            root_ca_pem,
            xds_root_ca_pem,
            token_path: a.token_path,
            secret_ttl: dur("SECRET_TTL", &a.secret_ttl)?,
            grace_ratio: a.secret_grace_period_ratio,
            retry_max: dur("--ca-retry-max", &a.ca_retry_max)?,
            ca_timeout: dur("--ca-timeout", &a.ca_timeout)?,
        })
    }
}

/// `discoveryAddress` from a ProxyConfig document (JSON is YAML).
fn discovery_from_proxy_config(text: &str) -> anyhow::Result<Option<String>> {
    let doc: serde_norway::Value =
        serde_norway::from_str(text).context("PROXY_CONFIG is not YAML or JSON")?;
    Ok(doc
        .get("discoveryAddress")
        .and_then(|v| v.as_str())
        .map(str::to_string))
}

/// The host of `host:port` (IPv6 in brackets).
pub fn host_of(addr: &str) -> &str {
    let host = match addr.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => addr,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_address_from_proxy_config() {
        let pc = r#"{"discoveryAddress": "shoal-edge.istio-system.svc:15012"}"#;
        assert_eq!(
            discovery_from_proxy_config(pc).unwrap().as_deref(),
            Some("shoal-edge.istio-system.svc:15012")
        );
        let yaml = "discoveryAddress: istiod.istio-system.svc:15012\n";
        assert_eq!(
            discovery_from_proxy_config(yaml).unwrap().as_deref(),
            Some("istiod.istio-system.svc:15012")
        );
        assert_eq!(
            host_of("istiod.istio-system.svc:15012"),
            "istiod.istio-system.svc"
        );
        assert_eq!(host_of("[::1]:15012"), "::1");
    }
}
