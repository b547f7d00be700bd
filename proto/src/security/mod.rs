//! Who a connected proxy is and what it may be sent, without I/O.
//!
//! ```text
//!  stream opens ─► authn::Authenticator (token, peer certificates) ─► Identity
//!                                                                     │ carried by xds::Proxy
//!  generation ─► authz::authorize(identity, claimed namespace, resource) ─► Decision
//! ```
//!
//! - [`identity`]: [`Identity`], anonymous or a SPIFFE principal and how it was proven.
//! - [`authn`]: the [`Authenticator`] trait every way of proving an identity implements
//!   (today only [`authn::Anonymous`], for plaintext ADS).
//! - [`spiffe`]: workload SPIFFE IDs, as certificates, CSRs and tokens name them.
//! - [`debug_access`]: who may read the `/debug/*` pages.
//! - [`authz`]: the one authorization function the edge asks before sending a resource.
//! - [`ca`]: the certificate authority: Istio's CA API, signing material, CSR signing.
//! - [`claim`]: a node's claimed namespace / service account against its identity.
//! - [`root_cert`]: which namespaces need the mesh root's `istio-ca-root-cert` ConfigMap.

pub mod authn;
pub mod authz;
pub mod ca;
pub mod claim;
pub mod debug_access;
pub mod identity;
pub mod root_cert;
pub mod spiffe;

pub use authn::{Authenticator, AuthnError, Credentials};
pub use authz::{Decision, Requested, SecretGrants, authorize};
pub use claim::{ClaimMismatch, NodeClaim, check_node_claim};
pub use debug_access::{DebugCaller, authorize_debug};
pub use identity::{AuthMethod, Identity, Principal};
pub use spiffe::{SpiffeError, SpiffeId};
