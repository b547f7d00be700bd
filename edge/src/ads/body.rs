//! The response body of an ADS stream: encoded responses from a stream task served here
//! ([`Outbound`]), or the owner's frames passed through a relay ([`Relayed`]).

use super::outbound::Outbound;
use super::relay::Relayed;
use crate::tls::incoming::Closer;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The response body of an ADS stream.
#[derive(Default)]
pub struct AdsBody(Inner, Tunneled);

/// The closer of the tunneled connection the stream is on, held while the stream lives.
#[derive(Default)]
struct Tunneled(Option<Closer>);

impl Drop for Tunneled {
    fn drop(&mut self) {
        if let Some(closer) = &self.0 {
            closer.release();
        }
    }
}

enum Inner {
    Served(Outbound),
    Relayed(Relayed),
}

impl Default for Inner {
    fn default() -> Self {
        Inner::Served(Outbound::default())
    }
}

impl From<Outbound> for AdsBody {
    fn from(o: Outbound) -> Self {
        AdsBody(Inner::Served(o), Tunneled::default())
    }
}

impl From<Relayed> for AdsBody {
    fn from(r: Relayed) -> Self {
        AdsBody(Inner::Relayed(r), Tunneled::default())
    }
}

/// `grpc-status` UNAVAILABLE: the proxy is to reconnect (hand-off, drain, a newer
/// stream of it).
const UNAVAILABLE: &str = "14";

impl AdsBody {
    /// Closes the connection beneath, through `closer`, once the stream ends for the
    /// proxy to reconnect (unless other streams use it): a tunneled connection would
    /// otherwise bring its next stream back here, to an edge that no longer serves it.
    pub(crate) fn closing(mut self, closer: Option<Closer>) -> Self {
        if let Some(closer) = &closer {
            closer.hold();
        }
        self.1 = Tunneled(closer);
        self
    }
}

impl Body for AdsBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let polled = match &mut self.0 {
            Inner::Served(o) => Pin::new(o).poll_frame(cx),
            Inner::Relayed(r) => Pin::new(r).poll_frame(cx),
        };
        if let (Poll::Ready(Some(Ok(frame))), Some(closer)) = (&polled, &self.1.0)
            && frame
                .trailers_ref()
                .and_then(|t| t.get("grpc-status"))
                .is_some_and(|code| code == UNAVAILABLE)
        {
            closer.close_unless_shared(1);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Served(o) => o.is_end_stream(),
            Inner::Relayed(r) => r.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Served(o) => o.size_hint(),
            Inner::Relayed(r) => r.size_hint(),
        }
    }
}

#[cfg(test)]
impl AdsBody {
    /// The stream served here (tests of serving).
    pub(crate) fn served(self) -> Outbound {
        match self.0 {
            Inner::Served(o) => o,
            Inner::Relayed(_) => panic!("a relayed stream"),
        }
    }
}

#[cfg(test)]
impl AdsBody {
    /// The next response, decoded, or the closing status, of a stream served here.
    pub(crate) async fn next_message<T: prost::Message + Default>(
        &mut self,
    ) -> Option<Result<T, tonic::Status>> {
        match &mut self.0 {
            Inner::Served(o) => o.next_message().await,
            Inner::Relayed(_) => panic!("a relayed stream"),
        }
    }
}
