//! What the stand-in knows of the cluster: a small static model the test writes (and
//! rewrites, as Kubernetes would change its EndpointSlices), in place of istiod's
//! Kubernetes and config watches.

/// A Service: `host` (its FQDN) in `namespace`, one HTTP port, its ready endpoints.
#[derive(Clone, Debug)]
pub struct Service {
    pub host: String,
    pub namespace: String,
    pub port: u16,
    pub endpoints: Vec<Endpoint>,
}

/// One ready endpoint of a Service: where peers dial it, and who it is.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub ip: String,
    pub port: u16,
    pub service_account: String,
    /// The pod has a sidecar (`security.istio.io/tlsMode: istio`): peers send it mTLS.
    pub meshed: bool,
}

/// A pod whose sidecar the stand-in may serve: its inbound listener binds
/// `ip:port` (a Sidecar `ingress` with captureMode NONE, as the test runs without
/// iptables) and forwards to the app on `127.0.0.1:app_port`.
#[derive(Clone, Debug)]
pub struct Workload {
    pub ip: String,
    pub port: u16,
    pub app_port: u16,
    /// The Service port this workload port backs (names the inbound virtual host).
    pub service_port: u16,
}

#[derive(Clone, Debug, Default)]
pub struct Model {
    pub services: Vec<Service>,
    pub workloads: Vec<Workload>,
}

impl Model {
    /// The Service `host`, to edit its endpoints.
    pub fn service_mut(&mut self, host: &str) -> Option<&mut Service> {
        self.services.iter_mut().find(|s| s.host == host)
    }
}
