//! A shared readiness flag: the tier sets it once it can serve (snapshot loaded, bus
//! connected) and clears it while draining; `/healthz/ready` reports it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

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
}
