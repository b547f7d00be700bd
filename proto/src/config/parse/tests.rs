use super::*;
use crate::config::{ConfigKey, Kind};

/// Parses one file that must yield exactly one valid object.
fn one(yaml: &str) -> Parsed {
    let mut out = parse_documents("f.yaml", yaml);
    assert_eq!(out.len(), 1, "expected one document: {out:?}");
    match out.remove(0) {
        Ok(p) => p,
        Err(e) => panic!("unexpected error: {e}"),
    }
}

/// Parses one file that must yield exactly one error.
fn rejected(yaml: &str) -> ParseError {
    let mut out = parse_documents("bad.yaml", yaml);
    assert_eq!(out.len(), 1, "expected one document: {out:?}");
    match out.remove(0) {
        Ok(p) => panic!("expected a rejection, got {:?}", p.config),
        Err(e) => e,
    }
}

fn istio(version: &str, kind: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/{version}\nkind: {kind}\nmetadata:\n  name: {name}\n  namespace: shop\nspec:\n{spec}"
    )
}

const VS_SPEC: &str = "  hosts: [reviews]
  http:
  - name: by-uri
    match:
    - uri:
        exact: /exact
    - uri:
        prefix: /api/
      headers:
        x-user:
          exact: jason
        x-trace:
          regex: \"^[a-f0-9]+$\"
    - uri:
        regex: \"/v[0-9]+/.*\"
      ignoreUriCase: true
    route:
    - destination:
        host: reviews
        subset: v1
        port:
          number: 9080
      weight: 75
    - destination:
        host: reviews
        subset: v2
      weight: 25
    timeout: 5s
    retries:
      attempts: 3
      perTryTimeout: 250ms
      retryOn: 5xx,connect-failure
  - route:
    - destination:
        host: reviews
  tcp:
  - match:
    - port: 3306
    route:
    - destination:
        host: mysql
";

#[test]
fn virtual_service_in_every_istio_version() {
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let p = one(&istio(version, "VirtualService", "reviews", VS_SPEC));
        assert_eq!(
            p.config.key(),
            ConfigKey::new(Kind::VirtualService, "shop", "reviews")
        );
        assert_eq!(p.location.to_string(), "f.yaml:1");
        assert!(p.warnings.is_empty());
        let Spec::VirtualService(vs) = &p.config.spec else {
            panic!("not a VirtualService")
        };
        assert_eq!(vs.hosts, ["reviews"]);
        let route = &vs.http[0];
        assert_eq!(route.name, "by-uri");
        let m = &route.matches;
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].uri.as_ref().unwrap().exact.as_deref(), Some("/exact"));
        assert_eq!(m[1].uri.as_ref().unwrap().prefix.as_deref(), Some("/api/"));
        assert_eq!(m[1].headers["x-user"].exact.as_deref(), Some("jason"));
        assert_eq!(
            m[1].headers["x-trace"].regex.as_deref(),
            Some("^[a-f0-9]+$")
        );
        assert_eq!(
            m[2].uri.as_ref().unwrap().regex.as_deref(),
            Some("/v[0-9]+/.*")
        );
        assert!(m[2].ignore_uri_case);
        let weights: Vec<_> = route.route.iter().map(|d| d.weight).collect();
        assert_eq!(weights, [75, 25]);
        assert_eq!(route.route[0].destination.subset, "v1");
        assert_eq!(
            route.route[0].destination.port.as_ref().unwrap().number,
            9080
        );
        assert_eq!(route.timeout.as_deref(), Some("5s"));
        let retries = route.retries.as_ref().unwrap();
        assert_eq!(retries.attempts, 3);
        assert_eq!(retries.per_try_timeout.as_deref(), Some("250ms"));
        assert_eq!(retries.retry_on, "5xx,connect-failure");
        assert_eq!(vs.tcp[0].matches[0].port, Some(3306));
        assert_eq!(vs.tcp[0].route[0].destination.host, "mysql");
    }
}

