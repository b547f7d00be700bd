//! The server's shared state: the store behind one lock, and the open watches it feeds.
//!
//! Every write and every watch registration happens under the same lock, so a watch that
//! takes its replay from the history and registers for live changes in one critical
//! section can neither miss nor repeat a change. Each watch has a bounded queue; a watch
//! whose queue is full is ended instead of buffered without limit, and its client resumes
//! from the last resourceVersion it read, as after any dropped connection.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::resource::GroupResource;
use crate::selector::Selection;
use crate::store::{Change, Result, Store};
use crate::watch::WatchStart;

/// What a new watch starts with.
pub struct OpenedWatch {
    /// Current objects (for a watch from "now") or retained changes (from a revision).
    pub backlog: Backlog,
    /// The revision the backlog brings the watch to.
    pub revision: u64,
    pub live: mpsc::Receiver<Arc<Change>>,
}

pub enum Backlog {
    CurrentObjects(Vec<Arc<serde_json::Value>>),
    Changes(Vec<Arc<Change>>),
}

struct OpenWatch {
    resource: GroupResource,
    sender: mpsc::Sender<Arc<Change>>,
}

struct State {
    store: Store,
    watches: Vec<OpenWatch>,
    bookmark_interval: Duration,
}

pub struct Hub {
    state: Mutex<State>,
    watch_queue_capacity: usize,
    /// Empty lists say `"items": null` (see [`crate::Settings::null_empty_lists`]).
    null_empty_lists: bool,
}

impl Hub {
    pub fn new(store: Store, bookmark_interval: Duration, watch_queue_capacity: usize) -> Self {
        Self {
            state: Mutex::new(State {
                store,
                watches: Vec::new(),
                bookmark_interval,
            }),
            watch_queue_capacity: watch_queue_capacity.max(1),
            null_empty_lists: false,
        }
    }

    /// Empty lists are written `"items": null` from now on.
    #[must_use]
    pub fn with_null_empty_lists(mut self, null: bool) -> Self {
        self.null_empty_lists = null;
        self
    }

    pub fn null_empty_lists(&self) -> bool {
        self.null_empty_lists
    }

    /// Reads the store.
    pub fn read<T>(&self, read: impl FnOnce(&Store) -> T) -> T {
        read(&self.lock().store)
    }

    /// Writes the store and sends the change to the watches of its resource.
    pub fn write(
        &self,
        write: impl FnOnce(&mut Store) -> Result<Arc<Change>>,
    ) -> Result<Arc<Change>> {
        let mut state = self.lock();
        let change = write(&mut state.store)?;
        state.watches.retain(|watch| {
            if watch.resource != change.resource {
                return !watch.sender.is_closed();
            }
            match watch.sender.try_send(change.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::debug!(resource = %change.resource, "watch queue full: ending the watch");
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        Ok(change)
    }

    /// Serves one more resource type.
    pub fn register(&self, resource: crate::resource::ResourceType) {
        self.lock().store.register(resource);
    }

    /// Compacts the store's history.
    pub fn compact(&self) {
        self.lock().store.compact();
    }

    /// Registers a watch and returns what it must send first. Fails with `Expired` when
    /// the history no longer reaches back to the requested revision.
    pub fn open_watch(
        &self,
        resource: &GroupResource,
        selection: &Selection,
        start: WatchStart,
    ) -> Result<OpenedWatch> {
        let mut state = self.lock();
        let backlog = match start {
            WatchStart::Now { .. } => {
                Backlog::CurrentObjects(state.store.select(resource, selection))
            }
            WatchStart::After(revision) => {
                Backlog::Changes(state.store.changes_since(resource, revision)?)
            }
        };
        let revision = match start {
            WatchStart::After(revision) => revision.max(state.store.revision()),
            WatchStart::Now { .. } => state.store.revision(),
        };
        let (sender, live) = mpsc::channel(self.watch_queue_capacity);
        state.watches.push(OpenWatch {
            resource: resource.clone(),
            sender,
        });
        Ok(OpenedWatch {
            backlog,
            revision,
            live,
        })
    }

    /// Takes the changes already queued for a watch together with the current revision,
    /// under the lock: once the watch has sent them, it has seen everything up to that
    /// revision, so a BOOKMARK there cannot skip a change.
    pub fn catch_up(&self, live: &mut mpsc::Receiver<Arc<Change>>) -> (Vec<Arc<Change>>, u64) {
        let state = self.lock();
        let mut queued = Vec::new();
        while let Ok(change) = live.try_recv() {
            queued.push(change);
        }
        (queued, state.store.revision())
    }

    /// Ends every open watch (each stream ends once it has sent what it had queued).
    pub fn drop_watches(&self) {
        self.lock().watches.clear();
    }

    pub fn open_watches(&self) -> usize {
        let mut state = self.lock();
        state.watches.retain(|watch| !watch.sender.is_closed());
        state.watches.len()
    }

    pub fn bookmark_interval(&self) -> Duration {
        self.lock().bookmark_interval
    }

    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.lock().bookmark_interval = interval;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves no half-made write: every store method
        // checks before it mutates. Keep serving rather than fail every later test step.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resource::shoal_resources;

    fn hub(queue: usize) -> Hub {
        Hub::new(
            Store::new(shoal_resources(), 100),
            Duration::from_secs(1),
            queue,
        )
    }

    fn create(hub: &Hub, name: &str) {
        let service = json!({"metadata": {"namespace": "a", "name": name}});
        hub.write(|store| store.create(&GroupResource::from("services"), service))
            .unwrap();
    }

    #[test]
    fn a_watch_that_does_not_read_is_ended_not_buffered() {
        let hub = hub(2);
        let services = GroupResource::from("services");
        let start = WatchStart::After(0);
        let mut opened = hub
            .open_watch(&services, &Selection::default(), start)
            .unwrap();
        for name in ["a", "b", "c"] {
            create(&hub, name);
        }
        assert_eq!(hub.open_watches(), 0);
        // What was queued is still delivered; then the stream ends.
        assert!(opened.live.try_recv().is_ok());
        assert!(opened.live.try_recv().is_ok());
        assert!(matches!(
            opened.live.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn a_watch_gets_the_backlog_then_only_later_changes_of_its_resource() {
        let hub = hub(10);
        create(&hub, "a");
        create(&hub, "b");
        let services = GroupResource::from("services");
        let start = WatchStart::After(1);
        let mut opened = hub
            .open_watch(&services, &Selection::default(), start)
            .unwrap();
        let Backlog::Changes(backlog) = &opened.backlog else {
            panic!("expected changes");
        };
        assert_eq!(backlog.iter().map(|c| c.revision).collect::<Vec<_>>(), [2]);
        let pod = json!({"metadata": {"namespace": "a", "name": "p"}});
        hub.write(|store| store.create(&GroupResource::from("pods"), pod))
            .unwrap();
        create(&hub, "c");
        let (queued, revision) = hub.catch_up(&mut opened.live);
        assert_eq!(queued.iter().map(|c| c.revision).collect::<Vec<_>>(), [4]);
        assert_eq!(revision, 4);
    }
}
