//! A shared readiness flag: the tier sets it once it can serve (snapshot loaded, bus
//! connected) and clears it while draining; `/healthz/ready` reports it.

use crate::runtime::DrainWatch;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Cloneable handle; every clone sees the same flag. Starts not ready.
#[derive(Clone, Debug, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn set_ready(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Exports `shoal_ready` (1 ready, 0 not) in `registry`, read at scrape time from the
    /// same flag `/healthz/ready` reports, so the two cannot disagree.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(ReadyGauge(self.clone())));
    }

    /// Becomes ready once `serving()` holds (polled every 20 ms), and not ready again
    /// as soon as `drain` starts, so a load balancer stops sending new work first.
    pub fn follow(
        self,
        serving: impl Fn() -> bool + Send + 'static,
        drain: DrainWatch,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while !serving() && !drain.is_draining() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            self.set_ready(!drain.is_draining());
            drain.wait().await;
            self.set_ready(false);
        })
    }
}

/// `shoal_ready`: the flag, read when scraped (nothing to keep in step).
#[derive(Debug)]
struct ReadyGauge(Readiness);

impl Collector for ReadyGauge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let ready = ConstGauge::new(i64::from(self.0.is_ready()));
        let metric = encoder.encode_descriptor(
            "shoal_ready",
            "1 while this tier reports ready on /healthz/ready, 0 while it does not \
             (starting, or draining)",
            None,
            ready.metric_type(),
        )?;
        ready.encode(metric)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Drain;
    use std::sync::atomic::AtomicBool;

    #[tokio::test(start_paused = true)]
    async fn ready_once_serving_and_not_while_draining() {
        let drain = Drain::new();
        let serving = Arc::new(AtomicBool::new(false));
        let readiness = Readiness::new();
        let flag = serving.clone();
        let task = readiness
            .clone()
            .follow(move || flag.load(Ordering::Acquire), drain.watcher());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!readiness.is_ready());
        serving.store(true, Ordering::Release);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(readiness.is_ready());
        drain.signal();
        task.await.unwrap();
        assert!(!readiness.is_ready());
    }

    #[test]
    fn shoal_ready_follows_the_flag() {
        let readiness = Readiness::new();
        let mut registry = Registry::default();
        readiness.register(&mut registry);
        let scrape = |registry: &Registry| {
            let mut body = String::new();
            prometheus_client::encoding::text::encode(&mut body, registry).unwrap();
            body
        };
        assert!(scrape(&registry).contains("\nshoal_ready 0\n"));
        readiness.set_ready(true);
        let body = scrape(&registry);
        assert!(body.contains("# TYPE shoal_ready gauge\n"), "{body}");
        assert!(body.contains("\nshoal_ready 1\n"), "{body}");
    }
}
