//! One stream's push awaiting its answer: the revisions it carries and the nonce sent per
//! type, settled when the proxy has answered every one.

use super::ledger::NackSample;
use super::revisions::Revisions;
use crate::ads::status::{SharedText, TypeStatus};
use std::sync::Arc;

/// What a stream sent for revisions, until the proxy answers (at most one push: a later
/// one takes over the earlier's revisions, its config being at least as new).
#[derive(Debug, Default)]
pub struct InFlight {
    waiting: Option<Waiting>,
}

#[derive(Debug)]
struct Waiting {
    revisions: Revisions,
    /// `(type_url, nonce)` of each response the answer is awaited for.
    nonces: Vec<(SharedText, SharedText)>,
}

/// How the proxy answered one response.
enum Answer {
    Pending,
    Acked,
    Nacked(SharedText),
}

impl InFlight {
    /// A push for `revisions` was handled for `proxy`: `before` and `after` are the
    /// stream's status around it. Nothing sent and nothing awaited means the revisions changed nothing
    /// for this proxy: it holds them already.
    pub fn pushed(
        &mut self,
        mut revisions: Revisions,
        before: &[Arc<TypeStatus>],
        after: &[Arc<TypeStatus>],
        proxy: &str,
    ) {
        let sent: Vec<(SharedText, SharedText)> = after
            .iter()
            .filter(|s| !s.nonce_sent.is_empty())
            .filter(|s| {
                !before
                    .iter()
                    .any(|b| b.type_url == s.type_url && b.nonce_sent == s.nonce_sent)
            })
            .map(|s| (s.type_url.clone(), s.nonce_sent.clone()))
            .collect();
        if revisions.is_empty() && sent.is_empty() {
            return;
        }
        match self.waiting.take() {
            None if sent.is_empty() => revisions.acked(proxy),
            None => {
                revisions.sent();
                self.waiting = Some(Waiting {
                    revisions,
                    nonces: sent,
                });
            }
            Some(mut w) => {
                revisions.sent();
                for (type_url, nonce) in sent {
                    match w.nonces.iter_mut().find(|(t, _)| *t == type_url) {
                        Some(entry) => entry.1 = nonce,
                        None => w.nonces.push((type_url, nonce)),
                    }
                }
                w.revisions = w.revisions.merge(revisions);
                self.waiting = Some(w);
            }
        }
    }

    /// After a request: settles the push once every response it sent is answered (one
    /// NACK settles it as rejected).
    pub fn answered(&mut self, statuses: &[Arc<TypeStatus>], proxy: &str) {
        let Some(w) = &self.waiting else { return };
        let mut all_acked = true;
        for (type_url, nonce) in &w.nonces {
            match answer(statuses, type_url, nonce) {
                Answer::Acked => {}
                Answer::Pending => all_acked = false,
                Answer::Nacked(message) => {
                    let sample = NackSample {
                        proxy: proxy.to_string(),
                        type_url: type_url.to_string(),
                        message: message.to_string(),
                    };
                    if let Some(w) = self.waiting.take() {
                        w.revisions.nacked(&sample);
                    }
                    return;
                }
            }
        }
        if all_acked && let Some(w) = self.waiting.take() {
            w.revisions.acked(proxy);
        }
    }

    /// Whether a push is awaiting its answer.
    pub fn is_waiting(&self) -> bool {
        self.waiting.is_some()
    }
}

/// The proxy's answer to `nonce` of `type_url`. A response since superseded (a request
/// was answered after the push) counts by how the latest was answered: it carries a
/// config at least as new.
fn answer(statuses: &[Arc<TypeStatus>], type_url: &str, nonce: &str) -> Answer {
    let Some(s) = statuses.iter().find(|s| s.type_url == type_url) else {
        // No longer watched: nothing left to answer.
        return Answer::Acked;
    };
    if s.nonce_acked == nonce {
        return Answer::Acked;
    }
    if let Some(nack) = &s.nack {
        // This response rejected, or a later one that superseded it.
        if nack.nonce == nonce || (s.nonce_sent != nonce && nack.nonce == s.nonce_sent) {
            return Answer::Nacked(nack.message.clone());
        }
    }
    if s.nonce_sent != nonce && s.state() == "SYNCED" {
        return Answer::Acked;
    }
    Answer::Pending
}
