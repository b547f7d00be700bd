//! Istio's `debounce` (pilot/pkg/xds/discovery.go), event for event.
//!
//! ```text
//!  events ──► merge into `req` ──► quiet for `after`, or `max` since the batch's first
//!                                   event, and no push in flight ──► push(req)
//! ```
//!
//! Each event restarts the quiet period. The push happens once `after` has passed since
//! the last event, or `max` since the first event of the batch, whichever comes first.
//! An event's time is when its source saw it (the request's start), not when it got here. At
//! most one push is in flight: events that arrive meanwhile are merged and considered
//! when it completes. Requests are merged with [`PushRequest::merge`]. With EDS debounce
//! off, endpoint-only requests are pushed at once, outside the batch.
//!
//! Istio returns on stop and drops what is pending; here the input closing ends the loop
//! after pushing what is pending, so a clean shutdown loses no push.

use futures::stream::{FuturesUnordered, StreamExt};
use shoal_proto::change::TriggerReason;
use shoal_proto::push::PushRequest;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};

/// Debounce timing (Istio's `PILOT_DEBOUNCE_AFTER`, `PILOT_DEBOUNCE_MAX`,
/// `PILOT_ENABLE_EDS_DEBOUNCE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DebounceConfig {
    /// Quiet period: push once no event has happened for this long (events are dated
    /// when their source saw them).
    pub after: Duration,
    /// Cap: push once the batch's first event is this old, even if events keep coming.
    pub max: Duration,
    /// Debounce endpoint-only (EDS) requests too; otherwise they are pushed at once.
    pub eds: bool,
}

impl Default for DebounceConfig {
    fn default() -> Self {
        Self {
            after: Duration::from_millis(100),
            max: Duration::from_secs(10),
            eds: true,
        }
    }
}

type PushFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs until `events` closes, then pushes what is pending and waits for every push.
pub async fn debounce<P, F>(events: mpsc::Receiver<PushRequest>, config: DebounceConfig, push: P)
where
    P: Fn(PushRequest) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    debounce_with_clock(events, config, SystemTime::now, push).await
}

/// [`debounce`] reading the wall clock (which dates events) from `wall`.
pub(crate) async fn debounce_with_clock<P, F>(
    mut events: mpsc::Receiver<PushRequest>,
    config: DebounceConfig,
    wall: fn() -> SystemTime,
    push: P,
) where
    P: Fn(PushRequest) -> F,
    F: Future<Output = ()> + Send + 'static,
{
    let push = |req| -> PushFuture { Box::pin(push(req)) };
    let mut state = State::new(config, wall);
    let mut in_flight: Option<PushFuture> = None;
    let mut immediate = FuturesUnordered::new();
    loop {
        tokio::select! {
            // `freeCh`: the push in flight completed.
            () = async { in_flight.as_mut().expect("guarded").await }, if in_flight.is_some() => {
                in_flight = state.on_free(Instant::now()).map(push);
            }
            event = events.recv() => {
                let Some(mut req) = event else { break };
                if req.changes.reasons.is_empty() {
                    req.changes.reasons.insert(TriggerReason::Unknown, 1);
                }
                if !config.eds && !req.changes.full {
                    immediate.push(push(req));
                    continue;
                }
                state.on_event(req, Instant::now());
            }
            // `timeChan`
            () = sleep_until(state.deadline.unwrap_or_else(Instant::now)), if state.deadline.is_some() => {
                state.deadline = None;
                if in_flight.is_none() {
                    in_flight = state.push_worker(Instant::now()).map(push);
                }
            }
            Some(()) = immediate.next(), if !immediate.is_empty() => {}
        }
    }
    // Shutting down: finish the push in flight, then push what is pending at once.
    if let Some(f) = in_flight {
        f.await;
    }
    if let Some(req) = state.req.take() {
        tracing::debug!(
            events = state.debounced_events,
            "pushing pending request at shutdown"
        );
        push(req).await;
    }
    while immediate.next().await.is_some() {}
}

/// The loop's variables, as in Istio's `debounce`.
struct State {
    config: DebounceConfig,
    /// The wall clock events are dated by.
    wall: fn() -> SystemTime,
    req: Option<PushRequest>,
    /// When the batch's first event arrived (`startDebounce`).
    start_debounce: Instant,
    /// When the last event arrived (`lastConfigUpdateTime`).
    last_update: Instant,
    debounced_events: u64,
    /// The armed timer (`timeChan`).
    deadline: Option<Instant>,
    push_counter: u64,
}

impl State {
    fn new(config: DebounceConfig, wall: fn() -> SystemTime) -> Self {
        let now = Instant::now();
        Self {
            config,
            wall,
            req: None,
            start_debounce: now,
            last_update: now,
            debounced_events: 0,
            deadline: None,
            push_counter: 0,
        }
    }

    fn on_event(&mut self, req: PushRequest, now: Instant) {
        // The event happened when the source saw it (a file event is read in batches):
        // the quiet period counts from then, as Istio's does from its informer's event.
        // An event older than the quiet period counts as quiet already.
        let age = (self.wall)()
            .duration_since(req.changes.start())
            .unwrap_or_default()
            .min(self.config.after);
        let happened = now.checked_sub(age).unwrap_or(now);
        self.last_update = self.last_update.max(happened);
        if self.debounced_events == 0 {
            self.last_update = happened;
            self.deadline = Some(happened + self.config.after);
            self.start_debounce = happened;
        }
        self.debounced_events += 1;
        self.req = Some(match self.req.take() {
            Some(pending) => pending.merge(req),
            None => req,
        });
    }

    fn on_free(&mut self, now: Instant) -> Option<PushRequest> {
        self.push_worker(now)
    }

    /// Istio's `pushWorker`: the request to push now, or re-arms the timer for the rest of
    /// the quiet period.
    fn push_worker(&mut self, now: Instant) -> Option<PushRequest> {
        let event_delay = now.saturating_duration_since(self.start_debounce);
        let quiet_time = now.saturating_duration_since(self.last_update);
        if event_delay >= self.config.max || quiet_time >= self.config.after {
            let req = self.req.take()?;
            self.push_counter += 1;
            tracing::info!(
                push = self.push_counter,
                events = self.debounced_events,
                ?quiet_time,
                ?event_delay,
                full = req.changes.full,
                "push debounce stable"
            );
            self.debounced_events = 0;
            Some(req)
        } else {
            self.deadline = Some(now + (self.config.after - quiet_time));
            None
        }
    }
}

#[cfg(test)]
mod tests;