#[test]
fn virtual_service_bound_only_to_gateways_is_accepted_quietly() {
    let spec = "  hosts: [shop.example.com]\n  gateways: [shop/gw]\n  http:\n  - route:\n    - destination:\n        host: web\n";
    let p = one(&istio("v1", "VirtualService", "edge", spec));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn gateway_servers_are_validated_as_istio_does() {
    let reason = |spec: &str| {
        parse_documents("gw.yaml", &istio("v1", "Gateway", "gw", spec))
            .remove(0)
            .unwrap_err()
            .reason
    };
    let https_without_tls =
        "  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n";
    assert!(reason(https_without_tls).contains("must have TLS settings"));
    let simple_without_cert = "  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE}\n";
    assert!(reason(simple_without_cert).contains("requires credentialName"));
    let same_port_name = "  servers:\n  - port: {number: 80, name: web, protocol: HTTP}\n    hosts: ['*']\n  - port: {number: 81, name: web, protocol: HTTP}\n    hosts: ['*']\n";
    assert!(reason(same_port_name).contains("unique"));
    let bad_host = "  servers:\n  - port: {number: 80, name: web, protocol: HTTP}\n    hosts: ['/a.example.com']\n";
    assert!(reason(bad_host).contains("namespace/host"));
    let ok = "  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: [shop/secure.example.com]\n    tls: {mode: MUTUAL, credentialName: cert}\n";
    let p = one(&istio("v1", "Gateway", "gw", ok));
    let Spec::Gateway(gw) = &p.config.spec else {
        panic!("not a Gateway")
    };
    assert_eq!(gw.servers[0].tls.as_ref().unwrap().credential_name, "cert");
}

#[test]
fn only_tls_secrets_are_read() {
    let tls = "apiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: istio-system}\ntype: kubernetes.io/tls\nstringData:\n  tls.crt: \"-----BEGIN CERTIFICATE-----\"\n  tls.key: \"-----BEGIN PRIVATE KEY-----\"\n";
    let p = one(tls);
    assert_eq!(p.config.kind(), Kind::Secret);
    let token = "apiVersion: v1\nkind: Secret\nmetadata: {name: token, namespace: shop}\ndata: {token: YWJj}\n";
    assert!(parse_documents("s.yaml", token).is_empty());
}

#[test]
fn destination_rule_with_subsets_lb_and_pool() {
    let spec = "  host: reviews.shop.svc.cluster.local
  trafficPolicy:
    loadBalancer:
      simple: LEAST_REQUEST
    connectionPool:
      tcp:
        maxConnections: 100
        connectTimeout: 30ms
      http:
        http1MaxPendingRequests: 10
        http2MaxRequests: 1000
        maxRequestsPerConnection: 1
        maxRetries: 3
        idleTimeout: 1h
    outlierDetection:
      consecutive5xxErrors: 7
      interval: 5m
      baseEjectionTime: 15m
      maxEjectionPercent: 50
    portLevelSettings:
    - port:
        number: 9080
      loadBalancer:
        consistentHash:
          httpHeaderName: x-user
  subsets:
  - name: v1
    labels:
      version: v1
  - name: v2
    labels:
      version: v2
    trafficPolicy:
      loadBalancer:
        simple: ROUND_ROBIN
  exportTo: [\".\"]
";
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let p = one(&istio(version, "DestinationRule", "reviews", spec));
        let Spec::DestinationRule(dr) = &p.config.spec else {
            panic!("not a DestinationRule")
        };
        assert_eq!(dr.host, "reviews.shop.svc.cluster.local");
        let tp = dr.traffic_policy.as_ref().unwrap();
        let lb = tp.load_balancer.as_ref().unwrap();
        assert_eq!(lb.simple.as_deref(), Some("LEAST_REQUEST"));
        let pool = tp.connection_pool.as_ref().unwrap();
        assert_eq!(pool.tcp.as_ref().unwrap().max_connections, Some(100));
        assert_eq!(
            pool.tcp.as_ref().unwrap().connect_timeout.as_deref(),
            Some("30ms")
        );
        let http = pool.http.as_ref().unwrap();
        assert_eq!(http.http1_max_pending_requests, Some(10));
        assert_eq!(http.http2_max_requests, Some(1000));
        assert_eq!(http.max_requests_per_connection, Some(1));
        assert_eq!(http.max_retries, Some(3));
        assert_eq!(http.idle_timeout.as_deref(), Some("1h"));
        let od = tp.outlier_detection.as_ref().unwrap();
        assert_eq!(od.consecutive_5xx_errors, Some(7));
        assert_eq!(od.max_ejection_percent, Some(50));
        let port = &tp.port_level_settings[0];
        assert_eq!(port.port.as_ref().unwrap().number, 9080);
        let hash = port
            .load_balancer
            .as_ref()
            .unwrap()
            .consistent_hash
            .as_ref();
        assert_eq!(hash.unwrap().http_header_name.as_deref(), Some("x-user"));
        let names: Vec<_> = dr.subsets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["v1", "v2"]);
        assert_eq!(dr.subsets[1].labels["version"], "v2");
        assert!(dr.subsets[1].traffic_policy.is_some());
        assert_eq!(dr.export_to, ["."]);
    }
}

