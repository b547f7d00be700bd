use super::*;
use shoal_proto::config::{ConfigKey, Kind};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

const AFTER: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(1);

fn config(eds: bool) -> DebounceConfig {
    DebounceConfig {
        after: AFTER,
        max: MAX,
        eds,
    }
}

/// A wall clock that moves with tokio's paused time (from where the test's first reading
/// finds it), so that events are dated in the tests' time.
fn paused_wall() -> SystemTime {
    thread_local! {
        static BASE: Instant = Instant::now();
    }
    let since = BASE.with(|base| Instant::now().duration_since(*base));
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000) + since
}

fn vs(name: &str, revision: u64) -> PushRequest {
    vs_seen(name, revision, Duration::ZERO)
}

/// A VirtualService change its source saw `ago`.
fn vs_seen(name: &str, revision: u64, ago: Duration) -> PushRequest {
    PushRequest::for_change(
        ConfigKey::new(Kind::VirtualService, "default", name),
        revision,
        paused_wall() - ago,
    )
}

fn slice(name: &str, revision: u64) -> PushRequest {
    PushRequest::for_change(
        ConfigKey::new(Kind::EndpointSlice, "default", name),
        revision,
        paused_wall(),
    )
}

fn names(req: &PushRequest) -> Vec<&str> {
    req.changes.config_keys().map(|k| k.name.as_str()).collect()
}

/// A debouncer whose pushes are recorded with the (paused) time they started; each push
/// takes `publish_time` and then waits for a permit when `gate` is set.
struct Harness {
    tx: Option<mpsc::Sender<PushRequest>>,
    pushed: Arc<Mutex<Vec<(Duration, PushRequest)>>>,
    finished: Arc<Mutex<usize>>,
    task: JoinHandle<()>,
    start: Instant,
}

impl Harness {
    fn new(config: DebounceConfig, publish_time: Duration, gate: Option<Arc<Semaphore>>) -> Self {
        let (tx, rx) = mpsc::channel(16);
        let pushed = Arc::new(Mutex::new(Vec::new()));
        let finished = Arc::new(Mutex::new(0));
        let start = Instant::now();
        let (p, f) = (pushed.clone(), finished.clone());
        let task = tokio::spawn(debounce_with_clock(rx, config, paused_wall, move |req| {
            p.lock().unwrap().push((start.elapsed(), req));
            let (f, gate) = (f.clone(), gate.clone());
            async move {
                tokio::time::sleep(publish_time).await;
                if let Some(gate) = gate {
                    gate.acquire().await.unwrap().forget();
                }
                *f.lock().unwrap() += 1;
            }
        }));
        Self {
            tx: Some(tx),
            pushed,
            finished,
            task,
            start,
        }
    }

    async fn send(&self, req: PushRequest) {
        self.tx.as_ref().unwrap().send(req).await.unwrap();
        // Let the debouncer take it before time moves on.
        tokio::task::yield_now().await;
    }

    async fn sleep_until(&self, at: Duration) {
        tokio::time::sleep_until(self.start + at).await;
    }

    fn pushes(&self) -> Vec<(Duration, PushRequest)> {
        self.pushed.lock().unwrap().clone()
    }

    fn push_times(&self) -> Vec<Duration> {
        self.pushes().into_iter().map(|(t, _)| t).collect()
    }

