//! Where the owner puts a tunneled connection: the server of the listener the proxy
//! first reached ([`Origin`]), set by [`incoming`](super::incoming) for each listener.

use super::Origin;
use super::tunnel_io::TunnelIo;
use std::sync::{Arc, OnceLock};

/// Takes a tunneled connection into a listener's server; gives it back when the server
/// cannot take it (stopped, or its queue of new connections full).
pub(super) type Inbox = Arc<dyn Fn(Box<TunnelIo>) -> Result<(), Box<TunnelIo>> + Send + Sync>;

/// The inbox of each listener this edge has.
#[derive(Default)]
pub(crate) struct Inboxes {
    plaintext: OnceLock<Inbox>,
    secure: OnceLock<Inbox>,
}

impl Inboxes {
    fn slot(&self, origin: Origin) -> &OnceLock<Inbox> {
        match origin {
            Origin::Plaintext => &self.plaintext,
            Origin::Secure => &self.secure,
        }
    }

    pub(super) fn set(&self, origin: Origin, inbox: Inbox) {
        let _ = self.slot(origin).set(inbox);
    }

    pub(super) fn get(&self, origin: Origin) -> Option<&Inbox> {
        self.slot(origin).get()
    }
}