#[test]
fn service_entry_and_workload_entry() {
    let se = "  hosts: [api.example.com]
  addresses: [240.0.0.1]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports:
  - number: 443
    name: https
    protocol: TLS
    targetPort: 8443
  endpoints:
  - address: 10.1.0.1
    ports:
      https: 9443
    labels:
      app: api
    network: net-b
    locality: us-east1/b
    weight: 3
";
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let p = one(&istio(version, "ServiceEntry", "api", se));
        let Spec::ServiceEntry(se) = &p.config.spec else {
            panic!("not a ServiceEntry")
        };
        assert_eq!(se.hosts, ["api.example.com"]);
        assert_eq!(se.resolution.as_deref(), Some("STATIC"));
        assert_eq!(se.ports[0].target_port, Some(8443));
        let ep = &se.endpoints[0];
        assert_eq!(ep.address, "10.1.0.1");
        assert_eq!(ep.ports["https"], 9443);
        assert_eq!((ep.network.as_str(), ep.weight), ("net-b", 3));
    }
    let we = "  address: 10.2.0.7\n  ports:\n    http: 8080\n  labels:\n    app: vm\n  serviceAccount: vm-sa\n";
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let p = one(&istio(version, "WorkloadEntry", "vm-1", we));
        assert_eq!(
            p.config.key(),
            ConfigKey::new(Kind::WorkloadEntry, "shop", "vm-1")
        );
        let Spec::WorkloadEntry(we) = &p.config.spec else {
            panic!("not a WorkloadEntry")
        };
        assert_eq!(we.address, "10.2.0.7");
        assert_eq!(we.ports["http"], 8080);
        assert_eq!(we.service_account, "vm-sa");
    }
}

#[test]
fn workload_group_is_read_and_validated() {
    let wg = "  metadata:\n    labels: {app: vm}\n  template:\n    ports: {http: 8080}\n    serviceAccount: vm-sa\n  probe:\n    periodSeconds: 5\n    tcpSocket: {port: 8080}\n";
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let p = one(&istio(version, "WorkloadGroup", "vms", wg));
        assert_eq!(
            p.config.key(),
            ConfigKey::new(Kind::WorkloadGroup, "shop", "vms")
        );
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        let Spec::WorkloadGroup(wg) = &p.config.spec else {
            panic!("not a WorkloadGroup")
        };
        let template = wg.template.as_ref().unwrap();
        assert_eq!(template.ports["http"], 8080);
        assert_eq!(wg.probe.as_ref().unwrap().period_seconds, 5);
    }
    let e = rejected(&istio("v1", "WorkloadGroup", "vms", "  metadata: {}\n"));
    assert_eq!(e.object, "WorkloadGroup shop/vms");
    assert_eq!(e.reason, "template is required");
}

#[test]
fn workload_entry_owned_by_a_group_names_it() {
    let owned = "apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata:
  name: vm-1
  namespace: shop
  ownerReferences:
  - {apiVersion: networking.istio.io/v1, kind: WorkloadGroup, name: vms, uid: u1}
spec: {address: 10.2.0.7}
";
    let p = one(owned);
    assert_eq!(p.config.meta.annotations[AUTO_REGISTRATION_GROUP], "vms");
}

#[test]
fn sidecar_and_gateway() {
    let sc = "  workloadSelector:\n    labels:\n      app: ratings\n  egress:\n  - port:\n      number: 9080\n      protocol: HTTP\n      name: http\n    hosts: [\"./*\", \"istio-system/*\"]\n  outboundTrafficPolicy:\n    mode: REGISTRY_ONLY\n";
    let gw = "  selector:\n    istio: ingressgateway\n  servers:\n  - port:\n      number: 80\n      name: http\n      protocol: HTTP\n    hosts: [\"shop/*.example.com\"]\n";
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let p = one(&istio(version, "Sidecar", "default", sc));
        let Spec::Sidecar(sc) = &p.config.spec else {
            panic!("not a Sidecar")
        };
        assert_eq!(
            sc.workload_selector.as_ref().unwrap().labels["app"],
            "ratings"
        );
        assert_eq!(sc.egress[0].hosts, ["./*", "istio-system/*"]);
        assert_eq!(sc.egress[0].port.as_ref().unwrap().number, 9080);
        assert_eq!(
            sc.outbound_traffic_policy.as_ref().unwrap().mode,
            "REGISTRY_ONLY"
        );

        let p = one(&istio(version, "Gateway", "gw", gw));
        let Spec::Gateway(gw) = &p.config.spec else {
            panic!("not a Gateway")
        };
        assert_eq!(gw.selector["istio"], "ingressgateway");
        assert_eq!(gw.servers[0].port.as_ref().unwrap().number, 80);
        assert_eq!(gw.servers[0].hosts, ["shop/*.example.com"]);
    }
}

