//! `shoal analyze DIR` as users run it: the real binary over fixture directories,
//! its text and JSON output and its exit status.
//!
//! - `mesh/`: one of every problem the analyzers find (see `mesh.expected`).
//! - `clean/`: consistent config with one ignored field: a warning, exit status 0.

use std::path::Path;
use std::process::{Command, Output};

/// Runs `shoal analyze ARGS` from the repository root, so paths print as given.
fn analyze(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shoal"))
        .arg("analyze")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("SHOAL_CONFIG_DIR")
        .output()
        .expect("run shoal analyze")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

#[test]
fn text_output_lists_every_finding_and_errors_exit_1() {
    let output = analyze(&["tests/analyze/mesh"]);
    let expected = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/analyze/mesh.expected"),
    )
    .unwrap();
    assert_eq!(stdout(&output), expected);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
}

#[test]
fn json_output_is_an_array_of_findings() {
    let output = analyze(&["tests/analyze/mesh", "-o", "json"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let findings = json.as_array().unwrap();
    let text_lines = stdout(&analyze(&["tests/analyze/mesh"])).lines().count();
    assert_eq!(findings.len(), text_lines);
    let host_not_found = findings
        .iter()
        .find(|f| f["message"] == "Referenced host not found: \"ratings.shop.svc.cluster.local\"")
        .expect("the route to ratings is reported");
    assert_eq!(
        *host_not_found,
        serde_json::json!({
            "code": "IST0101",
            "level": "Error",
            "origin": "VirtualService shop/reviews",
            "message": "Referenced host not found: \"ratings.shop.svc.cluster.local\"",
            "file": "tests/analyze/mesh/shop/routing.yaml",
            "line": 19,
        })
    );
    // Enforced, valid: nothing to report.
    assert!(
        findings
            .iter()
            .all(|f| f["origin"] != "RequestAuthentication shop/jwt"),
        "{findings:?}"
    );
    let enforced = findings
        .iter()
        .find(|f| f["origin"] == "AuthorizationPolicy shop/deny-admin")
        .expect("the enforced AuthorizationPolicy's warning");
    assert_eq!(enforced["level"], "Warning");
}

#[test]
fn warnings_alone_exit_0() {
    let output = analyze(&["tests/analyze/clean"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        stdout(&output),
        "Warning [SHL0002] (VirtualService shop/reviews tests/analyze/clean/mesh.yaml:26) fields not supported by Shoal, ignored: spec.http[0].mirrorPolicy\n"
    );
    let json = analyze(&["tests/analyze/clean", "--output", "json"]);
    assert_eq!(json.status.code(), Some(0));
}

#[test]
fn an_unreadable_directory_exits_2() {
    let output = analyze(&["tests/analyze/does-not-exist"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read tests/analyze/does-not-exist"),
        "{stderr}"
    );
}

#[test]
fn serving_flags_and_analyze_do_not_mix() {
    let output = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .args([
            "--config-dir",
            "tests/analyze/clean",
            "analyze",
            "tests/analyze/clean",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    // Without a subcommand, --config-dir is still required.
    let output = Command::new(env!("CARGO_BIN_EXE_shoal"))
        .env_remove("SHOAL_CONFIG_DIR")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--config-dir"));
}
