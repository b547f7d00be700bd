//! Istio's `PushQueue`: at most one pending push per connection, merged on re-enqueue.
//!
//! ```text
//!  enqueue(conn, ev) ──► pending[conn] (merged) ──► FIFO order ──► dequeue_throttled()
//!        ▲                                                            │ (permit + DoneGuard)
//!        └──── in progress? stash, re-queued on mark_done ◄── guard dropped
//! ```
//!
//! - A connection that is pending gets its events merged ([`Merge`]), so the queue holds
//!   at most one entry per connection: it is bounded by the number of connections.
//! - A connection that was dequeued is *in progress* until [`PushQueue::mark_done`]; an event
//!   for it meanwhile is stashed (merged) and re-queued when it is done, so a connection
//!   never has two pushes at once and never misses one.
//! - [`PushQueue::dequeue_throttled`] is Istio's `doSendPushes`: a global semaphore bounds
//!   pushes in flight (`SHOAL_PUSH_THROTTLE`); the returned [`DoneGuard`] releases the
//!   permit and marks the connection done when dropped.

mod event;

pub use event::PushEvent;

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// How two pending events for one connection combine (Istio's `PushRequest.Merge`).
pub trait Merge {
    /// `self` is the older event, `newer` the one just enqueued.
    fn merge(self, newer: Self) -> Self;
}

/// One pending push per connection, FIFO across connections.
pub struct PushQueue<K, E> {
    state: Mutex<State<K, E>>,
    notify: Notify,
}

struct State<K, E> {
    /// Keys in FIFO order. May hold keys already removed (skipped on dequeue); keys are
    /// never reused, so a stale entry cannot resurrect a connection.
    order: VecDeque<K>,
    pending: HashMap<K, E>,
    /// Dequeued and not yet done; `Some` when an event arrived meanwhile.
    in_progress: HashMap<K, Option<E>>,
    closed: bool,
}

impl<K, E> Default for PushQueue<K, E> {
    fn default() -> Self {
        PushQueue {
            state: Mutex::new(State {
                order: VecDeque::new(),
                pending: HashMap::new(),
                in_progress: HashMap::new(),
                closed: false,
            }),
            notify: Notify::new(),
        }
    }
}

impl<K: Eq + Hash + Clone, E: Merge> PushQueue<K, E> {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State<K, E>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `event` for `key`, merging with what is pending (or stashed while in progress).
    pub fn enqueue(&self, key: K, event: E) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        if let Some(stash) = s.in_progress.get_mut(&key) {
            *stash = Some(match stash.take() {
                Some(older) => older.merge(event),
                None => event,
            });
            return;
        }
        if let Some(older) = s.pending.remove(&key) {
            s.pending.insert(key, older.merge(event));
            return;
        }
        s.order.push_back(key.clone());
        s.pending.insert(key, event);
        drop(s);
        self.notify.notify_one();
    }

    /// The oldest pending connection and its (merged) event, marked in progress. Waits while
    /// the queue is empty; `None` once the queue is closed.
    pub async fn dequeue(&self) -> Option<(K, E)> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                if s.closed {
                    return None;
                }
                while let Some(key) = s.order.pop_front() {
                    if let Some(event) = s.pending.remove(&key) {
                        s.in_progress.insert(key.clone(), None);
                        return Some((key, event));
                    }
                }
            }
            notified.await;
        }
    }

    /// Istio's `doSendPushes` step: waits for a permit of `throttle`, then for a connection.
    /// Dropping the returned guard marks the connection done and releases the permit.
    pub async fn dequeue_throttled(
        self: &Arc<Self>,
        throttle: &Arc<Semaphore>,
    ) -> Option<(K, E, DoneGuard<K, E>)> {
        let permit = throttle.clone().acquire_owned().await.ok()?;
        let (key, event) = self.dequeue().await?;
        let guard = DoneGuard {
            key: Some(key.clone()),
            queue: self.clone(),
            _permit: permit,
        };
        Some((key, event, guard))
    }

    /// Ends the push of `key`; an event that arrived meanwhile is queued (at the back).
    pub fn mark_done(&self, key: &K) {
        let mut s = self.lock();
        if let Some(Some(event)) = s.in_progress.remove(key) {
            if s.closed {
                return;
            }
            s.order.push_back(key.clone());
            s.pending.insert(key.clone(), event);
            drop(s);
            self.notify.notify_one();
        }
    }

    /// Forgets a connection that went away, pending or in progress.
    pub fn remove(&self, key: &K) {
        let mut s = self.lock();
        s.pending.remove(key);
        s.in_progress.remove(key);
    }

    /// Drops everything and wakes every waiter with `None`.
    pub fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.order.clear();
        s.pending.clear();
        s.in_progress.clear();
        drop(s);
        self.notify.notify_waiters();
    }

    /// Connections waiting to be pushed.
    pub fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// Connections being pushed.
    pub fn in_progress(&self) -> usize {
        self.lock().in_progress.len()
    }
}

/// Held while a connection's push is in flight; dropping it is Istio's `done()`.
pub struct DoneGuard<K: Eq + Hash + Clone, E: Merge> {
    key: Option<K>,
    queue: Arc<PushQueue<K, E>>,
    _permit: OwnedSemaphorePermit,
}

impl<K: Eq + Hash + Clone, E: Merge> Drop for DoneGuard<K, E> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.queue.mark_done(&key);
        }
    }
}

impl<K: Eq + Hash + Clone + std::fmt::Debug, E: Merge> std::fmt::Debug for DoneGuard<K, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoneGuard").field("key", &self.key).finish()
    }
}

#[cfg(test)]
mod tests;
