//! Who may ask CSDS. On the plaintext listener (istiod's 15010) anyone, as Istio answers
//! there: that port proves nothing of anyone and is for trusted networks only. On the
//! secure listener, an identity of the control plane's namespace, proven by a bearer
//! token or a client certificate of the mesh: the rule of the `/debug/*` pages
//! ([`authorize_debug`]), less their exception for callers on this host (a connection
//! on the secure port may come through another edge's tunnel, so its address says
//! nothing).

use super::error::{CsdsError, Result};
use shoal_proto::security::{Authenticator, Credentials, DebugCaller, Decision, authorize_debug};
use std::sync::Arc;

/// The access rule of one listener's CSDS.
#[derive(Clone)]
pub enum Access {
    /// Anyone (the plaintext listener).
    Anyone,
    /// An identity of `system_namespace`, proven to `authenticator` (the secure listener's).
    ControlPlane {
        authenticator: Arc<dyn Authenticator>,
        system_namespace: String,
    },
}

impl Access {
    /// `Ok` when the caller presenting `credentials` may ask.
    pub async fn check(&self, credentials: &Credentials) -> Result<()> {
        let Access::ControlPlane {
            authenticator,
            system_namespace,
        } = self
        else {
            return Ok(());
        };
        let unauthenticated = |reason: String| CsdsError::Unauthenticated {
            system_namespace: system_namespace.clone(),
            reason,
        };
        let identity = authenticator
            .authenticate(credentials)
            .await
            .map_err(|e| unauthenticated(format!("authentication failed: {e}")))?;
        let caller = DebugCaller {
            local: false,
            identity: &identity,
        };
        match authorize_debug(caller, system_namespace) {
            Decision::Allow | Decision::AllowUnauthenticated => Ok(()),
            Decision::Deny { .. } if identity.principal().is_none() => {
                Err(unauthenticated("this caller proved none".into()))
            }
            Decision::Deny { reason } => Err(CsdsError::Denied(reason)),
        }
    }
}
