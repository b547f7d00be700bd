//! Process plumbing every binary shares: tracing set-up, the shutdown signal, and the one
//! drain primitive tiers use to stop their tasks.
//!
//! ```text
//! main: drain = Drain::new() ──watcher()──► task A: select! { _ = w.wait() => break, .. }
//!        shutdown_signal().await            task B: serve(addr, w.wait())
//!        drain.signal_and_wait(grace) ──► waits until every watcher is dropped (bounded)
//! ```

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;

/// Installs text logging filtered by `RUST_LOG` (default `info`), as
/// [`telemetry::init`](crate::telemetry::init) does by default; for tests and tools. A
/// second call is a no-op.
pub fn init_tracing() {
    // Without an endpoint nothing can fail and there is nothing to flush.
    let _ = crate::telemetry::init(&crate::telemetry::TelemetryArgs::default(), "shoal");
}

/// Resolves on ctrl-c or SIGTERM (what Kubernetes sends), whichever comes first.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("received ctrl-c"),
        () = term => tracing::info!("received SIGTERM"),
    }
}

/// The owner side of a drain: signals every [`DrainWatch`] to stop, then waits for them.
#[derive(Debug)]
pub struct Drain {
    tx: watch::Sender<bool>,
}

/// A task's view of the drain: [`DrainWatch::wait`] resolves once draining starts. Drop it
/// when the task is done so [`Drain::signal_and_wait`] knows.
#[derive(Clone, Debug)]
pub struct DrainWatch {
    rx: watch::Receiver<bool>,
}

impl Default for Drain {
    fn default() -> Self {
        Self::new()
    }
}

impl Drain {
    pub fn new() -> Self {
        Self {
            tx: watch::channel(false).0,
        }
    }

    pub fn watcher(&self) -> DrainWatch {
        DrainWatch {
            rx: self.tx.subscribe(),
        }
    }

    /// Starts draining: every watcher's `wait()` resolves.
    pub fn signal(&self) {
        self.tx.send_replace(true);
    }

    /// Signals, then waits up to `grace` for every watcher to be dropped. Returns `true`
    /// when all tasks finished in time.
    pub async fn signal_and_wait(self, grace: Duration) -> bool {
        self.signal();
        tokio::time::timeout(grace, self.tx.closed()).await.is_ok()
    }
}

impl DrainWatch {
    pub fn is_draining(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves when draining starts (or the [`Drain`] is dropped). The future owns its
    /// receiver, so it can be handed to a server as its `'static` shutdown signal.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        let mut rx = self.rx.clone();
        async move {
            // Err: the Drain is gone, which also means "stop".
            let _ = rx.wait_for(|draining| *draining).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn watchers_wake_and_drain_completes() {
        let drain = Drain::new();
        let watch = drain.watcher();
        assert!(!watch.is_draining());
        let task = tokio::spawn(async move {
            watch.wait().await;
            assert!(watch.is_draining());
        });
        assert!(drain.signal_and_wait(Duration::from_secs(1)).await);
        task.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn grace_is_bounded_when_a_task_hangs() {
        let drain = Drain::new();
        let _stuck = drain.watcher();
        assert!(!drain.signal_and_wait(Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn dropped_drain_releases_watchers() {
        let drain = Drain::new();
        let watch = drain.watcher();
        drop(drain);
        watch.wait().await;
    }
}
