//! `loadtest ca`: N concurrent `CreateCertificate` callers against the CA on the secure
//! port, as N agents starting at once would be.
//!
//! ```text
//!  before the clock: per caller a P-256 key, a CSR for spiffe://<td>/ns/ns-<i mod K>/sa/loadtest-<i>,
//!                    a token for that identity; C connections (TLS per --tls-ca), each caller ready on one
//!  ─► every caller calls at once ─► per call: latency (its send to its response), status
//!  ─► Report: p50/p90/p99/max, throughput, errors (by status), edge CPU and memory
//! ```

mod report;

pub use report::CaReport;

use crate::proxy::transport::{self, TransportError};
use crate::run::procfs;
use crate::secure::Security;
use rcgen::{CertificateParams, DistinguishedName, KeyPair, SanType};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use shoal_proto::security::ca::api::{
    CREATE_CERTIFICATE_PATH, IstioCertificateRequest, IstioCertificateResponse,
};
use shoal_test_support::meshgen::namespace_name;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tonic::metadata::MetadataValue;

#[derive(Clone, Debug)]
pub struct CaConfig {
    /// The edge's secure address (`host:port`).
    pub addr: String,
    /// Concurrent callers, one CSR each.
    pub callers: usize,
    /// HTTP/2 connections the callers share; `None`: one each, as every agent has its own.
    pub conns: Option<usize>,
    /// Namespaces ns-0.. the callers are spread over.
    pub namespaces: usize,
    pub trust_domain: String,
    /// Requested validity; zero: the CA's default.
    pub validity: Duration,
    /// Bound of each call, and of connecting.
    pub timeout: Duration,
    pub edge_pids: Vec<u32>,
    pub security: Security,
}

impl Default for CaConfig {
    fn default() -> Self {
        CaConfig {
            addr: "127.0.0.1:15012".into(),
            callers: 1000,
            conns: None,
            namespaces: 10,
            trust_domain: "cluster.local".into(),
            validity: Duration::ZERO,
            timeout: Duration::from_secs(60),
            edge_pids: Vec::new(),
            security: Security::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CaLoadError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("making caller {index}'s CSR: {reason}")]
    Csr { index: usize, reason: String },
}

/// What one caller sends.
struct Caller {
    spiffe_id: String,
    csr: String,
    authorization: Option<MetadataValue<tonic::metadata::Ascii>>,
}

/// One call's result: its latency, or what failed.
type Outcome = Result<Duration, String>;

/// Runs the CA load described by `config`.
pub async fn run_ca(config: CaConfig) -> Result<CaReport, CaLoadError> {
    let n = config.callers;
    if n == 0 {
        return Err(CaLoadError::Config("need --callers > 0".into()));
    }
    let conns = config.conns.unwrap_or(n).clamp(1, n);
    let callers = (0..n)
        .map(|i| caller(&config, i))
        .collect::<Result<Vec<_>, _>>()?;
    let mut channels = Vec::with_capacity(conns);
    for _ in 0..conns {
        let dial = &config.security.dial;
        channels.push(transport::connect(&config.addr, config.timeout, dial).await?);
    }

    let pids: Vec<String> = config.edge_pids.iter().map(u32::to_string).collect();
    let sample = || -> Vec<procfs::ProcSample> {
        pids.iter()
            .map(|p| procfs::sample(p).unwrap_or_default())
            .collect()
    };
    let (start_tx, start) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for (i, caller) in callers.into_iter().enumerate() {
        let channel = channels[i % conns].clone();
        let (mut start, timeout) = (start.clone(), config.timeout);
        let validity = config.validity.as_secs() as i64;
        tasks.spawn(async move {
            let mut grpc = tonic::client::Grpc::new(channel);
            let ready = grpc.ready().await.map_err(|e| e.to_string());
            let _ = start.wait_for(|go| *go).await;
            ready?;
            let sent = Instant::now();
            let call = create_certificate(&mut grpc, &caller, validity);
            let chain = tokio::time::timeout(timeout, call)
                .await
                .map_err(|_| format!("no answer within {timeout:?}"))??;
            let latency = sent.elapsed();
            check_chain(&chain, &caller.spiffe_id)?;
            Ok(latency)
        });
    }
    // Let every task reach the start line before the clock starts.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = sample();
    let t0 = Instant::now();
    start_tx.send_replace(true);
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(n);
    while let Some(done) = tasks.join_next().await {
        outcomes.push(done.unwrap_or_else(|e| Err(format!("caller task: {e}"))));
    }
    let wall = t0.elapsed();
    let after = sample();
    Ok(CaReport::new(
        &config, conns, outcomes, wall, &pids, &before, &after,
    ))
}

/// Caller `i`: its identity, a CSR for it (key made here, before the clock) and its token.
fn caller(config: &CaConfig, i: usize) -> Result<Caller, CaLoadError> {
    let csr_error = |reason: String| CaLoadError::Csr { index: i, reason };
    let namespace = namespace_name(i % config.namespaces.max(1));
    let service_account = format!("loadtest-{i}");
    let spiffe_id = format!(
        "spiffe://{}/ns/{namespace}/sa/{service_account}",
        config.trust_domain
    );
    let key = KeyPair::generate().map_err(|e| csr_error(e.to_string()))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    let uri = spiffe_id
        .clone()
        .try_into()
        .map_err(|e: rcgen::Error| csr_error(e.to_string()))?;
    params.subject_alt_names = vec![SanType::URI(uri)];
    let csr = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(|e| csr_error(e.to_string()))?;
    let authorization = config
        .security
        .authorization(&namespace, &service_account)
        .map(|h| {
            let text = h.to_str().expect("a bearer token is ASCII");
            MetadataValue::try_from(text).expect("a bearer token is a valid metadata value")
        });
    Ok(Caller {
        spiffe_id,
        csr,
        authorization,
    })
}

async fn create_certificate(
    grpc: &mut tonic::client::Grpc<tonic::transport::Channel>,
    caller: &Caller,
    validity: i64,
) -> Result<IstioCertificateResponse, String> {
    let mut req = tonic::Request::new(IstioCertificateRequest {
        csr: caller.csr.clone(),
        validity_duration: validity,
    });
    if let Some(auth) = &caller.authorization {
        req.metadata_mut().insert("authorization", auth.clone());
    }
    let codec =
        tonic_prost::ProstCodec::<IstioCertificateRequest, IstioCertificateResponse>::default();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(CREATE_CERTIFICATE_PATH);
    grpc.unary(req, path, codec)
        .await
        .map(tonic::Response::into_inner)
        .map_err(|s| format!("{:?}: {}", s.code(), s.message()))
}

/// A chain is the leaf, its intermediates and the root, each PEM; the leaf is for the
/// caller (its SPIFFE ID appears in it as an IA5String, so a byte search finds it).
fn check_chain(resp: &IstioCertificateResponse, spiffe_id: &str) -> Result<(), String> {
    let Some(leaf) = resp.cert_chain.first() else {
        return Err("an empty certificate chain".into());
    };
    let der = CertificateDer::from_pem_slice(leaf.as_bytes())
        .map_err(|e| format!("the leaf is not a PEM CERTIFICATE: {e}"))?;
    if !der
        .windows(spiffe_id.len())
        .any(|w| w == spiffe_id.as_bytes())
    {
        return Err(format!("the leaf does not name {spiffe_id}"));
    }
    if resp.cert_chain.len() < 2 {
        return Err("the chain has no root".into());
    }
    Ok(())
}
