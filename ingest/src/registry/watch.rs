//! File system notifications, coalesced into batches of changed paths.
//!
//! notify's callback runs on its own thread and never blocks: paths go over a bounded
//! channel, and when it is full an overflow flag turns the next batch into a full rescan
//! (as when the kernel's own queue overflows).

use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Changes seen since the last batch.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Batch {
    pub paths: BTreeSet<PathBuf>,
    /// Events were lost: rescan everything.
    pub rescan: bool,
    /// When the batch's last change was seen: the debounce's quiet period counts from
    /// it, not from when the batch was read (`None` when unknown: events were lost).
    pub last_seen: Option<SystemTime>,
}

enum Signal {
    Paths(Vec<PathBuf>),
    Rescan,
}

/// A signal and when notify delivered it.
type Seen = (Signal, SystemTime);

pub(crate) struct DirWatcher {
    root: PathBuf,
    watcher: RecommendedWatcher,
    rx: mpsc::Receiver<Seen>,
    overflow: Arc<AtomicBool>,
}

/// Whether an event can change what a file holds (opens and reads cannot).
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

impl DirWatcher {
    /// Watches `root` recursively; `capacity` bounds the signals queued between batches.
    pub fn start(root: &Path, capacity: usize) -> notify::Result<Self> {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let overflow = Arc::new(AtomicBool::new(false));
        let flag = overflow.clone();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
            let signal = match event {
                Ok(e) if e.need_rescan() => Signal::Rescan,
                Ok(e) if is_change(&e.kind) => Signal::Paths(e.paths),
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!("file watch error, rescanning: {e}");
                    Signal::Rescan
                }
            };
            if tx.try_send((signal, SystemTime::now())).is_err() {
                flag.store(true, Ordering::Release);
            }
        })?;
        watcher.watch(root, RecursiveMode::Recursive)?;
        Ok(Self {
            root: root.to_path_buf(),
            watcher,
            rx,
            overflow,
        })
    }

    /// Watches the root again (after it was removed and re-created).
    pub fn rewatch(&mut self) -> notify::Result<()> {
        let _ = self.watcher.unwatch(&self.root);
        self.watcher.watch(&self.root, RecursiveMode::Recursive)
    }

    /// The next batch: waits for a change, then gathers more until `quiet` passes without
    /// one (or `max` since the first). `None` once the watcher is gone.
    pub async fn next_batch(&mut self, quiet: Duration, max: Duration) -> Option<Batch> {
        let mut batch = Batch::default();
        let first = self.rx.recv().await?;
        let deadline = Instant::now() + max;
        add(&mut batch, first);
        loop {
            let wait = quiet.min(deadline.saturating_duration_since(Instant::now()));
            if wait.is_zero() {
                break;
            }
            match tokio::time::timeout(wait, self.rx.recv()).await {
                Ok(Some(signal)) => add(&mut batch, signal),
                Ok(None) | Err(_) => break,
            }
        }
        if self.overflow.swap(false, Ordering::AcqRel) {
            tracing::warn!("file events overflowed; rescanning");
            batch.rescan = true;
            // The lost events may be later than any seen.
            batch.last_seen = None;
        }
        Some(batch)
    }
}

fn add(batch: &mut Batch, (signal, seen): Seen) {
    batch.last_seen = batch.last_seen.max(Some(seen));
    match signal {
        Signal::Paths(paths) => batch.paths.extend(paths),
        Signal::Rescan => batch.rescan = true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_is_dated_by_its_last_event_not_by_when_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut watcher = DirWatcher::start(dir.path(), 64).unwrap();
        let before = SystemTime::now();
        std::fs::write(dir.path().join("a.yaml"), "kind: Service\n").unwrap();
        let quiet = Duration::from_millis(20);
        let batch = watcher
            .next_batch(quiet, Duration::from_secs(5))
            .await
            .unwrap();
        let read = SystemTime::now();
        assert!(
            batch.paths.contains(&dir.path().join("a.yaml")),
            "{batch:?}"
        );
        let seen = batch.last_seen.expect("dated");
        assert!(seen >= before, "seen before the write");
        assert!(
            read.duration_since(seen).unwrap() >= quiet,
            "the batch waited {quiet:?} after its last event"
        );
    }
}
