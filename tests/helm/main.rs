//! The Helm chart (`deploy/helm/shoal`), rendered by the pinned helm (`make setup`) with
//! each values file it ships, checked against the code it deploys: every container's args
//! parse with its binary's own CLI; ports, probes, the edge Service, autoscaler and
//! disruption budgets agree with those flags and pods; ingest's RBAC grants read access
//! to exactly what ingest watches; an edge outlives its drain; monitoring (PodMonitor,
//! PrometheusRule, Grafana dashboard) is rendered only when asked for.

mod chart;
mod cli;
mod mesh_config;
mod monitoring;
mod rbac;
mod transport;

use chart::{
    NAMESPACE, Rendered, containers, env_named, every_values_file, name, pod_labels, pod_spec,
    render, selects, strings, try_render,
};
use cli::{binary_of, cli_env, parse, parse_flags};
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

/// The tier binaries the chart runs, each in its own Deployment.
const BINARIES: [&str; 3] = ["ingest", "builder", "edge"];

/// A probe's or Service's port, by number or by the container port's name.
fn resolve_port(container: &Value, port: &Value) -> u16 {
    let number = match port {
        Value::String(port_name) => container["ports"]
            .as_array()
            .and_then(|ports| ports.iter().find(|p| &p["name"] == port_name))
            .unwrap_or_else(|| panic!("no container port named {port_name}"))
            .get("containerPort")
            .unwrap(),
        number => number,
    };
    number.as_u64().unwrap().try_into().unwrap()
}

fn every_container(r: &Rendered) -> impl Iterator<Item = (&Value, &Value)> {
    r.of_kind("Deployment")
        .flat_map(|d| containers(d).iter().map(move |c| (d, c)))
}

#[test]
fn helm_lint_passes_with_every_values_file() {
    let dir = chart::chart_dir();
    for file in chart::VALUES_FILES {
        let (chart, values) = (dir.to_str().unwrap(), dir.join(file));
        let values = values.to_str().unwrap();
        let args = [
            "lint",
            "--strict",
            chart,
            "--namespace",
            NAMESPACE,
            "--values",
            values,
        ];
        if let Err(e) = chart::run_helm(&args) {
            panic!("helm lint with {file}:\n{e}");
        }
    }
}

