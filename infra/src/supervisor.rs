//! One supervisor for every binary: it owns the drain, runs the tier's tasks, and decides
//! how the process ends. A critical task that ends before shutdown — with an error, a
//! panic, or simply returning — is fatal: the others are drained and the process exits
//! with that task's error. SIGTERM or ctrl-c drains every task within a bounded grace.
//!
//! ```text
//! main: sup = Supervisor::new()
//!       sup.critical("edge", edge.run(sup.watcher()))
//!       sup.critical("admin", admin.serve(sup.watcher().wait()))
//!       sup.run(grace) ── signal ──► drain ──► every task ends (or grace elapses)
//!                     └─ a critical task ended first ──► drain the rest ──► Err
//! ```

use super::runtime::{Drain, DrainWatch, shutdown_signal};
use std::collections::HashMap;
use std::error::Error as StdError;
use std::future::Future;
use std::time::Duration;
use tokio::task::{Id, JoinError, JoinSet};
use tracing::{Instrument, error, info, warn};

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// How a supervised process failed.
#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("{task} stopped before shutdown was asked for")]
    Ended { task: &'static str },
    #[error("{task} failed: {source}")]
    Failed {
        task: &'static str,
        #[source]
        source: BoxError,
    },
    #[error("{task} panicked")]
    Panicked { task: &'static str },
}

/// Runs a binary's tasks under one drain.
pub struct Supervisor {
    drain: Drain,
    tasks: JoinSet<Result<(), BoxError>>,
    names: HashMap<Id, &'static str>,
}

impl Default for Supervisor {
    fn default() -> Self {
        Self::new()
    }
}

impl Supervisor {
    pub fn new() -> Self {
        Self {
            drain: Drain::new(),
            tasks: JoinSet::new(),
            names: HashMap::new(),
        }
    }

    /// What a task watches to know when to stop.
    pub fn watcher(&self) -> DrainWatch {
        self.drain.watcher()
    }

    /// Runs `task`, in a span named after it, as critical: its end before shutdown ends
    /// the process.
    pub fn critical<E>(
        &mut self,
        name: &'static str,
        task: impl Future<Output = Result<(), E>> + Send + 'static,
    ) where
        E: Into<BoxError>,
    {
        let span = tracing::info_span!("task", name);
        let handle = self
            .tasks
            .spawn(async move { task.await.map_err(Into::into) }.instrument(span));
        self.names.insert(handle.id(), name);
    }

    /// Waits for SIGTERM/ctrl-c or for a critical task to end, then drains every task
    /// for at most `grace`. `Ok` only after a clean, signalled shutdown.
    pub async fn run(self, grace: Duration) -> Result<(), SupervisorError> {
        self.run_until(shutdown_signal(), grace).await
    }

    /// [`Supervisor::run`] with the shutdown signal given (tests, embedding).
    pub async fn run_until(
        mut self,
        shutdown: impl Future<Output = ()>,
        grace: Duration,
    ) -> Result<(), SupervisorError> {
        let outcome = tokio::select! {
            () = shutdown => Ok(()),
            Some(ended) = self.tasks.join_next_with_id() => Err(self.failure(ended)),
        };
        if let Err(e) = &outcome {
            error!("{e}; shutting down");
        }
        info!(?grace, "draining");
        self.drain.signal();
        let rest = async {
            while let Some(ended) = self.tasks.join_next_with_id().await {
                match self.failure(ended) {
                    SupervisorError::Ended { task } => info!(task, "stopped"),
                    e => warn!("while draining: {e}"),
                }
            }
        };
        if tokio::time::timeout(grace, rest).await.is_err() {
            warn!(?grace, "drain grace elapsed; stopping the tasks left");
            self.tasks.abort_all();
        }
        outcome
    }

    /// What a task's end means, when it was not asked to end.
    fn failure(&self, ended: Result<(Id, Result<(), BoxError>), JoinError>) -> SupervisorError {
        let name = |id| self.names.get(&id).copied().unwrap_or("a task");
        match ended {
            Ok((id, Ok(()))) => SupervisorError::Ended { task: name(id) },
            Ok((id, Err(source))) => SupervisorError::Failed {
                task: name(id),
                source,
            },
            Err(e) if e.is_panic() => SupervisorError::Panicked { task: name(e.id()) },
            Err(e) => SupervisorError::Ended { task: name(e.id()) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("boom")]
    struct Boom;

    #[tokio::test(start_paused = true)]
    async fn a_signal_drains_every_task() {
        let mut sup = Supervisor::new();
        for name in ["a", "b"] {
            let watch = sup.watcher();
            sup.critical(name, async move {
                watch.wait().await;
                Ok::<(), Boom>(())
            });
        }
        let shutdown = tokio::time::sleep(Duration::from_secs(1));
        sup.run_until(shutdown, Duration::from_secs(5))
            .await
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_critical_task_that_fails_is_fatal_and_the_rest_drain() {
        let mut sup = Supervisor::new();
        let watch = sup.watcher();
        sup.critical("steady", async move {
            watch.wait().await;
            Ok::<(), Boom>(())
        });
        sup.critical("failing", async { Err::<(), _>(Boom) });
        let err = sup
            .run_until(std::future::pending(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                SupervisorError::Failed {
                    task: "failing",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_critical_task_that_returns_is_fatal_and_a_stuck_one_is_bounded() {
        let mut sup = Supervisor::new();
        sup.critical("stuck", async {
            std::future::pending::<()>().await;
            Ok::<(), Boom>(())
        });
        sup.critical("quitter", async { Ok::<(), Boom>(()) });
        let err = sup
            .run_until(std::future::pending(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(err, SupervisorError::Ended { task: "quitter" }),
            "{err}"
        );
    }
}
