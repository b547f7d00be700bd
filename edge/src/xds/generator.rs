use super::XdsResource;
use crate::proxy::Proxy;
use shoal_proto::push_context::PushContext;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("unsupported resource type {0}")]
    UnsupportedType(String),
    #[error("{resource}: {reason}")]
    Invalid { resource: String, reason: String },
}

/// Generates xDS resources, caching what is shared between proxies.
#[derive(Default)]
pub struct Generator {}

impl Generator {
    pub fn new() -> Self {
        Self::default()
    }

    /// The resources of `type_url` for `proxy` in `push`. `names` empty means all
    /// (wildcard); otherwise only those names that exist, in the order given.
    pub fn generate(
        &self,
        type_url: &str,
        proxy: &Proxy,
        push: &PushContext,
        names: &[String],
    ) -> Result<Vec<Arc<XdsResource>>, GenerateError> {
        let _ = (proxy, push, names);
        Err(GenerateError::UnsupportedType(type_url.to_string()))
    }
}
