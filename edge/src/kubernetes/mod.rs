//! The edge's Kubernetes API client, for the three things an edge asks the API server:
//! TokenReviews (who a token belongs to), the CA's Secrets (`cacerts`,
//! `istio-ca-secret`) and the mesh root's `istio-ca-root-cert` ConfigMaps; and
//! [`listed::Listed`], the list-watch cache the last two follow.

pub mod listed;

use std::path::Path;

/// A client for the API server of `kubeconfig`, or the in-cluster one without it.
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => {
            kube::Config::incluster().map_err(|e| format!("in-cluster Kubernetes config: {e}"))?
        }
    };
    kube::Client::try_from(config).map_err(|e| format!("Kubernetes client: {e}"))
}
