//! The end-to-end mesh, written as a user writes it for Istio: a `reviews` Service with
//! two versions behind EndpointSlices, a DestinationRule defining subsets by label, and a
//! VirtualService splitting traffic 80/20 with a header-match override.

use std::path::Path;

pub const NAMESPACE: &str = "bookinfo";
pub const HOST: &str = "reviews.bookinfo.svc.cluster.local";

pub fn services(service_port: u16, v1_port: u16, v2_port: u16) -> String {
    format!(
        r#"apiVersion: v1
kind: Namespace
metadata:
  name: bookinfo
---
apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: bookinfo
spec:
  selector:
    app: reviews
  ports:
  - name: http
    port: {service_port}
    targetPort: 9080
---
apiVersion: v1
kind: Pod
metadata:
  name: reviews-v1
  namespace: bookinfo
  labels: {{app: reviews, version: v1}}
status:
  podIP: 127.0.0.1
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: reviews-v2
  namespace: bookinfo
  labels: {{app: reviews, version: v2}}
status:
  podIP: 127.0.0.1
  conditions: [{{type: Ready, status: "True"}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-v1
  namespace: bookinfo
  labels:
    kubernetes.io/service-name: reviews
addressType: IPv4
ports:
- name: http
  port: {v1_port}
endpoints:
- addresses: [127.0.0.1]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: reviews-v1, namespace: bookinfo}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-v2
  namespace: bookinfo
  labels:
    kubernetes.io/service-name: reviews
addressType: IPv4
ports:
- name: http
  port: {v2_port}
endpoints:
- addresses: [127.0.0.1]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: reviews-v2, namespace: bookinfo}}
"#
    )
}

pub const DESTINATION_RULE: &str = r#"apiVersion: networking.istio.io/v1beta1
kind: DestinationRule
metadata:
  name: reviews
  namespace: bookinfo
spec:
  host: reviews
  trafficPolicy:
    loadBalancer:
      simple: ROUND_ROBIN
    connectionPool:
      tcp:
        maxConnections: 100
      http:
        http1MaxPendingRequests: 100
  subsets:
  - name: v1
    labels:
      version: v1
  - name: v2
    labels:
      version: v2
"#;

/// The VirtualService with `v1_weight`% to v1 and the rest to v2.
pub fn virtual_service(v1_weight: u32) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: bookinfo
spec:
  hosts:
  - reviews
  http:
  - name: jason
    match:
    - headers:
        end-user:
          exact: jason
    route:
    - destination:
        host: reviews
        subset: v2
  - name: split
    route:
    - destination:
        host: reviews
        subset: v1
      weight: {v1_weight}
    - destination:
        host: reviews
        subset: v2
      weight: {}
    timeout: 5s
    retries:
      attempts: 2
      perTryTimeout: 2s
      retryOn: connect-failure,refused-stream,reset
"#,
        100 - v1_weight
    )
}

pub fn write(dir: &Path, service_port: u16, v1_port: u16, v2_port: u16) {
    std::fs::create_dir_all(dir.join("routing")).expect("mkdir");
    std::fs::write(
        dir.join("services.yaml"),
        services(service_port, v1_port, v2_port),
    )
    .expect("write");
    std::fs::write(dir.join("routing/destination-rule.yaml"), DESTINATION_RULE).expect("write");
    std::fs::write(
        dir.join("routing/virtual-service.yaml"),
        virtual_service(80),
    )
    .expect("write");
}

/// A VirtualService Istio's validation rejects: two destinations whose weights total 0.
pub fn virtual_service_zero_weights() -> String {
    virtual_service(0).replace("weight: 100", "weight: 0")
}
