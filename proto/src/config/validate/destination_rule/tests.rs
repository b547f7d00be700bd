use super::*;

/// Validates a DestinationRule spec (YAML) in namespace `ns`: its warnings, or why it
/// was rejected.
fn check_in(ns: &str, spec: &str) -> Result<Vec<String>, String> {
    let dr: istio::DestinationRule = serde_norway::from_str(spec).expect("spec parses");
    let mut warnings = Vec::new();
    destination_rule(&dr, ns, &mut warnings).map_err(|e| e.0)?;
    Ok(warnings)
}

fn check(spec: &str) -> Result<Vec<String>, String> {
    check_in("shop", spec)
}

fn rejected(spec: &str, reason: &str) {
    match check(spec) {
        Err(e) => assert!(e.contains(reason), "{e:?} does not say {reason:?}"),
        Ok(w) => panic!("accepted (warnings {w:?}), expected {reason:?}:\n{spec}"),
    }
}

fn tls(fields: &str) -> String {
    format!("host: carts\ntrafficPolicy:\n  tls:\n{fields}")
}

#[test]
fn tls_modes_by_istio_rules() {
    for ok in [
        "    mode: DISABLE\n",
        "    mode: SIMPLE\n",
        "    mode: SIMPLE\n    caCertificates: /c/ca.pem\n    sni: a\n    subjectAltNames: [a]\n",
        "    mode: SIMPLE\n    insecureSkipVerify: true\n",
        "    mode: MUTUAL\n    clientCertificate: /c/cert.pem\n    privateKey: /c/key.pem\n",
    ] {
        assert_eq!(check(&tls(ok)), Ok(vec![]), "{ok}");
    }
    rejected(
        &tls("    mode: STRICT\n"),
        "trafficPolicy.tls.mode: unknown TLS mode",
    );
    rejected(
        &tls("    mode: MUTUAL\n    privateKey: /c/key.pem\n"),
        "client certificate required",
    );
    rejected(
        &tls("    mode: MUTUAL\n    clientCertificate: /c/cert.pem\n"),
        "private key required",
    );
    rejected(
        &tls("    mode: SIMPLE\n    insecureSkipVerify: true\n    caCertificates: /c/ca.pem\n"),
        "insecureSkipVerify",
    );
    rejected(
        &tls("    mode: SIMPLE\n    credentialName: cert\n    caCertificates: /c/ca.pem\n"),
        "if credentialName is set",
    );
    // Per port and per subset too, with the field named.
    rejected(
        "host: carts\nsubsets:\n- name: v1\n  trafficPolicy:\n    portLevelSettings:\n    - port: {number: 80}\n      tls: {mode: MUTUAL}\n",
        "subsets[0].trafficPolicy.portLevelSettings[0].tls.clientCertificate",
    );
}

#[test]
fn tls_that_shoal_cannot_originate_is_reported_and_istio_mutual_is_not() {
    let w = check(&tls("    mode: ISTIO_MUTUAL\n")).unwrap();
    assert!(w.is_empty(), "the mesh's mTLS is served: {w:?}");
    let w = check(&tls("    mode: SIMPLE\n    credentialName: egress-cert\n")).unwrap();
    assert!(
        w[0].contains("credentialName applies to gateways only"),
        "{w:?}"
    );
}

fn hash(fields: &str) -> String {
    format!("host: carts\ntrafficPolicy:\n  loadBalancer:\n    consistentHash:\n{fields}")
}

#[test]
fn consistent_hash_by_istio_rules() {
    for ok in [
        "      httpCookie: {name: user, ttl: 60s, path: /}\n",
        "      httpHeaderName: x-user\n      ringHash: {minimumRingSize: 2048}\n",
        "      useSourceIp: true\n      maglev: {tableSize: 65537}\n",
        "      httpQueryParameterName: user\n",
    ] {
        assert_eq!(check(&hash(ok)), Ok(vec![]), "{ok}");
    }
    rejected(
        &hash("      httpCookie: {ttl: 60s}\n"),
        "name required for HttpCookie",
    );
    rejected(
        &hash("      httpCookie: {name: u, ttl: forever}\n"),
        "httpCookie.ttl",
    );
    rejected(
        &hash("      httpCookie:\n        name: u\n        attributes: [{name: a}, {name: a}]\n"),
        "duplicate cookie attribute name",
    );
    rejected(
        &hash("      httpHeaderName: x\n      httpCookie: {name: u}\n"),
        "only one of httpHeaderName",
    );
    rejected(
        &hash(
            "      httpHeaderName: x\n      maglev: {tableSize: 65537}\n      ringHash: {minimumRingSize: 8}\n",
        ),
        "only one of ringHash or maglev",
    );
    rejected(
        &hash(
            "      httpHeaderName: x\n      minimumRingSize: 8\n      maglev: {tableSize: 65537}\n",
        ),
        "only one of minimumRingSize",
    );
    rejected(
        &hash("      maglev: {tableSize: 0}\n"),
        "tableSize must be set",
    );
    rejected(&hash("      maglev: {tableSize: 65536}\n"), "prime");
    rejected(
        &hash("      maglev: {tableSize: 5000011}\n"),
        "less than 5000011",
    );
    let w = check(&hash("      httpHeaderName: x\n      minimumRingSize: 8\n")).unwrap();
    assert!(w[0].contains("deprecated"), "{w:?}");
}