#[test]
fn every_container_args_parse_with_its_binary_cli() {
    for r in every_values_file() {
        for binary in BINARIES {
            r.deployment_of(binary);
        }
        for (_, container) in every_container(r) {
            parse_flags(container);
            let binary = binary_of(container);
            let known = cli_env(binary);
            for var in container["env"].as_array().into_iter().flatten() {
                let var = var["name"].as_str().unwrap();
                let ours = var.starts_with("SHOAL_");
                assert!(
                    !ours || known.contains(var),
                    "{}: {binary} does not read {var}",
                    r.values_file
                );
            }
        }
        let edge = &containers(r.deployment_of("edge"))[0];
        let edge_id = env_named(edge, "SHOAL_EDGE_ID").expect("the edge's ID is set");
        assert_eq!(
            edge_id["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name",
            "each edge's ring ID is its pod's name"
        );
    }
}

#[test]
fn container_ports_and_probes_match_the_flags() {
    for r in every_values_file() {
        for (deployment, container) in every_container(r) {
            let flags = parse_flags(container);
            let at = format!("{}: {}", r.values_file, name(deployment));
            let listens: BTreeSet<u16> =
                [Some(flags.http_addr), flags.xds_addr, flags.secure_xds_addr]
                    .into_iter()
                    .flatten()
                    .map(|addr| {
                        // Probes and the Service reach the pod's IP, not its loopback.
                        assert!(addr.ip().is_unspecified(), "{at}: listens on {addr}");
                        addr.port()
                    })
                    .collect();
            let declared: BTreeSet<u16> = container["ports"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| resolve_port(container, &p["containerPort"]))
                .collect();
            assert_eq!(declared, listens, "{at}: containerPorts");

            let http = flags.http_addr.port();
            let readiness = &container["readinessProbe"]["httpGet"];
            assert_eq!(readiness["path"], "/healthz/ready", "{at}");
            assert_eq!(resolve_port(container, &readiness["port"]), http, "{at}");
            let liveness = &container["livenessProbe"]["httpGet"];
            assert_eq!(resolve_port(container, &liveness["port"]), http, "{at}");
            // A path the admin server does not serve would restart every pod, forever.
            let served = ["/metrics", "/healthz/ready"];
            assert!(served.iter().any(|p| liveness["path"] == *p), "{at}");

            let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
            assert_eq!(annotations["prometheus.io/scrape"], "true", "{at}");
            assert_eq!(annotations["prometheus.io/port"], http.to_string(), "{at}");
        }
    }
}

#[test]
fn the_builder_gets_no_api_credentials_and_the_edge_only_what_its_security_needs() {
    for r in every_values_file() {
        let spec = pod_spec(r.deployment_of("builder"));
        assert_eq!(spec["automountServiceAccountToken"], false, "builder");
        let edge = r.deployment_of("edge");
        let spec = pod_spec(edge);
        let review = r.value("edge.security.tokenReview").as_bool().unwrap();
        let ca = r.value("edge.security.caFromKubernetes").as_bool().unwrap();
        let publish = r.value("edge.security.publishRootCert").as_bool().unwrap();
        assert_eq!(
            spec["automountServiceAccountToken"],
            review || ca || publish,
            "edge"
        );
        let account = spec["serviceAccountName"]
            .as_str()
            .expect("the edge's own account");
        r.find("ServiceAccount", account);
        let bound: Vec<&str> = r
            .of_kind("ClusterRoleBinding")
            .chain(r.of_kind("RoleBinding"))
            .filter(|b| {
                b["subjects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|s| s["name"] == account)
            })
            .map(|b| b["roleRef"]["name"].as_str().unwrap())
            .collect();
        let edge_name = name(edge);
        let mut expected: Vec<String> = Vec::new();
        if review {
            expected.push("system:auth-delegator".into());
        }
        if publish {
            expected.push(format!("{edge_name}-{NAMESPACE}-root-cert"));
        }
        if ca {
            expected.push(format!("{edge_name}-ca"));
        }
        assert_eq!(bound, expected, "{}", r.values_file);
    }
}

#[test]
fn the_edge_service_reaches_the_xds_ports_of_edge_pods_only() {
    for r in every_values_file() {
        let edge = r.deployment_of("edge");
        let container = &containers(edge)[0];
        let flags = parse_flags(container);
        let service = r.find("Service", name(edge));
        let selector = &service["spec"]["selector"];
        assert!(selects(selector, pod_labels(edge)), "selects edge pods");
        for binary in ["ingest", "builder"] {
            let other = pod_labels(r.deployment_of(binary));
            assert!(!selects(selector, other), "selects {binary} pods");
        }
        let ports = service["spec"]["ports"].as_array().unwrap();
        let secure = ports
            .iter()
            .find(|p| p["name"] == "grpc-xds-tls")
            .expect("grpc-xds-tls");
        assert_eq!(secure["port"], 15012, "istiod's secure xDS and CA port");
        let target = resolve_port(container, &secure["targetPort"]);
        assert_eq!(target, flags.secure_xds_addr.unwrap().port());
        // Plaintext only when asked for.
        let plaintext = ports.iter().find(|p| p["name"] == "grpc-xds");
        assert_eq!(
            plaintext.is_some(),
            flags.xds_addr.is_some(),
            "{}",
            r.values_file
        );
        if let Some(xds) = plaintext {
            assert_eq!(xds["port"], 15010, "istiod's plaintext xDS port");
        }
        let listens: Vec<u16> = [flags.xds_addr, flags.secure_xds_addr, Some(flags.http_addr)]
            .into_iter()
            .flatten()
            .map(|a| a.port())
            .collect();
        for port in ports {
            let target = resolve_port(container, &port["targetPort"]);
            assert!(listens.contains(&target), "{port}");
        }
    }
}

#[test]
fn plaintext_xds_is_served_only_when_enabled() {
    let r = render("values.yaml", &["edge.plaintextXds.enabled=true"]);
    let flags = parse_flags(&containers(r.deployment_of("edge"))[0]);
    assert_eq!(flags.xds_addr.map(|a| a.port()), Some(15010));
    let service = r.find("Service", name(r.deployment_of("edge")));
    let names: Vec<&str> = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"grpc-xds") && names.contains(&"grpc-xds-tls"),
        "{names:?}"
    );
}

