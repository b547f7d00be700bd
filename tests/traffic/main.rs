//! Istio traffic management, proven with real traffic: each test writes the Istio YAML
//! a user writes into the directory `shoal` watches, then sends real HTTP (or TCP)
//! through a real Envoy sidecar configured by Shoal over xDS, and checks what clients
//! and backends saw. One test per feature family; they alternate between SotW and
//! Delta xDS so that both protocols carry every kind of config.
//!
//! Run `cargo build --workspace --bins` first (for `shoal`); Envoy comes from
//! `.venv/bin/envoy` or `SHOAL_ENVOY`.

#[path = "../support/mod.rs"]
mod support;

mod backend;
mod harness;

// One file per feature family.
mod cidr_service_entry;
mod circuit_breaking;
mod consistent_hashing;
mod cookie_hashing;
mod cors;
mod destination_rule_selector;
mod dns_service_entry;
mod egress_proxy;
mod fault_injection;
mod hash_algorithms;
mod hash_keys;
mod header_manipulation;
mod ingress_gateway;
mod match_conditions;
mod mesh_config;
mod mirroring;
mod outlier_detection;
mod policy_levels;
mod protocol_sniffing;
mod redirect_and_direct_response;
mod registry_only;
mod request_matching;
mod retries;
mod rewrites_and_delegation;
mod route_timeout;
mod service_aliases;
mod sidecar_scope;
mod sidecar_selection;
mod static_service_entry;
mod tcp_on_http_port;
mod tcp_routing;
mod tls_origination;
mod tls_sni_egress;
mod virtual_service_conflicts;
mod weighted_shifting;
mod workload_entry;

/// Each test runs its own Shoal and Envoy and some count requests or time them: one at
/// a time on a 2-core machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
