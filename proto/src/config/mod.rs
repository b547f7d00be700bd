//! The configuration users write: Kubernetes core objects, `networking.istio.io` and
//! `security.istio.io` kinds.
//!
//! [`parse::parse_documents`] turns multi-document YAML into typed [`Config`]s, one result
//! per document so a bad object never hides the good ones; [`validate`] applies the rules
//! Istio's own validation applies.

pub mod extension_provider;
pub mod grpc_status;
pub mod istio;
pub mod k8s;
mod kind;
pub mod mesh;
mod meta;
pub mod parse;
pub mod security;
pub mod selector;
pub mod topology;
pub mod validate;

pub use kind::Kind;
pub use meta::{Config, ConfigKey, ConfigMeta, Origin, Spec};
