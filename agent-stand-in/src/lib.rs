//! `agent-stand-in`: a **stand-in for Istio's pilot-agent** (`pkg/istio-agent`), written
//! for Shoal's tests. It is not the agent and does not pretend to be a complete one.
//!
//! What of the real agent it reproduces, for one Envoy, configured by pilot-agent's own
//! environment variables where one exists:
//! - **Workload certificate** (the agent's secret manager and its Istio CA client): an
//!   ECDSA P-256 key and a CSR naming `spiffe://<TRUST_DOMAIN>/ns/<POD_NAMESPACE>/sa/
//!   <SERVICE_ACCOUNT>`, sent to `istio.v1.auth.IstioCertificateService/CreateCertificate`
//!   at `CA_ADDR` (default: the discovery address) over TLS, the server verified against
//!   the pinned root (`CA_ROOT_CA`, else `XDS_ROOT_CA`) and the name `ISTIOD_SAN` (else the
//!   discovery address's host), with `authorization: Bearer <token>`, the token read from
//!   its file on every call. The certificate is renewed at half its life
//!   (`SECRET_GRACE_PERIOD_RATIO`, 0.5), a failed request retried with bounded backoff.
//!   Requested TTL: `SECRET_TTL` (Go duration, default 24h).
//! - **SDS** on the Unix socket `./var/run/secrets/workload-spiffe-uds/socket` (relative
//!   to `--work-dir`): the `default` certificate (chain and key) and `ROOTCA` (the root),
//!   state-of-the-world streams, the new certificate pushed on every renewal.
//! - **The xDS proxy**: Envoy's ADS on the Unix socket `./etc/istio/proxy/XDS` is carried
//!   to the discovery address (`PROXY_CONFIG`'s `discoveryAddress`, or `--discovery-address`)
//!   over the same TLS with the token, one upstream stream per Envoy stream, each message
//!   passed on as it came (decoded and re-encoded as the same xDS message, never
//!   interpreted; SotW and Delta).
//!
//! What it does not do (the real agent does): start, drain or restart Envoy and write its
//! bootstrap (so `ISTIO_META_*`, `POD_NAME`, `INSTANCE_IP` and the node ID are the
//! bootstrap writer's business: Shoal's tests write them as the agent would); the DNS
//! proxy; health-probe rewriting and the status port; iptables; file-mounted
//! certificates (`FILE_MOUNTED_CERTS`, `/etc/certs`) and SDS for files named by
//! `file-cert:` resources; Delta SDS; other CA providers (GoogleCA, Kubernetes CSR API);
//! client certificates towards the CA once the workload certificate exists (the agent may
//! use them; this uses the token every time); the xDS proxy's own handlers (NDS, PCDS,
//! health-check and WASM fetch); token exchange (STS) and credential fetchers.
//!
//! The library half exists so that tests can speak to Shoal as the agent does (the TLS
//! channel with the pinned root, the CA client); the binary is `agent-stand-in`.

pub mod ca_client;
pub mod config;
pub mod duration;
pub mod sds;
pub mod secrets;
pub mod tls;
pub mod xds_proxy;