#[test]
fn the_autoscaler_scales_the_edges_on_cpu_and_connected_proxies() {
    for r in every_values_file() {
        let edge = r.deployment_of("edge");
        let hpa = r.find("HorizontalPodAutoscaler", name(edge));
        assert_eq!(hpa["apiVersion"], "autoscaling/v2");
        let target = &hpa["spec"]["scaleTargetRef"];
        assert_eq!(target["kind"], "Deployment");
        assert_eq!(target["name"], name(edge));
        assert!(
            edge["spec"]["replicas"].is_null(),
            "the autoscaler owns the count"
        );

        let metrics = hpa["spec"]["metrics"].as_array().unwrap();
        let cpu = metrics
            .iter()
            .find(|m| m["type"] == "Resource" && m["resource"]["name"] == "cpu")
            .expect("a CPU metric");
        assert_eq!(
            cpu["resource"]["target"]["averageUtilization"],
            *r.value("edge.autoscale.targetCPUUtilizationPercentage")
        );
        let proxies = metrics.iter().find(|m| m["type"] == "Pods");
        if r.value("edge.autoscale.connectedProxies.enabled") == true {
            let proxies = proxies.expect("a connected-proxies metric");
            assert_eq!(proxies["pods"]["metric"]["name"], "pilot_xds");
            assert_eq!(proxies["pods"]["target"]["type"], "AverageValue");
        } else {
            assert!(
                proxies.is_none(),
                "pods metrics need an adapter: off by default"
            );
        }
    }
    assert!(
        every_values_file()
            .iter()
            .any(|r| r.value("edge.autoscale.connectedProxies.enabled") == true),
        "some values file shows connected-proxies scaling"
    );
}

/// The HPA's pods metric is the gauge the edge exports.
#[test]
fn the_edge_exports_pilot_xds_as_a_gauge() {
    let mut registry = prometheus_client::registry::Registry::default();
    let (_tx, snapshots) = tokio::sync::watch::channel(std::sync::Arc::new(
        shoal_proto::push_context::PushContext::empty(),
    ));
    let _server = shoal_edge::ads::XdsServer::new(
        shoal_edge::ads::XdsConfig::default(),
        std::sync::Arc::new(shoal_edge::xds::Generator::new()),
        snapshots,
        &mut registry,
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains("# TYPE pilot_xds gauge\n"), "{text}");
}

#[test]
fn disruption_budgets_select_builder_and_edge_pods() {
    for r in every_values_file() {
        for binary in ["builder", "edge"] {
            let deployment = r.deployment_of(binary);
            let pdb = r.find("PodDisruptionBudget", name(deployment));
            let selector = &pdb["spec"]["selector"]["matchLabels"];
            for other in BINARIES {
                let labels = pod_labels(r.deployment_of(other));
                assert_eq!(
                    selects(selector, labels),
                    other == binary,
                    "{binary}'s PDB, {other} pods"
                );
            }
        }
        let builder = r.find("PodDisruptionBudget", name(r.deployment_of("builder")));
        assert_eq!(builder["spec"]["minAvailable"], 1);
    }
}

#[test]
fn builders_and_edges_spread_across_nodes() {
    for r in every_values_file() {
        for binary in ["builder", "edge"] {
            let deployment = r.deployment_of(binary);
            let spread = pod_spec(deployment)["topologySpreadConstraints"]
                .as_array()
                .unwrap_or_else(|| panic!("{binary} pods do not spread"));
            let by_node = spread
                .iter()
                .find(|c| c["topologyKey"] == "kubernetes.io/hostname")
                .expect("a spread across nodes");
            let selector = &by_node["labelSelector"]["matchLabels"];
            assert!(selects(selector, pod_labels(deployment)), "{binary}");
        }
    }
}