    async fn close(mut self) -> Vec<(Duration, PushRequest)> {
        self.tx.take();
        (&mut self.task).await.unwrap();
        self.pushes()
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

#[tokio::test(start_paused = true)]
async fn pushes_after_the_quiet_period() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    h.send(vs("a", 1)).await;
    h.sleep_until(ms(99)).await;
    assert!(h.pushes().is_empty());
    h.sleep_until(ms(101)).await;
    assert_eq!(h.push_times(), [ms(100)]);
    assert_eq!(names(&h.pushes()[0].1), ["a"]);
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn the_quiet_period_counts_from_when_the_source_saw_the_event() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    // A file event read in a batch 30 ms after it happened.
    h.send(vs_seen("a", 1, ms(30))).await;
    h.sleep_until(ms(69)).await;
    assert!(h.pushes().is_empty());
    h.sleep_until(ms(71)).await;
    assert_eq!(h.push_times(), [ms(70)]);
    // One older than the quiet period is quiet already, and the next one seen later
    // than the batch's last restarts it from its own time.
    h.send(vs_seen("b", 2, ms(500))).await;
    h.sleep_until(ms(72)).await;
    assert_eq!(h.push_times(), [ms(70), ms(71)]);
    h.send(vs_seen("c", 3, ms(10))).await;
    h.send(vs_seen("d", 4, ms(50))).await;
    h.sleep_until(ms(200)).await;
    assert_eq!(
        h.push_times(),
        [ms(70), ms(71), ms(162)],
        "c was last seen, at 62 ms"
    );
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn each_event_restarts_the_quiet_period() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    h.send(vs("a", 1)).await;
    h.sleep_until(ms(60)).await;
    h.send(vs("b", 2)).await;
    h.sleep_until(ms(120)).await;
    h.send(vs("c", 3)).await;
    h.sleep_until(ms(219)).await;
    assert!(h.pushes().is_empty(), "pushed before 100ms of quiet");
    h.sleep_until(ms(300)).await;
    let pushes = h.pushes();
    assert_eq!(h.push_times(), [ms(220)]);
    let req = &pushes[0].1;
    assert_eq!(names(req), ["a", "b", "c"]);
    assert_eq!(req.revision, 3);
    assert_eq!(req.changes.events(), 3);
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn steady_stream_is_pushed_at_max_delay() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    // An event every 50ms never leaves 100ms of quiet: the cap pushes at 1s.
    for i in 0..30u64 {
        h.sleep_until(ms(i * 50)).await;
        h.send(vs(&format!("e{i}"), i + 1)).await;
    }
    let times = h.push_times();
    assert!(!times.is_empty(), "no push under a steady stream");
    assert!(
        times[0] >= MAX && times[0] <= MAX + AFTER,
        "first push at {:?}",
        times[0]
    );
    // The next batch starts with the first event after that push and is capped again.
    assert!(times.iter().all(|t| *t <= ms(1500)));
    let pushes = h.close().await;
    let total: usize = pushes.iter().map(|(_, r)| r.changes.keys.len()).sum();
    assert_eq!(total, 30, "every event pushed exactly once");
    assert!(pushes.len() >= 2);
}

#[tokio::test(start_paused = true)]
async fn one_push_in_flight_and_later_events_merged_after_it() {
    let gate = Arc::new(Semaphore::new(0));
    let h = Harness::new(config(true), Duration::ZERO, Some(gate.clone()));
    h.send(vs("a", 1)).await;
    h.sleep_until(ms(150)).await;
    assert_eq!(h.push_times(), [ms(100)]);
    // The first push is still in flight: these must wait and merge.
    h.send(vs("b", 2)).await;
    h.sleep_until(ms(200)).await;
    h.send(vs("c", 3)).await;
    h.sleep_until(ms(2_000)).await;
    assert_eq!(
        h.pushes().len(),
        1,
        "a second push started while one was in flight"
    );
    // Complete the first push: the merged batch goes out now (quiet and max both passed).
    gate.add_permits(1);
    h.sleep_until(ms(2_001)).await;
    let pushes = h.pushes();
    assert_eq!(pushes.len(), 2);
    assert_eq!(pushes[1].0, ms(2_000));
    assert_eq!(names(&pushes[1].1), ["b", "c"]);
    gate.add_permits(10);
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn push_completing_mid_quiet_period_waits_for_the_rest_of_it() {
    let h = Harness::new(config(true), ms(120), None);
    h.send(vs("a", 1)).await;
    h.sleep_until(ms(150)).await;
    h.send(vs("b", 2)).await;
    // The first push (100ms) completes at 220ms, only 70ms after "b": wait 30ms more.
    h.sleep_until(ms(400)).await;
    assert_eq!(h.push_times(), [ms(100), ms(250)]);
    assert_eq!(*h.finished.lock().unwrap(), 2);
    h.close().await;
}

#[tokio::test(start_paused = true)]
async fn full_and_eds_merge_into_full() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    h.send(slice("s", 1)).await;
    h.send(vs("a", 2)).await;
    h.sleep_until(ms(200)).await;
    let pushes = h.close().await;
    assert_eq!(pushes.len(), 1);
    let req = &pushes[0].1;
    assert!(req.changes.full);
    assert_eq!(
        req.changes.reasons,
        BTreeMap::from([
            (TriggerReason::EndpointUpdate, 1),
            (TriggerReason::ConfigUpdate, 1)
        ])
    );
    assert_eq!(req.changes.keys.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn eds_only_batch_stays_eds() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    h.send(slice("s1", 1)).await;
    h.send(slice("s2", 2)).await;
    let pushes = h.close().await;
    assert_eq!(pushes.len(), 1);
    assert!(!pushes[0].1.changes.full);
    assert_eq!(names(&pushes[0].1), ["s1", "s2"]);
}

#[tokio::test(start_paused = true)]
async fn configs_updated_empty_means_everything() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    h.send(vs("a", 1)).await;
    h.send(PushRequest::full_everything(
        TriggerReason::GlobalUpdate,
        5,
        SystemTime::now(),
    ))
    .await;
    h.send(vs("b", 6)).await;
    h.sleep_until(ms(200)).await;
    let pushes = h.close().await;
    assert_eq!(pushes.len(), 1);
    let req = &pushes[0].1;
    assert!(req.changes.full);
    assert_eq!(req.changes.keys, BTreeSet::new());
    assert_eq!(req.revision, 6);
}

#[tokio::test(start_paused = true)]
async fn eds_bypasses_debounce_when_disabled() {
    let h = Harness::new(config(false), Duration::ZERO, None);
    h.send(slice("s", 1)).await;
    h.send(vs("a", 2)).await;
    h.sleep_until(ms(1)).await;
    let pushes = h.pushes();
    assert_eq!(pushes.len(), 1, "EDS pushed at once");
    assert!(!pushes[0].1.changes.full);
    assert_eq!(pushes[0].0, Duration::ZERO);
    h.sleep_until(ms(200)).await;
    let pushes = h.close().await;
    assert_eq!(pushes.len(), 2);
    assert_eq!(pushes[1].0, ms(100));
    assert_eq!(names(&pushes[1].1), ["a"]);
}

#[tokio::test(start_paused = true)]
async fn missing_reason_is_recorded_as_unknown() {
    let h = Harness::new(config(true), Duration::ZERO, None);
    let mut req = vs("a", 1);
    req.changes.reasons.clear();
    h.send(req).await;
    let pushes = h.close().await;
    assert_eq!(
        pushes[0].1.changes.reasons,
        BTreeMap::from([(TriggerReason::Unknown, 1)])
    );
}

#[tokio::test(start_paused = true)]
async fn closing_flushes_pending_and_waits_for_in_flight() {
    let h = Harness::new(config(true), ms(500), None);
    h.send(vs("a", 1)).await;
    h.sleep_until(ms(150)).await; // "a" in flight until 600ms
    h.send(vs("b", 2)).await;
    let finished = h.finished.clone();
    let start = h.start;
    let pushes = h.close().await;
    assert_eq!(pushes.len(), 2);
    assert_eq!(names(&pushes[1].1), ["b"]);
    assert_eq!(
        pushes[1].0,
        ms(600),
        "pending pushed right after the one in flight"
    );
    assert_eq!(*finished.lock().unwrap(), 2);
    assert_eq!(start.elapsed(), ms(1_100));
}
