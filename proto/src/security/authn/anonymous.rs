//! [`Anonymous`]: the authenticator of plaintext ADS (15010), which proves nothing and
//! ignores whatever is presented, as istiod does on its plaintext port.

use super::{Authenticator, AuthnError, Credentials};
use crate::security::identity::Identity;
use async_trait::async_trait;

/// Every stream is [`Identity::Anonymous`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Anonymous;

#[async_trait]
impl Authenticator for Anonymous {
    fn name(&self) -> &'static str {
        "anonymous"
    }

    async fn authenticate(&self, _: &Credentials) -> Result<Identity, AuthnError> {
        Ok(Identity::Anonymous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_on_plaintext_proves_nothing() {
        let creds = Credentials {
            bearer_token: Some("a-token".into()),
            ..Default::default()
        };
        // Decided without waiting on anything.
        let id = futures::FutureExt::now_or_never(Anonymous.authenticate(&creds));
        assert_eq!(id, Some(Ok(Identity::Anonymous)));
    }
}
