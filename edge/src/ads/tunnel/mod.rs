//! Connection relays: a proxy's whole connection passed, as bytes, to the edge that owns
//! it, instead of each stream's messages. A proxy (Envoy, the Istio agent, a gRPC client)
//! holds one connection with one ADS stream; the edge it lands on reads the connection's
//! first bytes ([`prelude`](super::transport::prelude)) for the first stream's node ID,
//! and when another edge owns that proxy, opens a tunnel to it (one HTTP/2 stream on the
//! pooled mTLS connections between edges) and copies bytes both ways. The owner serves
//! the tunnel as a connection of its own listener, with the proxy's certificates.
//!
//! ```text
//!  proxy ──TLS or TCP──► edge A: prelude (node ID) ──► owner? ── A: serve here (replay)
//!                                                       │
//!                                   B ──mTLS, POST /shoal.edge.v1.ConnectionRelay/Open──►
//!                                       edge B: TunnelIo ──► B's listener (HTTP/2, ADS)
//!        ◄─────── bytes, copied ◄────── response body ◄────────────┘
//! ```
//!
//! The relaying edge holds no HTTP/2 or xDS state of the proxy: its socket, the tunnel
//! stream and a task that copies (no buffer while idle). What a stream relay
//! ([`relay`](super::relay)) still does: the streams of a connection that carries
//! several proxies (after the first), and whatever the prelude cannot read.
//!
//! - [`conn`]: the connections a listener's server takes (direct, replayed, or tunneled);
//! - [`route`]: the relaying edge: read the prelude, serve here or open a tunnel;
//! - [`open`]: the tunnel's client side;
//! - [`copy`]: the copy both ways, for the tunnel's life;
//! - [`service`]: the owner's side of a tunnel;
//! - [`pipe`]: the owner's bytes to the tunnel's response body, bounded.

mod conn;
mod copy;
pub(crate) mod inbox;
mod open;
mod pipe;
mod route;
mod service;
mod tunnel_io;

pub use conn::{EdgeConn, PlainConn, plain_conns};
pub(crate) use route::incoming;
pub use service::TunnelService;
pub use tunnel_io::TunnelIo;

/// Which listener a connection arrived on: a tunnel takes it to the same one on the owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    Plaintext,
    Secure,
}

impl Origin {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Origin::Plaintext => "plaintext",
            Origin::Secure => "secure",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Origin> {
        [Origin::Plaintext, Origin::Secure]
            .into_iter()
            .find(|o| o.as_str() == s)
    }
}

#[cfg(test)]
mod tests;
