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
//! - [`authz`]: the one authorization function the edge asks before sending a resource.
//! - [`claim`]: a node's claimed namespace / service account against its identity.

pub mod authn;
pub mod authz;
pub mod claim;
pub mod identity;
pub mod spiffe;

pub use authn::{Authenticator, AuthnError, Credentials};
pub use authz::{Decision, Requested, SecretGrants, authorize};
pub use claim::{ClaimMismatch, NodeClaim, check_node_claim};
pub use identity::{AuthMethod, Identity, Principal};
pub use spiffe::{SpiffeError, SpiffeId};
