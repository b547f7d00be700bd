//! A tunnel once open: the owner's bytes copied to the proxy's socket for the rest of the
//! connection's life. Written as a state machine, not an `async fn`: the connection's
//! task holds it for as long as the tunnel lasts, and an `async fn` keeps room for every
//! argument twice and for its largest step (the opening, TLS state included) whatever
//! step it is in.

use crate::ads::metrics::RelayFailure;
use crate::ads::ownership::RelayLink;
use crate::ads::relay::Held;
use crate::ads::shared::Shared;
use bytes::{Buf, Bytes};
use http_body::Body;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncWrite, WriteHalf};
use tokio::time::Sleep;
use tracing::debug;

/// Copies the owner's response body to the proxy until the owner's response ends or the
/// relay is ended here (hand-off, drain, a newer connection of the proxy); then closes
/// the proxy's side, waiting at most `--send-timeout` for it.
pub(super) struct CopyDown<L> {
    shared: Arc<Shared>,
    body: tonic::body::Body,
    write: WriteHalf<L>,
    link: Arc<RelayLink>,
    step: Step,
    /// The relay's registration and permits, given back when the copy ends.
    _held: Held,
}

enum Step {
    Reading,
    Writing(Bytes),
    /// Shutting the proxy's side down, until the deadline (allocated only then).
    Closing(Pin<Box<Sleep>>),
}

impl<L> CopyDown<L> {
    pub(super) fn new(
        shared: Arc<Shared>,
        body: tonic::body::Body,
        write: WriteHalf<L>,
        link: Arc<RelayLink>,
        held: Held,
    ) -> Self {
        CopyDown {
            shared,
            body,
            write,
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

impl<L: AsyncWrite> Future for CopyDown<L> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            if !matches!(this.step, Step::Closing(_)) {
                this.link.down.register(cx.waker());
            }
            match &mut this.step {
                Step::Reading if this.link.ended() => this.close(),
                Step::Reading => match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data()
                            && !data.is_empty()
                        {
                            this.step = Step::Writing(data);
                        }
                    }
                    Some(Err(status)) => {
                        this.shared.metrics.relay_failed(RelayFailure::OwnerGone);
                        debug!(error = %status, "the tunnel to the owner failed");
                        this.close();
                    }
                    None => this.close(),
                },
                // Ended mid-write, or the proxy's socket failed: no shutdown to wait for.
                Step::Writing(_) if this.link.ended() => return Poll::Ready(()),
                Step::Writing(data) => match ready!(Pin::new(&mut this.write).poll_write(cx, data))
                {
                    Ok(n) if n > 0 => {
                        data.advance(n);
                        if data.is_empty() {
                            this.step = Step::Reading;
                        }
                    }
                    _ => {
                        this.link.close();
                        return Poll::Ready(());
                    }
                },
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
