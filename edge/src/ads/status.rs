//! What one stream has sent and what the proxy acknowledged, per type (the `/debug/syncz`
//! view), and what a request turned out to be.

use super::sent::{Names, SentSet};
use crate::xds::GenerateError;
use crate::xds::types::PUSH_ORDER;
use serde::Serialize;
use std::sync::{Arc, LazyLock};

/// The most of a proxy's own text (a NACK's message, the version it reports) a stream
/// keeps per type: room for any rejection Envoy writes, while a proxy that sends
/// megabytes of it cannot make the edge hold them for as long as the stream lives.
pub const MAX_PROXY_TEXT: usize = 4096;

/// `text`, cut to [`MAX_PROXY_TEXT`] bytes (on a character boundary) and saying so.
pub(crate) fn bounded(text: &str) -> String {
    if text.len() <= MAX_PROXY_TEXT {
        return text.to_string();
    }
    let mut end = MAX_PROXY_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes not kept)",
        &text[..end],
        text.len() - end
    )
}

/// Text a stream's status holds, shared between the stream's state and what it publishes
/// after every step (a clone is a reference count, not a copy).
#[derive(Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SharedText(Arc<str>);

impl std::ops::Deref for SharedText {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for SharedText {
    fn from(s: &str) -> Self {
        SharedText(s.into())
    }
}

impl From<String> for SharedText {
    fn from(s: String) -> Self {
        SharedText(s.into())
    }
}

impl PartialEq<str> for SharedText {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for SharedText {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for SharedText {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<SharedText> for String {
    fn eq(&self, other: &SharedText) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedText> for &str {
    fn eq(&self, other: &SharedText) -> bool {
        **self == *other.0
    }
}

impl std::fmt::Debug for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for SharedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The sync state of one resource type on one stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TypeStatus {
    pub type_url: SharedText,
    pub version_sent: SharedText,
    pub nonce_sent: SharedText,
    pub version_acked: SharedText,
    pub nonce_acked: SharedText,
    /// The last rejection, until a later response is acknowledged.
    pub nack: Option<Nack>,
    /// Subscribed to everything of this type.
    pub wildcard: bool,
    /// Resources the proxy holds (as far as this stream knows).
    pub resources: usize,
    /// What the proxy held when it last acknowledged this type: the config it runs (a
    /// rejected or unanswered response is not in it). For config dumps and diffs.
    #[serde(skip)]
    pub held: SentSet,
    /// The names explicitly subscribed (the stream's own list: what the edge would send
    /// now is generated for them). Shown as how many.
    #[serde(rename = "subscribed", serialize_with = "count")]
    pub names: Names,
}

fn count<S: serde::Serializer>(names: &Names, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(names.len() as u64)
}

/// What a stream publishes after every step, by type URL: each type's status is the
/// allocation the stream's own state holds (copied only when the stream changes it while
/// published), so a stream keeps one copy of its statuses, not two.
pub type Statuses = Vec<Arc<TypeStatus>>;

/// Records a response sent, with the watch's counts as they now are, so that what the
/// stream publishes next ([`published`]) shares this status.
pub(crate) fn record_sent(
    status: &mut Arc<TypeStatus>,
    version: &str,
    nonce: &str,
    wildcard: bool,
    resources: usize,
) {
    let status = Arc::make_mut(status);
    status.sent(version, nonce);
    (status.wildcard, status.resources) = (wildcard, resources);
}

/// `status` with `wildcard` and `resources` as given: `status` itself when they already are.
pub(crate) fn published(
    status: &Arc<TypeStatus>,
    wildcard: bool,
    resources: usize,
) -> Arc<TypeStatus> {
    if status.wildcard == wildcard && status.resources == resources {
        return status.clone();
    }
    Arc::new(TypeStatus {
        wildcard,
        resources,
        ..TypeStatus::clone(status)
    })
}

/// A rejected response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Nack {
    pub nonce: SharedText,
    pub version: SharedText,
    pub message: SharedText,
}

impl TypeStatus {
    pub(crate) fn new(type_url: &str) -> Self {
        // Every stream's statuses share the served types' URLs.
        static SERVED: LazyLock<[SharedText; PUSH_ORDER.len()]> =
            LazyLock::new(|| PUSH_ORDER.map(SharedText::from));
        let type_url = match PUSH_ORDER.iter().position(|t| *t == type_url) {
            Some(i) => SERVED[i].clone(),
            None => type_url.into(),
        };
        TypeStatus {
            type_url,
            ..Default::default()
        }
    }

    /// How many names are explicitly subscribed.
    pub fn subscribed(&self) -> usize {
        self.names.len()
    }

    pub(crate) fn sent(&mut self, version: &str, nonce: &str) {
        self.version_sent = version.into();
        self.nonce_sent = nonce.into();
    }

    /// `version` is what the proxy reports (SotW `version_info`), or what was sent (Delta).
    /// `nonce` is the latest sent (compared before); `version` the proxy's, kept bounded.
    /// `held`: what the proxy now holds of the type.
    pub(crate) fn acked(&mut self, nonce: &str, version: &str, held: &SentSet) {
        self.held = held.clone();
        self.nonce_acked = nonce.into();
        self.version_acked = bounded(version).into();
        self.nack = None;
    }

    /// Records the rejection; returns its message as kept (bounded), for the request's
    /// [`RequestKind::Nack`].
    pub(crate) fn nacked(&mut self, nonce: &str, message: &str) -> String {
        let message = bounded(message);
        self.nack = Some(Nack {
            nonce: nonce.into(),
            version: self.version_sent.clone(),
            message: message.as_str().into(),
        });
        message
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
    /// Rejects the latest response, with the proxy's message (its first
    /// [`MAX_PROXY_TEXT`] bytes).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 17 ("every per-client allocation is bounded"): a NACK's message and a
    /// reported version were kept whole, so a proxy could make its stream hold up to the
    /// request limit (4 MiB) per type for the stream's life.
    #[test]
    fn a_proxys_text_is_kept_bounded() {
        let mut s = TypeStatus::new("t");
        s.sent("1", "1-1");
        let huge = "é".repeat(1 << 20);
        let kept = s.nacked("1-1", &huge);
        let nack = s.nack.as_ref().unwrap();
        assert_eq!(kept, nack.message);
        assert!(
            nack.message.len() <= MAX_PROXY_TEXT + 64,
            "{}",
            nack.message.len()
        );
        assert!(nack.message.ends_with("more bytes not kept)"));
        s.acked("1-1", &huge, &SentSet::default());
        assert!(s.version_acked.len() <= MAX_PROXY_TEXT + 64);
        // Short text is kept as it is.
        s.nacked("1-1", "bad cluster a");
        assert_eq!(s.nack.unwrap().message, "bad cluster a");
        assert_eq!(bounded(&"a".repeat(MAX_PROXY_TEXT)).len(), MAX_PROXY_TEXT);
    }
}
