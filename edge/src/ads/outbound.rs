//! The response stream tonic sends: a stream task's bounded channel, ended early with a
//! status when the task closes the stream on an error.

use futures::Stream;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};
use tonic::Status;

/// Responses from a bounded channel, then the closing status (if any).
pub struct Outbound<T> {
    rx: mpsc::Receiver<T>,
    close: Option<oneshot::Receiver<Status>>,
    done: bool,
}

impl<T> Outbound<T> {
    pub(crate) fn new(rx: mpsc::Receiver<T>, close: oneshot::Receiver<Status>) -> Self {
        Outbound {
            rx,
            close: Some(close),
            done: false,
        }
    }
}

impl<T> Stream for Outbound<T> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(close) = self.close.as_mut() {
            match Pin::new(close).poll(cx) {
                Poll::Ready(Ok(status)) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(status)));
                }
                // Ended without an error: drain what is buffered, then end.
                Poll::Ready(Err(_)) => self.close = None,
                Poll::Pending => {}
            }
        }
        self.rx.poll_recv(cx).map(|r| r.map(Ok))
    }
}
