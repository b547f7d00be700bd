//! An **istiod stand-in**: not istiod, and not a complete control plane. It stands in
//! for istiod in the migration test (no istiod can run here), serving what istiod serves
//! a sidecar for the mesh's mTLS, shaped as istiod generates it, so that workloads it
//! serves and workloads Shoal serves must interoperate as they would under a real move.
//!
//! What it does, on one TLS port (the name `istiod.istio-system.svc` on a serving
//! certificate from the plug-in intermediate, as istiod with `cacerts`):
//! - **CA**: `IstioCertificateService/CreateCertificate`, signing with istiod's plug-in
//!   files (`cacerts`: the same ones Shoal reads, so both sign under one root), the
//!   caller's service-account token verified against the issuer's JWKS. The signing and
//!   the token check reuse Shoal's CA and JWT code (istiod's would sign the same
//!   certificate from the same files).
//! - **SotW ADS** ([`ads`]): CDS, EDS, LDS for a sidecar, from a static [`model`] the test
//!   writes and rewrites (as Kubernetes changes its EndpointSlices):
//!   `outbound|<port>||<host>` EDS clusters with auto mTLS ([`clusters`], [`tls`]), an
//!   outbound HTTP listener and a PERMISSIVE inbound listener ([`listeners`]).
//!
//! What real istiod does and this does not: watch Kubernetes and Istio config (the model
//! is given); sidecar injection; RDS (routes are inline), SDS, NDS, ECDS and Delta ADS;
//! `virtualOutbound`/`virtualInbound` on 15001/15006 with original_dst (the tests bind
//! pod addresses without iptables, as a Sidecar with captureMode NONE); PeerAuthentication
//! other than the default PERMISSIVE, DestinationRules, AuthorizationPolicies and every
//! traffic-management feature; protocol sniffing and TCP ports (HTTP/1.1 only); the
//! metadata-exchange and stats filters (istio-proxy extensions: `istio.alpn` is emulated
//! with upstream Envoy's `set_filter_state`); locality, circuit breakers, outlier
//! detection, the Blackhole/Passthrough clusters; debounced pushes, per-proxy scoping,
//! token audience rules beyond `istio-ca`, TokenReview, CA rotation (the files are read
//! once) and istiod's own certificate renewal; authorization of xDS streams (any TLS
//! client is served; istiod authenticates them).

pub mod ads;
pub mod clusters;
pub mod listeners;
pub mod model;
pub mod tls;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryServiceServer;
use envoy_types::pb::google::protobuf::Any;
use model::Model;
use prost::{Message, Name};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use shoal_edge::authn::{JwksAuthenticator, JwksConfig, JwksSource};
use shoal_edge::ca::CaService;
use shoal_proto::security::authn::jwt::JwtConfig;
use shoal_proto::security::ca::{CertPolicy, PluginCerts, SigningMaterial};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// The name istiod's serving certificate carries (agents check it: `ISTIOD_SAN`).
pub const ISTIOD_SAN: &str = "istiod.istio-system.svc";

pub fn any<M: Message + Name>(m: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: m.encode_to_vec(),
    }
}

pub struct IstiodStandIn {
    pub addr: SocketAddr,
    model: watch::Sender<ads::Versioned>,
    nacks: Arc<Mutex<Vec<String>>>,
    streams: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.join(file).display()))
}

impl IstiodStandIn {
    /// Serves on a free loopback port: the CA from the plug-in files in `cacerts`,
    /// tokens of `issuer` checked against the JWKS file `jwks`, ADS from `model`.
    pub async fn start(cacerts: &Path, issuer: &str, jwks: &Path, model: Model) -> IstiodStandIn {
        let files = PluginCerts {
            ca_cert: read(cacerts, "ca-cert.pem"),
            ca_key: read(cacerts, "ca-key.pem"),
            cert_chain: Some(read(cacerts, "cert-chain.pem")),
            root_cert: read(cacerts, "root-cert.pem"),
        };
        let now = SystemTime::now();
        let material = SigningMaterial::from_plugin(&files, now).expect("istiod's cacerts");
        let serving = material
            .issue_serving(&[ISTIOD_SAN.into()], None, Duration::from_secs(3600), now)
            .expect("istiod's serving certificate");
        let certs = CertificateDer::pem_slice_iter(serving.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("serving chain");
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes()).expect("serving key");
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("serving TLS config");
        tls.alpn_protocols = vec![b"h2".to_vec()];

        let authn = JwksAuthenticator::new(JwksConfig::new(
            JwtConfig::new(issuer, "cluster.local"),
            JwksSource::File(jwks.to_path_buf()),
        ))
        .expect("JWKS authenticator");
        let (material_tx, material_rx) = watch::channel(Arc::new(material));
        let ca = CaService::new(
            Arc::new(authn),
            material_rx,
            CertPolicy::default(),
            &mut prometheus_client::registry::Registry::default(),
        );

        let (model_tx, model_rx) = watch::channel((1, Arc::new(model)));
        let (nacks, streams) = (Arc::default(), Arc::default());
        let ads = ads::Ads {
            model: model_rx,
            nacks: Arc::clone(&nacks),
            streams: Arc::clone(&streams),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the stand-in");
        let addr = listener.local_addr().expect("stand-in address");
        let incoming = shoal_edge::tls::incoming::incoming(
            listener,
            Arc::new(tls),
            shoal_edge::tls::incoming::HandshakeLimits::default(),
        );
        let task = tokio::spawn(async move {
            // The material sender lives as long as the server: the CA keeps its files.
            let _keep = material_tx;
            let served = tonic::transport::Server::builder()
                .add_service(ca)
                .add_service(
                    AggregatedDiscoveryServiceServer::new(ads)
                        .max_decoding_message_size(64 << 20)
                        .max_encoding_message_size(64 << 20),
                )
                .serve_with_incoming(incoming)
                .await;
            if let Err(e) = served {
                eprintln!("istiod stand-in stopped: {e}");
            }
        });
        IstiodStandIn {
            addr,
            model: model_tx,
            nacks,
            streams,
            task,
        }
    }

    /// Changes the model (the next version), pushing it to every stream.
    pub fn update(&self, change: impl FnOnce(&mut Model)) {
        self.model.send_modify(|(version, model)| {
            change(Arc::make_mut(model));
            *version += 1;
        });
    }

    /// Every NACK received so far (`node: type: error`).
    pub fn nacks(&self) -> Vec<String> {
        self.nacks.lock().unwrap().clone()
    }

    /// The node IDs of the ADS streams opened so far.
    pub fn streams(&self) -> Vec<String> {
        self.streams.lock().unwrap().clone()
    }
}

impl Drop for IstiodStandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}
