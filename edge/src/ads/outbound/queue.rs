//! A bounded queue with one sender and one receiver: from a stream task to its response
//! body (chunks), and from the dispatcher to a stream task (its push).
//!
//! tokio's `mpsc` allocates a block of 32 slots with every channel (1 KiB for `Bytes`),
//! kept for the stream's life; this holds a `VecDeque` that grows to what was queued at
//! most (`capacity` items), behind one small lock that only the two ends take.
//!
//! A response body takes its chunks *held* ([`Receiver::poll_recv_held`]): a chunk keeps
//! its place in the queue until HTTP/2 has written it to the connection, so a proxy that
//! stops reading stops its stream task's sends (and its send timeout runs) after
//! `capacity` chunks, instead of HTTP/2 taking every response into its own buffers.

use bytes::Bytes;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// A queue of at most `capacity` chunks (at least one).
pub(crate) fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new(State {
        queue: VecDeque::new(),
        capacity: capacity.max(1),
        held: 0,
        receiver: None,
        sender: None,
        sender_gone: false,
        receiver_gone: false,
    }));
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

struct State<T> {
    queue: VecDeque<T>,
    capacity: usize,
    /// Chunks taken held and not yet dropped: they count against `capacity`.
    held: usize,
    /// Who waits for a chunk (the body) and for room (the task).
    receiver: Option<Waker>,
    sender: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

impl<T> State<T> {
    fn full(&self) -> bool {
        self.queue.len() + self.held >= self.capacity
    }

    /// For a receiver that found the queue empty: the end once the sender is gone, else
    /// wait for it.
    fn ended_or_wait<R>(&mut self, cx: &mut Context<'_>) -> Poll<Option<R>> {
        if self.sender_gone {
            return Poll::Ready(None);
        }
        self.receiver = Some(cx.waker().clone());
        Poll::Pending
    }
}

fn lock<T>(shared: &Mutex<State<T>>) -> MutexGuard<'_, State<T>> {
    // Every update is a single field or push/pop: a panic cannot leave it half done.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn wake(waker: &mut Option<Waker>) {
    if let Some(w) = waker.take() {
        w.wake();
    }
}

/// The receiver is gone: the stream ended.
#[derive(PartialEq, Eq, thiserror::Error)]
#[error("the response stream is closed")]
pub(crate) struct Closed<T = Bytes>(pub T);

impl<T> std::fmt::Debug for Closed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Closed")
    }
}

/// The stream task's end.
pub(crate) struct Sender<T = Bytes> {
    shared: Arc<Mutex<State<T>>>,
}

impl<T> Sender<T> {
    /// Queues `chunk`, waiting for room.
    pub(crate) async fn send(&self, chunk: T) -> Result<(), Closed<T>> {
        let mut chunk = Some(chunk);
        std::future::poll_fn(|cx| self.poll_send(cx, &mut chunk)).await
    }

    fn poll_send(
        &self,
        cx: &mut Context<'_>,
        chunk: &mut Option<T>,
    ) -> Poll<Result<(), Closed<T>>> {
        let mut s = lock(&self.shared);
        let Some(c) = chunk.take() else {
            return Poll::Ready(Ok(()));
        };
        if s.receiver_gone {
            return Poll::Ready(Err(Closed(c)));
        }
        if s.full() {
            *chunk = Some(c);
            s.sender = Some(cx.waker().clone());
            return Poll::Pending;
        }
        s.queue.push_back(c);
        wake(&mut s.receiver);
        Poll::Ready(Ok(()))
    }

    /// Queues `chunk` if there is room.
    pub(crate) fn try_send(&self, chunk: T) -> Result<(), Closed<T>> {
        let mut s = lock(&self.shared);
        if s.receiver_gone || s.full() {
            return Err(Closed(chunk));
        }
        s.queue.push_back(chunk);
        wake(&mut s.receiver);
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = lock(&self.shared);
        s.sender_gone = true;
        wake(&mut s.receiver);
    }
}

