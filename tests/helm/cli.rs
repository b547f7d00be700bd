//! The tiers' own command lines, parsing what the chart passes them.

use crate::chart::strings;
use clap::{CommandFactory, Parser};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

/// What a container's args say, as its binary's own CLI parses them.
pub struct Flags {
    pub http_addr: SocketAddr,
    pub xds_addr: Option<SocketAddr>,
    pub drain_grace: Duration,
}

pub fn binary_of(container: &Value) -> &str {
    let command = strings(&container["command"]);
    assert_eq!(command.len(), 1, "command is the binary alone: {command:?}");
    command[0]
        .strip_prefix("/usr/local/bin/")
        .unwrap_or_else(|| panic!("{command:?} is not one of the image's binaries"))
}

/// `args` parsed as `binary`'s CLI parses its command line.
pub fn parse<A: Parser>(binary: &str, args: &[&str]) -> A {
    let argv = std::iter::once(binary).chain(args.iter().copied());
    A::try_parse_from(argv)
        .unwrap_or_else(|e| panic!("{binary} rejects the chart's args {args:?}:\n{e}"))
}

pub fn parse_flags(container: &Value) -> Flags {
    let binary = binary_of(container);
    let args = strings(&container["args"]);
    match binary {
        "ingest" => {
            let a: shoal_ingest::cli::Args = parse(binary, &args);
            a.check().unwrap();
            Flags {
                http_addr: a.http.http_addr,
                xds_addr: None,
                drain_grace: a.drain.drain_grace,
            }
        }
        "builder" => {
            let a: shoal_builder::cli::Args = parse(binary, &args);
            Flags {
                http_addr: a.http.http_addr,
                xds_addr: None,
                drain_grace: a.drain.drain_grace,
            }
        }
        "edge" => {
            let a: shoal_edge::cli::Args = parse(binary, &args);
            Flags {
                http_addr: a.http.http_addr,
                xds_addr: a.listen.plaintext_xds_addr,
                drain_grace: a.drain.drain_grace,
            }
        }
        other => panic!("the chart runs {other}, which has no CLI here"),
    }
}

/// The environment variables a binary's CLI reads.
pub fn cli_env(binary: &str) -> BTreeSet<String> {
    let command = match binary {
        "ingest" => shoal_ingest::cli::Args::command(),
        "builder" => shoal_builder::cli::Args::command(),
        "edge" => shoal_edge::cli::Args::command(),
        other => panic!("no CLI for {other}"),
    };
    command
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect()
}

/// A binary of this build (`cargo build --workspace --bins` first), beside the test's.
fn built(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test> → target/<profile>/<name>
    let path = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target dir")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        path.display()
    );
    path
}

/// A usage error is one line on stderr and exit status 2, with no backtrace even when
/// `RUST_BACKTRACE` asks for one (it is for panics, not for an operator's typo).
#[test]
fn usage_errors_are_one_line_and_exit_2_without_a_backtrace() {
    let nats = ["--cluster-id", "c1", "--nats-url", "nats://127.0.0.1:1"];
    let cases: [(&str, Vec<&str>, &str); 7] = [
        ("ingest", nats.to_vec(), "--config-dir"),
        (
            "ingest",
            [&nats[..], &["--config-dir", "/d", "--kubeconfig", "/k"]].concat(),
            "--registry",
        ),
        (
            "shoal",
            vec!["--config-dir", "/no/such/dir"],
            "not a directory",
        ),
        ("builder", vec!["--no-such-flag"], "--no-such-flag"),
        ("edge", vec!["--no-such-flag"], "--no-such-flag"),
        // A certificate without its key.
        ("edge", vec!["--tls-cert-file", "/c.pem"], "--tls-key-file"),
        (
            "loadtest",
            vec![
                "run",
                "--xds-addr",
                "127.0.0.1:1",
                "--proxies",
                "1",
                "--timeout",
                "0",
            ],
            "--timeout",
        ),
    ];
    for (binary, args, names) in cases {
        let output = std::process::Command::new(built(binary))
            .args(&args)
            .env("RUST_BACKTRACE", "1")
            .env("RUST_LOG", "off")
            .output()
            .expect("run the binary");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let what = format!("{binary} {args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(2), "{what}");
        assert!(stderr.contains(names), "{what}");
        assert!(!stderr.to_lowercase().contains("backtrace"), "{what}");
        // Ours are one line; clap's own say the usage and a hint after theirs.
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.contains("error") && first.contains(names), "{what}");
        if !stderr.contains("Usage:") {
            assert_eq!(stderr.trim_end().lines().count(), 1, "{what}");
        }
    }
}

/// Nothing binds every interface unless configured to: every address flag of every binary
/// defaults to loopback (the chart sets `0.0.0.0` where a pod must be reached, which
/// `container_ports_and_probes_match_the_flags` checks).
#[test]
fn every_listener_defaults_to_loopback() {
    for binary in ["ingest", "builder", "edge"] {
        let command = match binary {
            "ingest" => shoal_ingest::cli::Args::command(),
            "builder" => shoal_builder::cli::Args::command(),
            _ => shoal_edge::cli::Args::command(),
        };
        let mut listeners = 0;
        for arg in command.get_arguments() {
            for default in arg.get_default_values() {
                if let Ok(addr) = default.to_string_lossy().parse::<SocketAddr>() {
                    listeners += 1;
                    let flag = arg.get_long().unwrap_or_default();
                    assert!(
                        addr.ip().is_loopback(),
                        "{binary} --{flag} defaults to {addr}"
                    );
                }
            }
        }
        assert!(listeners > 0, "{binary} has no address flag with a default");
    }
    // The all-in-one is a binary without a library: its help shows its defaults.
    let output = std::process::Command::new(built("shoal"))
        .arg("--help")
        .output()
        .expect("run shoal --help");
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(help.contains("[default: 127.0.0.1:15010]"), "{help}");
    assert!(help.contains("[default: 127.0.0.1:15014]"), "{help}");
    assert!(
        !help.contains("0.0.0.0") && !help.contains("[::]"),
        "{help}"
    );
}
