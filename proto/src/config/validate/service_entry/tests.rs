use super::*;

fn se(spec: &str) -> Result<Vec<String>, String> {
    let se: ServiceEntry = serde_norway::from_str(spec).expect("spec parses");
    let mut warnings = Vec::new();
    service_entry(&se, "shop", &mut warnings).map_err(|e| e.0)?;
    Ok(warnings)
}

fn we(spec: &str) -> Result<Vec<String>, String> {
    let we: WorkloadEntry = serde_norway::from_str(spec).expect("spec parses");
    let mut warnings = Vec::new();
    workload_entry(&we, &mut warnings).map_err(|e| e.0)?;
    Ok(warnings)
}

fn rejected(got: Result<Vec<String>, String>, reason: &str) {
    match got {
        Err(e) => assert!(e.contains(reason), "{e:?} does not say {reason:?}"),
        Ok(w) => panic!("accepted (warnings {w:?}), expected {reason:?}"),
    }
}

#[test]
fn service_entry_without_ports_is_accepted_as_istio_does() {
    assert_eq!(
        se("hosts: [api.example.com]\nresolution: DNS\n"),
        Ok(vec![])
    );
}

#[test]
fn service_entry_ports_by_istio_rules() {
    let ports = |p: &str| {
        se(&format!(
            "hosts: [a.example.com]\nresolution: DNS\nports: {p}\n"
        ))
    };
    assert!(ports("[{number: 80, name: http, protocol: HTTP}, {number: 443, name: https, protocol: HTTPS}]").is_ok());
    rejected(
        ports("[{number: 80, name: http}, {number: 8080, name: http}]"),
        "ports[1].name: port name \"http\" is already defined",
    );
    rejected(
        ports("[{number: 80, name: a}, {number: 80, name: b}]"),
        "ports[1].number: port 80 is already defined",
    );
    rejected(
        ports("[{number: 80, name: http, targetPort: 70000}]"),
        "ports[0].targetPort: port 70000 is not in 1-65535",
    );
    assert!(ports("[{number: 80, name: http, targetPort: 8080}]").is_ok());
    rejected(
        ports("[{number: 80, name: http_1}]"),
        "ports[0].name: invalid port name",
    );
    rejected(
        ports("[{number: 80}]"),
        "ports[0].name: invalid port name \"\"",
    );
    rejected(
        ports("[{number: 80, name: h, protocol: QUIC}]"),
        "ports[0].protocol",
    );
}

#[test]
fn service_entry_resolution_rules() {
    rejected(se("hosts: ['*']\n"), "hosts[0]");
    rejected(
        se("hosts: [a.example.com]\nendpoints: [{address: 10.0.0.1}]\n"),
        "no endpoints should be provided for resolution NONE",
    );
    rejected(
        se("hosts: ['*.example.com']\nresolution: DNS\n"),
        "hosts must be FQDNs",
    );
    assert!(se("hosts: ['*.example.com']\nresolution: NONE\n").is_ok());
    rejected(
        se(
            "hosts: [a.example.com]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: a.example.com}, {address: b.example.com}]\n",
        ),
        "0 or 1 endpoint",
    );
    rejected(
        se("hosts: [a.example.com]\naddresses: [10.0.0.0/24]\nresolution: DNS\n"),
        "addresses[0]: CIDR addresses are allowed only for NONE/STATIC",
    );
    rejected(
        se("hosts: [a.example.com]\naddresses: [not-an-ip]\n"),
        "addresses[0]",
    );
    assert!(se("hosts: [a.example.com]\naddresses: [10.0.0.0/24, '2001:db8::/32']\n").is_ok());
    rejected(
        se(
            "hosts: [a.example.com, b.example.com]\nresolution: DNS\nports: [{number: 5432, name: pg, protocol: TCP}]\n",
        ),
        "multiple hosts provided with a non-HTTP, non-TLS port",
    );
    rejected(
        se(
            "hosts: [a.example.com]\nresolution: STATIC\nports: [{number: 80, name: http}]\nendpoints: [{address: 10.0.0.1, ports: {grpc: 9000}}]\n",
        ),
        "endpoints[0]: ports[grpc]: endpoint port \"grpc\" is not defined",
    );
    rejected(
        se("hosts: [a.example.com]\nresolution: STATIC\nendpoints: [{address: vm.example.com}]\n"),
        "must be an IP address",
    );
    rejected(
        se("hosts: [a.example.com]\nexportTo: ['*', '.']\n"),
        "exportTo",
    );
    assert!(se("hosts: [a.example.com]\nexportTo: ['~']\n").is_ok());
}

#[test]
fn workload_entry_unix_sockets_by_istio_rules() {
    assert!(we("address: unix:///var/run/app.sock\n").is_ok());
    assert!(we("address: unix://@abstract\n").is_ok());
    rejected(we("address: unix://relative.sock\n"), "absolute path");
    rejected(we("address: unix:///var/run/\n"), "absolute path to a file");
    rejected(we("address: 'unix://'\n"), "must not be empty");
    rejected(
        we("address: unix:///var/run/app.sock\nports: {http: 80}\n"),
        "must not include ports",
    );
}

#[test]
fn workload_entry_port_names_and_addresses() {
    assert!(we("address: 10.0.0.1\nports: {http: 80, grpc-web: 9000}\n").is_ok());
    rejected(
        we("address: 10.0.0.1\nports: {http_web: 80}\n"),
        "ports[http_web]: invalid port name",
    );
    rejected(
        we("address: 10.0.0.1\nports: {-http: 80}\n"),
        "invalid port name",
    );
    assert!(we("address: vm1.example.com\n").is_ok());
    rejected(
        we("address: 10.0.0.300\n"),
        "not a valid IP address or FQDN",
    );
    rejected(
        we("address: 10.0.0.1\nlabels: {app: 'bad value'}\n"),
        "labels",
    );
}

#[test]
fn workload_entry_with_only_a_network_is_accepted_with_a_warning() {
    let warnings = we("network: network-2\n").unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("network-2"), "{warnings:?}");
    rejected(we("labels: {app: a}\n"), "address is required");
}
