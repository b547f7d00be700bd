//! A tunnel once open: bytes copied both ways for the rest of the connection's life, in
//! the connection's one task: the proxy's up to the tunnel's request stream
//! ([`SendUp`]), the owner's down to the proxy's socket. Written as a state machine, not
//! an `async fn`: the task holds it for as long as the tunnel lasts, and an `async fn`
//! keeps room for every argument twice and for its largest step (the opening, TLS state
//! included) whatever step it is in.

use crate::ads::metrics::RelayFailure;
use crate::ads::ownership::RelayLink;
use crate::ads::relay::{Held, SendUp, UpSource};
use crate::ads::shared::Shared;
use bytes::{Buf, Bytes};
use h2::RecvStream;
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::time::Sleep;
use tracing::debug;

/// What a read of the proxy's socket takes at most (on the stack: nothing is kept
/// between reads).
const READ_CHUNK: usize = 16 * 1024;

/// Copies the owner's response body to the proxy until the owner's response ends or the
/// relay is ended here (hand-off, drain, a newer connection of the proxy); then closes
/// the proxy's side, waiting at most `--send-timeout` for it. The proxy's bytes go up
/// meanwhile, until the proxy closes its side.
pub(super) struct TunnelCopy<L> {
    shared: Arc<Shared>,
    body: RecvStream,
    write: WriteHalf<L>,
    /// Until the proxy's side or the request stream ends.
    up: Option<SendUp<ProxyBytes<L>>>,
    link: Arc<RelayLink>,
    step: Step,
    /// The relay's registration and permits, given back when the copy ends.
    _held: Held,
}

enum Step {
    Reading,
    /// Writing what is left of a chunk of `len` bytes: its window reopens once written.
    Writing {
        data: Bytes,
        len: usize,
    },
    /// Shutting the proxy's side down, until the deadline (allocated only then).
    Closing(Pin<Box<Sleep>>),
}

impl<L> TunnelCopy<L> {
    pub(super) fn new(
        shared: Arc<Shared>,
        body: RecvStream,
        (read, write): (ReadHalf<L>, WriteHalf<L>),
        send: h2::SendStream<Bytes>,
        link: Arc<RelayLink>,
        held: Held,
    ) -> Self {
        TunnelCopy {
            shared,
            body,
            write,
            up: Some(SendUp::new(ProxyBytes(read), send, link.clone())),
            link,
            step: Step::Reading,
            _held: held,
        }
    }

    fn close(&mut self) {
        self.link.close();
        let deadline = tokio::time::sleep(self.shared.config.send_timeout);
        self.step = Step::Closing(Box::pin(deadline));
    }
}

impl<L: AsyncRead + AsyncWrite + Send + 'static> Future for TunnelCopy<L> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if let Some(up) = &mut this.up
            && Pin::new(up).poll(cx).is_ready()
        {
            this.up = None;
        }
        loop {
            if !matches!(this.step, Step::Closing(_)) {
                this.link.down.register(cx.waker());
            }
            match &mut this.step {
                Step::Reading if this.link.ended() => this.close(),
                Step::Reading => match ready!(this.body.poll_data(cx)) {
                    Some(Ok(data)) => {
                        let len = data.len();
                        this.step = Step::Writing { data, len };
                    }
                    Some(Err(e)) => {
                        this.shared.metrics.relay_failed(RelayFailure::OwnerGone);
                        debug!(error = %e, "the tunnel to the owner failed");
                        this.close();
                    }
                    None => this.close(),
                },
                // Ended mid-write, or the proxy's socket failed: no shutdown to wait for.
                Step::Writing { .. } if this.link.ended() => return Poll::Ready(()),
                Step::Writing { data, len } if data.is_empty() => {
                    // Written: the owner may send as much again.
                    let _ = this.body.flow_control().release_capacity(*len);
                    this.step = Step::Reading;
                }
                Step::Writing { data, .. } => {
                    match ready!(Pin::new(&mut this.write).poll_write(cx, data)) {
                        Ok(n) if n > 0 => data.advance(n),
                        _ => {
                            this.link.close();
                            return Poll::Ready(());
                        }
                    }
                }
                Step::Closing(deadline) => {
                    if deadline.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(());
                    }
                    let _ = ready!(Pin::new(&mut this.write).poll_shutdown(cx));
                    return Poll::Ready(());
                }
            }
        }
    }
}

/// The proxy's socket, read as the owner's window takes it.
struct ProxyBytes<L>(ReadHalf<L>);

impl<L: AsyncRead + Send + 'static> UpSource for ProxyBytes<L> {
    fn poll_chunk(&mut self, cx: &mut Context<'_>, _: &RelayLink) -> Poll<Option<Bytes>> {
        // Not zeroed: the task polls this whenever it wakes, for either direction.
        let mut chunk = [MaybeUninit::<u8>::uninit(); READ_CHUNK];
        let mut buf = ReadBuf::uninit(&mut chunk);
        match ready!(Pin::new(&mut self.0).poll_read(cx, &mut buf)) {
            Ok(()) if !buf.filled().is_empty() => {
                Poll::Ready(Some(Bytes::copy_from_slice(buf.filled())))
            }
            // The proxy closed its side (or its socket failed): the owner's connection
            // ends, and with it the response.
            _ => Poll::Ready(None),
        }
    }
}