#[test]
fn service_with_named_and_numbered_target_ports() {
    let p = one("apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: shop
  labels:
    app: reviews
spec:
  clusterIP: 10.96.0.10
  selector:
    app: reviews
  ports:
  - name: http
    port: 9080
    targetPort: 8080
  - name: grpc
    port: 9090
    targetPort: grpc-port
    appProtocol: grpc
  - name: plain
    port: 7000
");
    assert_eq!(
        p.config.key(),
        ConfigKey::new(Kind::Service, "shop", "reviews")
    );
    assert_eq!(p.config.meta.labels["app"], "reviews");
    let Spec::Service(svc) = &p.config.spec else {
        panic!("not a Service")
    };
    assert_eq!(svc.cluster_ip, "10.96.0.10");
    assert_eq!(svc.selector["app"], "reviews");
    let targets: Vec<_> = svc.ports.iter().map(|p| p.target_port.as_deref()).collect();
    assert_eq!(targets, [Some("8080"), Some("grpc-port"), None]);
    assert_eq!(svc.ports[1].app_protocol.as_deref(), Some("grpc"));
}

#[test]
fn namespace_is_cluster_scoped() {
    let p = one(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  labels:\n    istio-injection: enabled\n",
    );
    assert_eq!(p.config.key(), ConfigKey::new(Kind::Namespace, "", "shop"));
    assert_eq!(p.config.meta.labels["istio-injection"], "enabled");
}

#[test]
fn namespace_ignores_a_stray_metadata_namespace() {
    let p = one("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n  namespace: other\n");
    assert_eq!(p.config.key(), ConfigKey::new(Kind::Namespace, "", "shop"));
    assert_eq!(p.config.meta.namespace, "");
}

#[test]
fn objects_without_namespace_land_in_default() {
    let p = one(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n",
    );
    assert_eq!(
        p.config.key(),
        ConfigKey::new(Kind::Service, "default", "web")
    );
}

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: reviews-1
  namespace: shop
  labels:
    app: reviews
spec:
  nodeName: node-a
  serviceAccountName: bookinfo-reviews
  containers:
  - name: app
    ports:
    - name: grpc-port
      containerPort: 7070
    - containerPort: 9999
status:
  phase: Running
  podIP: 10.0.0.5
  conditions:
  - type: Initialized
    status: \"True\"
  - type: Ready
    status: \"READY\"
";

#[test]
fn pod_with_ip_ready_condition_and_named_ports() {
    let p = one(&POD.replace("READY", "True"));
    let Spec::Pod(pod) = &p.config.spec else {
        panic!("not a Pod")
    };
    assert_eq!(pod.ip, "10.0.0.5");
    assert!(pod.ready);
    assert_eq!(pod.phase, "Running");
    assert_eq!(pod.node_name, "node-a");
    assert_eq!(pod.service_account, "bookinfo-reviews");
    assert_eq!(pod.named_ports.len(), 1);
    assert_eq!(pod.named_ports["grpc-port"], 7070);

    let p = one(&POD.replace("READY", "False"));
    let Spec::Pod(pod) = &p.config.spec else {
        panic!("not a Pod")
    };
    assert!(!pod.ready, "a stated Ready=False wins over having an IP");
}

#[test]
fn pod_without_conditions_is_ready_when_it_has_an_ip() {
    let p = one("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nstatus:\n  podIP: 10.0.0.9\n");
    let Spec::Pod(pod) = &p.config.spec else {
        panic!("not a Pod")
    };
    assert!(pod.ready);
    let p = one("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n");
    let Spec::Pod(pod) = &p.config.spec else {
        panic!("not a Pod")
    };
    assert!(!pod.ready);
}

#[test]
fn endpoint_slice_takes_service_name_from_label() {
    let p = one("apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: reviews-abc
  namespace: shop
  labels:
    kubernetes.io/service-name: reviews
addressType: IPv4
ports:
- name: http
  port: 8080
  protocol: TCP
endpoints:
- addresses: [10.0.0.5]
  conditions:
    ready: true
  targetRef:
    kind: Pod
    name: reviews-1
    namespace: shop
  zone: us-east1-b
  nodeName: node-a
- addresses: [10.0.0.6]
  conditions:
    ready: false
- addresses: [10.0.0.7]
");
    assert!(p.warnings.is_empty());
    let Spec::EndpointSlice(slice) = &p.config.spec else {
        panic!("not an EndpointSlice")
    };
    assert_eq!(slice.service_name, "reviews");
    assert_eq!(slice.address_type, "IPv4");
    assert_eq!(slice.ports[0].port, 8080);
    assert_eq!(slice.endpoints.len(), 3);
    let ready: Vec<_> = slice.endpoints.iter().map(|e| e.conditions.ready).collect();
    assert_eq!(ready, [Some(true), Some(false), None]);
    let target = slice.endpoints[0].target_ref.as_ref().unwrap();
    assert_eq!(target.name, "reviews-1");
    assert_eq!(slice.endpoints[0].zone.as_deref(), Some("us-east1-b"));
}

#[test]
fn endpoint_slice_without_service_label_warns() {
    let p = one(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: orphan\naddressType: IPv4\nendpoints: []\n",
    );
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("kubernetes.io/service-name"));
}

#[test]
fn v1_endpoints() {
    let p = one("apiVersion: v1
kind: Endpoints
metadata:
  name: reviews
  namespace: shop
subsets:
- addresses:
  - ip: 10.0.0.5
    targetRef:
      kind: Pod
      name: reviews-1
  notReadyAddresses:
  - ip: 10.0.0.6
  ports:
  - name: http
    port: 8080
");
    let Spec::Endpoints(ep) = &p.config.spec else {
        panic!("not Endpoints")
    };
    let subset = &ep.subsets[0];
    assert_eq!(subset.addresses[0].ip, "10.0.0.5");
    assert_eq!(
        subset.addresses[0].target_ref.as_ref().unwrap().name,
        "reviews-1"
    );
    assert_eq!(subset.not_ready_addresses[0].ip, "10.0.0.6");
    assert_eq!(subset.ports[0].port, 8080);
}

#[test]
fn unsupported_kinds_are_skipped() {
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\n# only a comment\n---\n";
    assert!(parse_documents("f.yaml", yaml).is_empty());
}

#[test]
fn unsupported_istio_kind_is_rejected_with_namespace() {
    let e = rejected(
        "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata:\n  name: ef\n  namespace: shop\n",
    );
    assert_eq!(e.object, "EnvoyFilter shop/ef");
    assert!(e.reason.contains("unsupported"), "{}", e.reason);
    let e = rejected(
        "apiVersion: networking.istio.io/v2\nkind: VirtualService\nmetadata:\n  name: r\n",
    );
    assert_eq!(e.object, "VirtualService default/r");
}

#[test]
fn broken_yaml_reports_its_line() {
    let yaml = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ok
spec:
  hosts: [a]
  http:
  - route:
    - destination:
        host: a
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: broken
spec:
  hosts: [b
  http: []
";
    let out = parse_documents("dir/vs.yaml", yaml);
    assert_eq!(out.len(), 2);
    assert!(out[0].is_ok());
    let e = out[1].as_ref().unwrap_err();
    assert_eq!(e.object, "document 2");
    // The flow sequence opened on line 17 is found unclosed on line 18, where the
    // parser meets `http:`; that is where a YAML tool points too.
    assert_eq!(e.location.line, 18, "{e}");
    assert!(e.reason.contains("did not find expected"), "{e}");
    assert_eq!(e.location.source, "dir/vs.yaml");
    assert!(
        e.to_string()
            .starts_with(&format!("dir/vs.yaml:{}: document 2: ", e.location.line))
    );
}

#[test]
fn bad_indentation_reports_its_line() {
    let yaml = "# leading comment\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: a\n   namespace: b\n";
    let e = rejected(yaml);
    assert_eq!(e.location.line, 7, "{e}");
}

#[test]
fn virtual_service_without_hosts_is_a_delegate_and_may_not_bind_gateways() {
    let delegate = "  http:\n  - route:\n    - destination:\n        host: a\n";
    one(&istio("v1", "VirtualService", "r", delegate));
    let e = rejected(&istio(
        "v1",
        "VirtualService",
        "r",
        &format!("  gateways: [gw]\n{delegate}"),
    ));
    assert_eq!(e.object, "VirtualService shop/r");
    assert_eq!(e.location.to_string(), "bad.yaml:1");
    assert!(e.reason.contains("delegate"), "{}", e.reason);
}

#[test]
fn weights_totalling_zero() {
    let spec = "  hosts: [a]\n  http:\n  - route:\n    - destination:\n        host: a\n        subset: v1\n      weight: 0\n    - destination:\n        host: a\n        subset: v2\n      weight: 0\n";
    let e = rejected(&istio("v1", "VirtualService", "r", spec));
    assert!(e.reason.contains("total weight"), "{}", e.reason);
    assert!(e.reason.contains("http[0].route"), "{}", e.reason);
}

#[test]
fn invalid_regex() {
    let spec = "  hosts: [a]\n  http:\n  - match:\n    - uri:\n        regex: \"/(unclosed\"\n    route:\n    - destination:\n        host: a\n";
    let e = rejected(&istio("v1", "VirtualService", "r", spec));
    assert!(e.reason.contains("invalid regex"), "{}", e.reason);
    assert!(e.reason.contains("http[0].match[0].uri"), "{}", e.reason);
}

#[test]
fn string_match_with_two_kinds_is_rejected() {
    let spec = "  hosts: [a]\n  http:\n  - match:\n    - uri:\n        exact: /a\n        prefix: /b\n    route:\n    - destination:\n        host: a\n";
    let e = rejected(&istio("v1", "VirtualService", "r", spec));
    assert!(e.reason.contains("only one of"), "{}", e.reason);
}

#[test]
fn field_of_the_wrong_type_reports_its_line() {
    let yaml = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: r
  namespace: shop
spec:
  hosts: [a]
  http:
  - route:
    - destination:
        host: a
      weight: abc
";
    let e = rejected(yaml);
    assert_eq!(e.object, "VirtualService shop/r");
    assert_eq!(e.location.line, 12, "{e}");
    assert!(e.reason.contains("invalid"), "{}", e.reason);
}

#[test]
fn wrong_type_in_a_later_document_is_located_in_the_file() {
    let yaml = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shop\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: s\nspec:\n  ports:\n  - port: eighty\n";
    let out = parse_documents("f.yaml", yaml);
    assert!(out[0].is_ok());
    let e = out[1].as_ref().unwrap_err();
    assert_eq!(e.object, "Service default/s");
    assert_eq!(e.location.line, 12, "{e}");
}

#[test]
fn bad_durations() {
    for bad in ["5", "abc", "5 parsecs", "-1s"] {
        let spec = format!(
            "  hosts: [a]\n  http:\n  - route:\n    - destination:\n        host: a\n    timeout: \"{bad}\"\n"
        );
        let e = rejected(&istio("v1", "VirtualService", "r", &spec));
        assert!(e.reason.contains("http[0].timeout"), "{bad}: {}", e.reason);
    }
    let spec = "  host: a\n  trafficPolicy:\n    connectionPool:\n      tcp:\n        connectTimeout: 10 seconds\n";
    let e = rejected(&istio("v1", "DestinationRule", "d", spec));
    assert!(e.reason.contains("connectTimeout"), "{}", e.reason);
}

#[test]
fn parse_duration_units() {
    use crate::config::validate::parse_duration;
    use std::time::Duration;
    assert_eq!(parse_duration("100ms").unwrap(), Duration::from_millis(100));
    assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
    assert_eq!(parse_duration("0.25s").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
    assert!(parse_duration("").is_err());
    assert!(parse_duration("10").is_err());
    assert!(parse_duration("1.2.3s").is_err());
}

/// Found by the `config_parse` fuzz target: a finite number of seconds too large for a
/// Duration panicked inside `Duration::from_secs_f64`, taking the reading tier down.
#[test]
fn a_duration_too_large_is_an_error_not_a_panic() {
    use crate::config::validate::parse_duration;
    let huge = "255555555555555555555555555555555s";
    let err = parse_duration(huge).unwrap_err();
    assert!(err.0.contains("out of range"), "{}", err.0);
    let e = rejected(&format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: web, namespace: shop}}\nspec:\n  hosts: [web]\n  http:\n  - route: [{{destination: {{host: web}}}}]\n    retries: {{attempts: 3, perTryTimeout: \"{huge}\"}}\n"
    ));
    assert!(e.reason.contains("out of range"), "{}", e.reason);
}

#[test]
fn missing_name_and_missing_kind() {
    let e = rejected("apiVersion: v1\nkind: Service\nmetadata:\n  namespace: a\n");
    assert!(e.reason.contains("metadata.name"), "{}", e.reason);
    let e = rejected("metadata:\n  name: x\n");
    assert_eq!(e.object, "document 1");
    assert!(e.reason.contains("apiVersion"), "{}", e.reason);
    let e = rejected("- just\n- a list\n");
    assert_eq!(e.object, "document 1");
}

#[test]
fn one_bad_document_does_not_hide_the_others() {
    let yaml = format!(
        "{}---\n{}---\n{}",
        istio("v1", "VirtualService", "good-1", VS_SPEC),
        istio("v1", "VirtualService", "bad", "  http: []\n"),
        istio("v1beta1", "DestinationRule", "good-2", "  host: reviews\n"),
    );
    let out = parse_documents("multi.yaml", &yaml);
    assert_eq!(out.len(), 3);
    let good: Vec<_> = out
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|p| p.config.meta.name.as_str())
        .collect();
    assert_eq!(good, ["good-1", "good-2"]);
    let e = out[1].as_ref().unwrap_err();
    assert_eq!(e.object, "VirtualService shop/bad");
    let vs_lines = VS_SPEC.lines().count() + 6;
    assert_eq!(e.location.line, vs_lines + 2, "{e}");
    let p = out[2].as_ref().unwrap();
    assert_eq!(p.location.line, vs_lines + 1 + 7 + 1 + 1);
}

#[test]
fn windows_line_endings_and_document_end_markers() {
    let yaml = "apiVersion: v1\r\nkind: Namespace\r\nmetadata:\r\n  name: a\r\n...\r\n---\r\napiVersion: v1\r\nkind: Namespace\r\nmetadata:\r\n  name: b\r\n";
    let names: Vec<_> = parse_documents("f.yaml", yaml)
        .into_iter()
        .map(|r| r.unwrap().config.meta.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
}

#[test]
fn locality_lb_settings_by_istio_rules() {
    let dr = |setting: &str| {
        istio(
            "v1",
            "DestinationRule",
            "reviews",
            &format!(
                "  host: reviews\n  trafficPolicy:\n    loadBalancer:\n      localityLbSetting:\n{setting}"
            ),
        )
    };
    let p = one(&dr(
        "        distribute:\n        - from: us-east/*\n          to: {\"us-east/a\": 80, \"us-west/*\": 20}\n",
    ));
    let Spec::DestinationRule(rule) = &p.config.spec else {
        panic!("not a DestinationRule");
    };
    let lb = rule
        .traffic_policy
        .as_ref()
        .unwrap()
        .load_balancer
        .as_ref()
        .unwrap();
    assert_eq!(
        lb.locality_lb_setting.as_ref().unwrap().distribute[0].to["us-east/a"],
        80
    );
    one(&dr(
        "        failover:\n        - {from: us-east, to: eu-west}\n",
    ));

    let e = rejected(&dr(
        "        distribute:\n        - from: us-east\n          to: {\"us-west\": 90}\n",
    ));
    assert!(e.reason.contains("sum to 90"), "{e}");
    let e = rejected(&dr(
        "        failover:\n        - {from: us-east, to: us-east}\n",
    ));
    assert!(e.reason.contains("different regions"), "{e}");
    let e = rejected(&dr(
        "        distribute:\n        - from: a\n          to: {b: 100}\n        failover:\n        - {from: a, to: b}\n",
    ));
    assert!(e.reason.contains("cannot both"), "{e}");
    let p = one(&dr(
        "        failoverPriority: [topology.istio.io/network]\n",
    ));
    assert!(
        p.warnings[0].contains("failoverPriority"),
        "{:?}",
        p.warnings
    );
}

/// What Istio accepts, Shoal accepts (each of these was once rejected).
#[test]
fn istio_accepts_these_and_so_does_shoal() {
    let cases = [
        (
            "VirtualService",
            "upper-case header names and empty header and query matches",
            "  hosts: [a]\n  http:\n  - match:\n    - headers:\n        X-User: {}\n      queryParams:\n        debug: {}\n    route:\n    - destination:\n        host: a\n",
        ),
        (
            "VirtualService",
            "only a direct response",
            "  hosts: [a]\n  http:\n  - directResponse:\n      status: 503\n      body:\n        string: down\n",
        ),
        (
            "VirtualService",
            "a delegate",
            "  hosts: [a]\n  http:\n  - match:\n    - uri:\n        prefix: /r\n    delegate:\n      name: r\n      namespace: shop\n",
        ),
        (
            "VirtualService",
            "only tls routes",
            "  hosts: [a.example.com]\n  tls:\n  - match:\n    - sniHosts: [a.example.com]\n      port: 443\n    route:\n    - destination:\n        host: a.example.com\n",
        ),
        (
            "Sidecar",
            "only an outbound traffic policy",
            "  outboundTrafficPolicy:\n    mode: REGISTRY_ONLY\n",
        ),
    ];
    for (kind, what, spec) in cases {
        let mut out = parse_documents("f.yaml", &istio("v1", kind, "r", spec));
        assert!(
            matches!(out.pop(), Some(Ok(_))),
            "{kind} with {what} was rejected: {out:?}"
        );
    }
}

#[test]
fn route_features_parse_and_bad_ones_name_the_field() {
    let spec = "  hosts: [a]
  http:
  - fault:
      delay:
        fixedDelay: 1s
        percentage: {value: 50}
      abort:
        httpStatus: 418
    mirror: {host: a, subset: shadow}
    mirrorPercentage: {value: 25.5}
    corsPolicy:
      allowOrigins: [{exact: https://a.example}]
      allowMethods: [GET, POST]
      maxAge: 24h
    headers:
      request:
        set: {x-a: b}
        remove: [x-c]
    route:
    - destination: {host: a}
      headers:
        response:
          add: {x-d: e}
";
    let p = one(&istio("v1", "VirtualService", "r", spec));
    let crate::config::Spec::VirtualService(vs) = &p.config.spec else {
        panic!("a VirtualService");
    };
    let http = &vs.http[0];
    assert_eq!(
        http.fault
            .as_ref()
            .and_then(|f| f.abort.as_ref())
            .and_then(|a| a.http_status),
        Some(418)
    );
    assert_eq!(http.mirror_percentage.map(|p| p.value), Some(25.5));
    assert!(http.route[0].headers.is_some());

    for (bad, field) in [
        (
            spec.replace("httpStatus: 418", "httpStatus: 99"),
            "http[0].fault.abort.httpStatus",
        ),
        (
            spec.replace("value: 25.5", "value: 101"),
            "http[0].mirrorPercentage",
        ),
        (
            spec.replace("[GET, POST]", "[GET, FETCH]"),
            "http[0].corsPolicy.allowMethods",
        ),
        (
            spec.replace("remove: [x-c]", "remove: [host]"),
            "http[0].headers.request.remove",
        ),
    ] {
        let e = rejected(&istio("v1", "VirtualService", "r", &bad));
        assert!(e.reason.contains(field), "{field}: {}", e.reason);
    }
}

/// What `kubectl get svc,vs -o yaml` writes: each item loads as its own object, and an
/// error names the item's own line.
#[test]
fn a_kubectl_list_loads_each_item_with_its_own_line() {
    let yaml = "apiVersion: v1
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: reviews
    namespace: shop
  spec:
    ports:
    - name: http
      port: 9080
- apiVersion: networking.istio.io/v1
  kind: VirtualService
  metadata:
    name: broken
    namespace: shop
  spec:
    hosts: [reviews]
    http:
    - route:
      - destination: {host: reviews}
        weight: 0
      - destination: {host: reviews}
        weight: 0
kind: List
metadata:
  resourceVersion: \"\"
";
    let out = parse_documents("list.yaml", yaml);
    assert_eq!(out.len(), 2, "{out:?}");
    let service = out[0].as_ref().unwrap();
    assert_eq!(service.config.key().to_string(), "Service shop/reviews");
    assert_eq!(service.location.to_string(), "list.yaml:3");
    let error = out[1].as_ref().unwrap_err();
    assert_eq!(error.object, "VirtualService shop/broken");
    assert_eq!(error.location.to_string(), "list.yaml:12");
}

/// A `ServiceList` as the API server writes it: items without apiVersion or kind.
#[test]
fn a_kind_list_types_its_items() {
    let yaml = "---\napiVersion: v1\nkind: ServiceList\nmetadata: {resourceVersion: \"7\"}\nitems:\n- metadata: {name: a, namespace: shop}\n  spec: {ports: [{port: 80}]}\n- metadata: {name: b, namespace: shop}\n";
    let out = parse_documents("l.yaml", yaml);
    let keys: Vec<String> = out
        .iter()
        .map(|p| p.as_ref().unwrap().config.key().to_string())
        .collect();
    assert_eq!(keys, ["Service shop/a", "Service shop/b"]);
    assert_eq!(out[1].as_ref().unwrap().location.line, 8);
}

/// Go's YAML (Istio's) reads an IPv6 address in a flow sequence as a string.
#[test]
fn a_service_entry_with_ipv6_addresses_in_a_flow_sequence_loads() {
    let yaml = istio(
        "v1",
        "ServiceEntry",
        "db",
        "  hosts: [db.example.com]\n  addresses: [192.0.2.10, 2001:db8::10]\n  ports: [{number: 5432, name: tcp, protocol: TCP}]\n  resolution: STATIC\n  endpoints: [{address: 2001:db8::11}]\n",
    );
    let parsed = one(&yaml);
    let crate::config::Spec::ServiceEntry(se) = &parsed.config.spec else {
        panic!("not a ServiceEntry");
    };
    assert_eq!(se.addresses, ["192.0.2.10", "2001:db8::10"]);
    assert_eq!(se.endpoints[0].address, "2001:db8::11");
}

/// Quoting in flow collections keeps the line of a later error.
#[test]
fn errors_after_a_quoted_flow_scalar_keep_their_line() {
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: db, namespace: shop}\nspec:\n  addresses: [2001:db8::10]\n  hosts: [db\n";
    let error = rejected(yaml);
    assert_eq!(error.location.line, 7, "{error}");
}