#[test]
fn primes_as_envoy_counts_them() {
    let primes: Vec<u64> = (0..30).filter(|n| is_prime(*n)).collect();
    // Envoy's test counts 1 as prime, and Istio follows it.
    assert_eq!(primes, [1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29]);
    assert!(is_prime(65537) && !is_prime(65535));
}

#[test]
fn workload_selector_by_istio_rules() {
    let selector = "host: carts\nworkloadSelector:\n  matchLabels: {app: web}\n";
    assert_eq!(check(selector), Ok(vec![]));
    assert_eq!(check(&format!("{selector}exportTo: [.]\n")), Ok(vec![]));
    assert_eq!(check(&format!("{selector}exportTo: [shop]\n")), Ok(vec![]));
    rejected(
        &format!("{selector}exportTo: ['*']\n"),
        "cannot have exportTo beyond current namespace",
    );
    rejected(
        &format!("{selector}exportTo: [., shop]\n"),
        "cannot have multiple entries",
    );
    rejected(
        "host: carts\nworkloadSelector:\n  matchLabels: {app: 'web*'}\n",
        "wildcard is not supported",
    );
    let w = check("host: carts\nworkloadSelector: {}\n").unwrap();
    assert!(w[0].contains("without labels"), "{w:?}");
}

fn warmup(fields: &str) -> String {
    format!(
        "host: carts\ntrafficPolicy:\n  loadBalancer:\n    simple: ROUND_ROBIN\n    warmup:\n{fields}"
    )
}

#[test]
fn warmup_by_istio_rules_and_reported_as_unsupported() {
    let ok = check(&warmup(
        "      duration: 60s\n      minimumPercent: 10\n      aggression: 1.5\n",
    ))
    .expect("accepted");
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert!(
        ok[0].contains("loadBalancer.warmup is not supported by Shoal"),
        "{ok:?}"
    );
    rejected(
        &warmup("      minimumPercent: 10\n"),
        "trafficPolicy.loadBalancer.warmup.duration is required",
    );
    rejected(
        &warmup("      duration: 60s\n      minimumPercent: 101\n"),
        "warmup.minimumPercent: 101 is not in 0-100",
    );
    rejected(
        &warmup("      duration: 60s\n      aggression: -1\n"),
        "warmup.aggression: -1 must be greater than 0",
    );
    rejected(
        &warmup("      duration: 60s\n      aggression: 0\n"),
        "must be greater than 0",
    );
    rejected(&warmup("      duration: 0s\n"), "at least 1ms");
}

#[test]
fn subsets_pools_and_port_policies_by_istio_rules() {
    rejected(
        "host: carts\nsubsets: [{name: v1.0, labels: {version: v1}}]\n",
        "subsets[0].name: subset name \"v1.0\" is invalid",
    );
    rejected(
        "host: carts\nsubsets: [{name: v1, labels: {version: 'v 1'}}]\n",
        "subsets[0].labels",
    );
    rejected(
        "host: carts\ntrafficPolicy:\n  connectionPool: {}\n",
        "trafficPolicy.connectionPool must have at least one field",
    );
    rejected(
        "host: carts\ntrafficPolicy:\n  portLevelSettings: [{port: {number: 80}}]\n",
        "portLevelSettings[0]: port traffic policy must have at least one field",
    );
    rejected(
        "host: carts\ntrafficPolicy:\n  connectionPool: {tcp: {connectTimeout: 0s}}\n",
        "connectTimeout: duration \"0s\" must be at least 1ms",
    );
    rejected(
        "host: carts\ntrafficPolicy:\n  outlierDetection: {interval: 1.5ms}\n",
        "finer than 1ms",
    );
    assert!(
        check("host: carts\ntrafficPolicy:\n  loadBalancer:\n    consistentHash: {httpCookie: {name: s, ttl: 0s}, maglev: {tableSize: 1}}\n").is_ok()
    );
}

fn locality(setting: &str) -> String {
    format!("host: carts\ntrafficPolicy:\n  loadBalancer:\n    localityLbSetting:\n{setting}")
}

#[test]
fn locality_settings_by_istio_rules() {
    rejected(
        &locality("      distribute:\n      - from: r1/*\n        to: {r1/z1/*: 100, r2/*: 0}\n"),
        "weight 0 is not in 1-100",
    );
    rejected(
        &locality(
            "      distribute:\n      - from: r1/*\n        to: {r2/*: 100}\n      - from: r1/z1/*\n        to: {r2/*: 100}\n",
        ),
        "distribute[1].from: locality \"r1/z1/*\" overlaps \"r1/*\"",
    );
    rejected(
        &locality("      distribute:\n      - from: r1//s\n        to: {r2/*: 100}\n"),
        "is not region/zone/subzone",
    );
    rejected(
        &locality(
            "      failover: [{from: r1, to: r2}]\n      failoverPriority: [topology.kubernetes.io/zone]\n",
        ),
        "can not simultaneously set failover",
    );
    let warnings = check(&locality("      failover: [{from: r1, to: r2}]\n")).expect("accepted");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("outlier detection policy must be provided")),
        "{warnings:?}"
    );
}