#[test]
fn containers_run_the_values_image() {
    let app_version = chart::read_yaml(&chart::chart_dir().join("Chart.yaml"))["appVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for r in every_values_file() {
        let expected = format!(
            "{}:{app_version}",
            r.value("image.repository").as_str().unwrap()
        );
        for (_, container) in every_container(r) {
            assert_eq!(container["image"], expected.as_str());
        }
    }
    let r = render(
        "values.yaml",
        &["image.repository=registry.example/shoal", "image.tag=v9"],
    );
    for (_, container) in every_container(&r) {
        assert_eq!(container["image"], "registry.example/shoal:v9");
    }
}

/// The preStop sleep, in seconds (`exec: [sleep, N]`).
fn pre_stop_sleep(container: &Value) -> Duration {
    let command = strings(&container["lifecycle"]["preStop"]["exec"]["command"]);
    assert!(command[0].ends_with("sleep"), "{command:?}");
    Duration::from_secs(command[1].parse().unwrap())
}

#[test]
fn an_edge_outlives_its_drain() {
    for r in every_values_file() {
        let edge = r.deployment_of("edge");
        let container = &containers(edge)[0];
        let grace = pod_spec(edge)["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap();
        let needed = parse_flags(container).drain_grace + pre_stop_sleep(container);
        assert!(
            Duration::from_secs(grace) > needed,
            "{}: killed after {grace}s, drained after {needed:?}",
            r.values_file
        );
    }
    let err = try_render("values.yaml", &["edge.terminationGracePeriodSeconds=20"])
        .err()
        .expect("a grace shorter than drain + preStop is refused");
    assert!(err.contains("terminationGracePeriodSeconds"), "{err}");
}

#[test]
fn cluster_values_reach_ingests_args() {
    for r in every_values_file() {
        let container = &containers(r.deployment_of("ingest"))[0];
        let parsed: shoal_ingest::cli::Args = parse("ingest", &strings(&container["args"]));
        assert_eq!(
            parsed.registry().unwrap(),
            shoal_ingest::cli::RegistryKind::Kubernetes
        );
        assert_eq!(parsed.cluster_id, *r.value("global.clusterId"));
        assert_eq!(parsed.network, *r.value("global.network"));
        assert_eq!(parsed.nats.nats_url, *r.value("nats.url"));
        assert!(parsed.namespaces.is_empty());
    }
    let multicluster = every_values_file()
        .iter()
        .find(|r| r.values_file == "values-multicluster.yaml")
        .unwrap();
    assert_ne!(*multicluster.value("global.clusterId"), "Kubernetes");
    assert_ne!(*multicluster.value("global.network"), "");

    let r = render("values.yaml", &["ingest.namespaces={shop,pay}"]);
    let args = strings(&containers(r.deployment_of("ingest"))[0]["args"]);
    let parsed: shoal_ingest::cli::Args = parse("ingest", &args);
    assert_eq!(parsed.namespaces, ["shop", "pay"]);
}

#[test]
fn every_container_is_locked_down_and_bounded() {
    for r in every_values_file() {
        for (deployment, container) in every_container(r) {
            let at = format!("{}: {}", r.values_file, name(deployment));
            assert_eq!(
                pod_spec(deployment)["securityContext"]["runAsNonRoot"],
                true,
                "{at}"
            );
            let security = &container["securityContext"];
            assert_eq!(security["readOnlyRootFilesystem"], true, "{at}");
            assert_eq!(security["allowPrivilegeEscalation"], false, "{at}");
            assert_eq!(
                security["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{at}"
            );
            let resources = &container["resources"];
            for bound in ["requests.cpu", "requests.memory", "limits.memory"] {
                let (kind, what) = bound.split_once('.').unwrap();
                assert!(resources[kind][what].is_string(), "{at}: no {bound}");
            }
        }
    }
}
