//! `/debug/config_dump` and `/debug/config_diff`: one proxy's config as it acknowledged it,
//! and against what this edge would send it now (`config_dump` does the writing).

use super::XdsServer;
use crate::ads::registry::Connection;
use crate::ads::source::{GeneratorSource, subscribed};
use crate::ads::status::Statuses;
use crate::config_dump::{self, Held, TypeDiff};
use serde_json::{Value, json};
use std::sync::Arc;

/// Why a proxy's config cannot be shown.
#[derive(Debug, thiserror::Error)]
pub enum ConfigDumpError {
    #[error("proxy {0} is not connected to this edge")]
    NotConnected(String),
}

impl XdsServer {
    /// `proxy_id`'s newest stream here and a copy of the status it last published (the
    /// stream's next step waits on the borrow, so it is not held).
    fn published(&self, proxy_id: &str) -> Result<(Arc<Connection>, Statuses), ConfigDumpError> {
        let conn = self
            .shared
            .registry
            .proxy(proxy_id)
            .ok_or_else(|| ConfigDumpError::NotConnected(proxy_id.to_string()))?;
        let status = conn.status().clone();
        Ok((conn, status))
    }

    /// Envoy's `/config_dump` of what `proxy_id` acknowledged, as its stream last
    /// published it.
    pub fn config_dump(&self, proxy_id: &str) -> Result<Value, ConfigDumpError> {
        let (_, status) = self.published(proxy_id)?;
        let held: Vec<Held<'_>> = status
            .iter()
            .map(|t| Held {
                type_url: &t.type_url,
                version: &t.version_acked,
                resources: t.held.resources(),
            })
            .collect();
        Ok(config_dump::config_dump(&held))
    }

    /// Per type the proxy watches, what it acknowledged against what the generator makes
    /// of the same subscription from the latest snapshot.
    pub fn config_diff(&self, proxy_id: &str) -> Result<Value, ConfigDumpError> {
        let (conn, status) = self.published(proxy_id)?;
        let push = self.shared.latest();
        let src = GeneratorSource {
            generator: &self.shared.generator,
            push: &push,
        };
        let types: Vec<Value> = status
            .iter()
            .map(|t| {
                let held = Held {
                    type_url: &t.type_url,
                    version: &t.version_acked,
                    resources: t.held.resources(),
                };
                let now = subscribed(
                    &src,
                    &conn.proxy,
                    &t.type_url,
                    t.wildcard,
                    t.names.as_slice(),
                    None,
                );
                match now {
                    Ok(now) => {
                        let diff: TypeDiff = config_dump::config_diff(&held, &now, push.version());
                        serde_json::to_value(diff).unwrap_or_default()
                    }
                    Err(error) => json!({
                        "type_url": &*t.type_url,
                        "error": format!("generating it now: {error}"),
                    }),
                }
            })
            .collect();
        Ok(json!({ "proxy": proxy_id, "types": types }))
    }
}
