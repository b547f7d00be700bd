//! Generation warnings, logged once each.

use std::collections::HashSet;
use std::sync::Mutex;

/// Warnings already logged, so each is logged once.
#[derive(Default)]
pub struct Warnings(Mutex<HashSet<String>>);

impl Warnings {
    pub fn warn_once(&self, warnings: &[String]) {
        let mut warned = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Bounded: forgetting old warnings only means logging them again.
        if warned.len() > 10_000 {
            warned.clear();
        }
        for w in warnings {
            if warned.insert(w.clone()) {
                tracing::warn!("{w}");
            }
        }
    }
}