/// The response body's end.
pub(crate) struct Receiver<T = Bytes> {
    shared: Arc<Mutex<State<T>>>,
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl<T> Receiver<T> {
    /// The next chunk; `None` once the sender is gone and every chunk was taken.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = lock(&self.shared);
        if let Some(c) = s.queue.pop_front() {
            wake(&mut s.sender);
            return Poll::Ready(Some(c));
        }
        s.ended_or_wait(cx)
    }

    /// The next item; `None` once the sender is gone and every item was taken.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }
}

impl Receiver<Bytes> {
    /// The next chunk, which keeps its place in the queue until every copy of it is
    /// dropped (HTTP/2 drops a DATA chunk once it has written it), its bytes counted in
    /// `queued` meanwhile; `None` once the sender is gone and every chunk was taken.
    pub(crate) fn poll_recv_held(
        &mut self,
        cx: &mut Context<'_>,
        queued: &Gauge,
    ) -> Poll<Option<Bytes>> {
        let mut s = lock(&self.shared);
        if let Some(chunk) = s.queue.pop_front() {
            s.held += 1;
            drop(s);
            queued.inc_by(chunk.len() as i64);
            return Poll::Ready(Some(Bytes::from_owner(Held {
                chunk,
                queue: self.shared.clone(),
                queued: queued.clone(),
            })));
        }
        s.ended_or_wait(cx)
    }
}

/// A chunk taken held: dropping it gives its place in the queue back.
struct Held {
    chunk: Bytes,
    queue: Arc<Mutex<State<Bytes>>>,
    queued: Gauge,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.chunk
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.queued.dec_by(self.chunk.len() as i64);
        let mut s = lock(&self.queue);
        s.held -= 1;
        wake(&mut s.sender);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut s = lock(&self.shared);
        s.receiver_gone = true;
        // What is queued goes now, not when the task notices.
        s.queue = VecDeque::new();
        wake(&mut s.sender);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn chunks_in_order_then_the_end() {
        let (tx, mut rx) = channel(2);
        tx.send(Bytes::from_static(b"a")).await.unwrap();
        tx.try_send(Bytes::from_static(b"b")).unwrap();
        assert!(tx.try_send(Bytes::from_static(b"c")).is_err(), "full");
        assert_eq!(rx.recv().await.unwrap(), "a");
        tx.send(Bytes::from_static(b"c")).await.unwrap();
        drop(tx);
        assert_eq!(rx.recv().await.unwrap(), "b");
        assert_eq!(rx.recv().await.unwrap(), "c");
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_chunk_taken_held_keeps_its_place_until_dropped() {
        let (tx, mut rx) = channel(2);
        let queued = Gauge::default();
        tx.send(Bytes::from_static(b"ab")).await.unwrap();
        let a = std::future::poll_fn(|cx| rx.poll_recv_held(cx, &queued))
            .await
            .unwrap();
        assert_eq!(a, "ab");
        assert_eq!(queued.get(), 2);
        let b = a.slice(1..);
        tx.try_send(Bytes::from_static(b"c")).unwrap();
        assert!(
            tx.try_send(Bytes::from_static(b"d")).is_err(),
            "the held chunk and the queued one fill it"
        );
        drop(a);
        assert!(
            tx.try_send(Bytes::from_static(b"d")).is_err(),
            "a copy is left"
        );
        let waiting = tokio::spawn(async move {
            tx.send(Bytes::from_static(b"d")).await.unwrap();
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(b);
        waiting.await.unwrap();
        assert_eq!(queued.get(), 0);
        assert_eq!(rx.recv().await.unwrap(), "c");
        assert_eq!(rx.recv().await.unwrap(), "d");
    }

    #[tokio::test]
    async fn a_full_queue_waits_for_room_and_fails_once_the_receiver_is_gone() {
        let (tx, mut rx) = channel(1);
        tx.send(Bytes::from_static(b"a")).await.unwrap();
        let waiting = tokio::spawn(async move {
            tx.send(Bytes::from_static(b"b")).await.unwrap();
            tx
        });
        tokio::task::yield_now().await;
        assert_eq!(rx.recv().await.unwrap(), "a");
        let tx = waiting.await.unwrap();
        drop(rx);
        assert_eq!(
            tx.send(Bytes::from_static(b"c")).await,
            Err(Closed(Bytes::from_static(b"c")))
        );
    }
}
