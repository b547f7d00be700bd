//! What one stream has sent and what the proxy acknowledged, per type (the `/debug/syncz`
//! view), and what a request turned out to be.

use crate::xds::GenerateError;
use serde::Serialize;

/// The sync state of one resource type on one stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TypeStatus {
    pub type_url: String,
    pub version_sent: String,
    pub nonce_sent: String,
    pub version_acked: String,
    pub nonce_acked: String,
    /// The last rejection, until a later response is acknowledged.
    pub nack: Option<Nack>,
    /// Subscribed to everything of this type.
    pub wildcard: bool,
    /// Explicitly subscribed names.
    pub subscribed: usize,
    /// Resources the proxy holds (as far as this stream knows).
    pub resources: usize,
}

/// A rejected response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Nack {
    pub nonce: String,
    pub version: String,
    pub message: String,
}

impl TypeStatus {
    pub(crate) fn new(type_url: &str) -> Self {
        TypeStatus {
            type_url: type_url.to_string(),
            ..Default::default()
        }
    }

    pub(crate) fn sent(&mut self, version: &str, nonce: &str) {
        self.version_sent = version.to_string();
        self.nonce_sent = nonce.to_string();
    }

    /// `version` is what the proxy reports (SotW `version_info`), or what was sent (Delta).
    pub(crate) fn acked(&mut self, nonce: &str, version: &str) {
        self.nonce_acked = nonce.to_string();
        self.version_acked = version.to_string();
        self.nack = None;
    }

    pub(crate) fn nacked(&mut self, nonce: &str, message: &str) {
        self.nack = Some(Nack {
            nonce: nonce.to_string(),
            version: self.version_sent.clone(),
            message: message.to_string(),
        });
    }

    /// `SYNCED` (latest acknowledged), `NACKED` (latest rejected), `STALE` (awaiting an
    /// answer) or `NOT_SENT`, as Istio's `proxy-status` reports it. A Delta proxy that
    /// reconnected holding every current version was sent nothing, and is `SYNCED`.
    pub fn state(&self) -> &'static str {
        if self.nonce_sent.is_empty() {
            if self.resources > 0 {
                "SYNCED"
            } else {
                "NOT_SENT"
            }
        } else if self.nonce_acked == self.nonce_sent {
            "SYNCED"
        } else if self
            .nack
            .as_ref()
            .is_some_and(|n| n.nonce == self.nonce_sent)
        {
            "NACKED"
        } else {
            "STALE"
        }
    }
}

/// What a request was, by the xDS rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// The first request of its type on this stream (or after a reconnect).
    Initial,
    /// Acknowledges the latest response.
    Ack,
    /// Rejects the latest response, with the proxy's message.
    Nack(String),
    /// Answers a response that was since superseded: ignored.
    Stale,
    /// Delta only: changes subscriptions without acknowledging anything.
    Subscribe,
    /// For a type this server does not generate: ignored, nothing kept
    /// (`limits::served`).
    Unsupported,
}

/// The outcome of one request: its kind, the responses to send, and generation failures.
#[derive(Debug)]
pub struct Reply<R> {
    pub kind: RequestKind,
    pub responses: Vec<R>,
    pub errors: Vec<(String, GenerateError)>,
}

impl<R> Reply<R> {
    pub(crate) fn new(kind: RequestKind) -> Self {
        Reply {
            kind,
            responses: Vec::new(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, type_url: &str, r: Result<Option<R>, GenerateError>) {
        match r {
            Ok(Some(resp)) => self.responses.push(resp),
            Ok(None) => {}
            Err(e) => self.errors.push((type_url.to_string(), e)),
        }
    }
}

/// Fresh nonces and the version string of a stream's responses.
#[derive(Debug, Default)]
pub(crate) struct Nonces {
    counter: u64,
}

impl Nonces {
    /// `(version, nonce)`: the snapshot version, and the version plus a per-stream counter.
    pub(crate) fn next(&mut self, snapshot: u64) -> (String, String) {
        self.counter += 1;
        (snapshot.to_string(), format!("{snapshot}-{}", self.counter))
    }
}
