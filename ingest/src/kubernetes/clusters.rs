//! What an operator sees of each cluster an ingest follows (`/debug/clusters`): synced
//! or not, reachable or not since when and why, and where a remote came from.
//!
//! A cluster whose API server cannot be reached keeps serving its last objects (nothing
//! is deleted until it syncs again, or its remote secret is removed); this is where that
//! shows.

use crate::registry::Rejections;
use serde_json::{Value, json};
use shoal_infra::admin::Readiness;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// One cluster's health, updated by its source. Cheap to clone.
#[derive(Clone, Debug)]
pub struct ClusterHealth {
    state: Arc<Mutex<HealthState>>,
    synced: Readiness,
    rejections: Rejections,
}

#[derive(Debug)]
struct HealthState {
    cluster: String,
    network: String,
    /// `namespace/name` of the remote secret that named it; empty for the local cluster.
    secret: String,
    reachable: bool,
    last_error: Option<String>,
    /// When `reachable` last changed.
    since: SystemTime,
}

impl ClusterHealth {
    pub fn new(
        cluster: &str,
        network: &str,
        secret: &str,
        synced: Readiness,
        rejections: Rejections,
    ) -> Self {
        Self {
            state: Arc::new(Mutex::new(HealthState {
                cluster: cluster.to_string(),
                network: network.to_string(),
                secret: secret.to_string(),
                reachable: true,
                last_error: None,
                since: SystemTime::now(),
            })),
            synced,
            rejections,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        // Plain fields: a panic elsewhere cannot leave them inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cluster's network, once known.
    pub fn set_network(&self, network: &str) {
        network.clone_into(&mut self.lock().network);
    }

    /// A watch delivered an event: the API server answers.
    pub fn reachable(&self) {
        let mut state = self.lock();
        if !state.reachable {
            tracing::info!(cluster = %state.cluster, "kubernetes API server reachable again");
            state.reachable = true;
            state.since = SystemTime::now();
        }
    }

    /// A watch failed. The cluster's objects stay as they were.
    pub fn failed(&self, error: &str) {
        let mut state = self.lock();
        if state.reachable {
            state.reachable = false;
            state.since = SystemTime::now();
        }
        state.last_error = Some(error.to_string());
    }

    pub fn is_reachable(&self) -> bool {
        self.lock().reachable
    }

    pub fn to_json(&self) -> Value {
        let state = self.lock();
        let since = state
            .since
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        json!({
            "cluster": state.cluster,
            "network": state.network,
            "secret": state.secret,
            "synced": self.synced.is_ready(),
            "reachable": state.reachable,
            "since_unix_s": since,
            "last_error": state.last_error,
            "rejections": self.rejections.to_json(),
        })
    }
}

/// Every cluster an ingest follows, by cluster ID. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Clusters(Arc<Mutex<BTreeMap<String, ClusterHealth>>>);

impl Clusters {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ClusterHealth>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn insert(&self, cluster: &str, health: ClusterHealth) {
        self.lock().insert(cluster.to_string(), health);
    }

    pub fn remove(&self, cluster: &str) {
        self.lock().remove(cluster);
    }

    pub fn get(&self, cluster: &str) -> Option<ClusterHealth> {
        self.lock().get(cluster).cloned()
    }

    /// The cluster IDs followed now.
    pub fn ids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// `/debug/clusters`: one entry per cluster, by ID.
    pub fn to_json(&self) -> Value {
        Value::Array(self.lock().values().map(ClusterHealth::to_json).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_cluster_shows_since_when_and_why() {
        let health = ClusterHealth::new(
            "c2",
            "net-2",
            "istio-system/istio-remote-secret-c2",
            Readiness::new(),
            Rejections::default(),
        );
        let clusters = Clusters::default();
        clusters.insert("c2", health.clone());
        health.failed("connection refused");
        let json = clusters.to_json();
        assert_eq!(json[0]["cluster"], "c2");
        assert_eq!(json[0]["reachable"], false);
        assert_eq!(json[0]["last_error"], "connection refused");
        health.reachable();
        assert!(health.is_reachable());
        assert_eq!(clusters.ids(), ["c2"]);
    }
}
