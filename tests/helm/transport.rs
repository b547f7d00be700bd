//! NATS and Redis over TLS with credentials, from the chart's values: off by default; when
//! set, every tier's args parse into TLS files under the Secrets' mounts, and passwords and
//! tokens reach the tiers only as environment variables from Secrets, never as args.

use crate::chart::{containers, env_named, every_values_file, pod_spec, render, strings};
use crate::cli::{binary_of, parse};
use serde_json::Value;
use std::path::{Path, PathBuf};

const SECURE: [&str; 13] = [
    "nats.url=tls://nats:4222",
    "nats.tls.enabled=true",
    "nats.tls.secretName=nats-client-tls",
    "nats.tls.certKey=tls.crt",
    "nats.tls.keyKey=tls.key",
    "nats.auth.secretName=nats-auth",
    "nats.auth.user=shoal",
    "nats.auth.passwordKey=password",
    "redis.url=rediss://redis:6380",
    "redis.tls.enabled=true",
    "redis.tls.secretName=redis-ca",
    "redis.auth.secretName=redis-auth",
    "redis.auth.username=shoal",
];

/// The Secret a mounted path comes from: its volume's Secret and the key (file) in it.
fn secret_of<'a>(deployment: &'a Value, container: &Value, path: &Path) -> (&'a str, String) {
    let mount = container["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
        .unwrap_or_else(|| panic!("{} is not under a mount", path.display()));
    assert_eq!(mount["readOnly"], true);
    let volume = pod_spec(deployment)["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let key = path.file_name().unwrap().to_string_lossy().into_owned();
    (volume["secret"]["secretName"].as_str().unwrap(), key)
}

fn secret_env<'a>(container: &'a Value, var: &str) -> Option<(&'a str, &'a str)> {
    let reference = &env_named(container, var)?["valueFrom"]["secretKeyRef"];
    Some((
        reference["name"].as_str().unwrap(),
        reference["key"].as_str().unwrap(),
    ))
}

#[test]
fn tls_and_credentials_are_off_by_default() {
    for r in every_values_file() {
        for deployment in r.of_kind("Deployment") {
            let spec = pod_spec(deployment);
            // Only the edge's optional plug-in CA (`cacerts`) is mounted.
            let volumes: Vec<&str> = spec["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v["name"].as_str().unwrap())
                .collect();
            assert!(
                volumes.is_empty() || volumes == ["cacerts"],
                "{}: {volumes:?}",
                r.values_file
            );
            let container = &containers(deployment)[0];
            let args = strings(&container["args"]);
            assert!(
                !args
                    .iter()
                    .any(|a| a.contains("-tls-") || a.contains("-user")),
                "{}: {args:?}",
                r.values_file
            );
            assert!(secret_env(container, "SHOAL_NATS_PASSWORD").is_none());
        }
    }
}

#[test]
fn tls_and_credentials_values_reach_every_tier() {
    let mut set = SECURE.to_vec();
    set.extend(["redis.auth.passwordKey=password"]);
    let r = render("values.yaml", &set);
    for deployment in r.of_kind("Deployment") {
        let container = &containers(deployment)[0];
        let binary = binary_of(container);
        let args = strings(&container["args"]);
        let (nats, redis) = match binary {
            "ingest" => {
                let a: shoal_ingest::cli::Args = parse(binary, &args);
                (a.nats, None)
            }
            "builder" => {
                let a: shoal_builder::cli::Args = parse(binary, &args);
                (a.nats, Some(a.redis))
            }
            "edge" => {
                let a: shoal_edge::cli::Args = parse(binary, &args);
                (a.nats, Some(a.redis))
            }
            other => panic!("unexpected binary {other}"),
        };
        assert_eq!(nats.nats_url, "tls://nats:4222");
        assert_eq!(nats.nats_user.as_deref(), Some("shoal"));
        let ca = nats.nats_tls_ca.unwrap();
        assert_eq!(
            secret_of(deployment, container, &ca),
            ("nats-client-tls", "ca.crt".into())
        );
        let cert = nats.nats_tls_cert.unwrap();
        assert_eq!(
            secret_of(deployment, container, &cert),
            ("nats-client-tls", "tls.crt".into())
        );
        let key = nats.nats_tls_key.unwrap();
        assert_eq!(
            secret_of(deployment, container, &key),
            ("nats-client-tls", "tls.key".into())
        );
        // Secrets come from the environment, never from args.
        assert!(nats.nats_password.is_none() && nats.nats_password_file.is_none());
        assert_eq!(
            secret_env(container, "SHOAL_NATS_PASSWORD"),
            Some(("nats-auth", "password"))
        );
        match redis {
            Some(redis) => {
                assert_eq!(redis.redis_url, "rediss://redis:6380");
                assert_eq!(redis.redis_username.as_deref(), Some("shoal"));
                let ca = redis.redis_tls_ca.unwrap();
                assert_eq!(
                    secret_of(deployment, container, &ca),
                    ("redis-ca", "ca.crt".into())
                );
                assert!(redis.redis_tls_cert.is_none());
                assert!(redis.redis_password.is_none());
                assert_eq!(
                    secret_env(container, "SHOAL_REDIS_PASSWORD"),
                    Some(("redis-auth", "password"))
                );
            }
            None => assert!(secret_env(container, "SHOAL_REDIS_PASSWORD").is_none()),
        }
    }
}

#[test]
fn a_token_or_creds_file_from_a_secret() {
    let token = render(
        "values.yaml",
        &["nats.auth.secretName=nats-auth", "nats.auth.tokenKey=token"],
    );
    let creds = render(
        "values.yaml",
        &[
            "nats.auth.secretName=nats-auth",
            "nats.auth.credsKey=shoal.creds",
        ],
    );
    for binary in ["ingest", "builder", "edge"] {
        let container = &containers(token.deployment_of(binary))[0];
        assert_eq!(
            secret_env(container, "SHOAL_NATS_TOKEN"),
            Some(("nats-auth", "token"))
        );
        let deployment = creds.deployment_of(binary);
        let container = &containers(deployment)[0];
        let args = strings(&container["args"]);
        let at = args.iter().position(|a| *a == "--nats-creds").unwrap();
        let path = PathBuf::from(args[at + 1]);
        assert_eq!(
            secret_of(deployment, container, &path),
            ("nats-auth", "shoal.creds".into())
        );
    }
}

#[test]
fn tls_without_its_secret_is_refused() {
    let err = crate::chart::try_render("values.yaml", &["redis.tls.enabled=true"])
        .err()
        .expect("TLS without a Secret is refused");
    assert!(err.contains("redis.tls.secretName is required"), "{err}");
    let err = crate::chart::try_render("values.yaml", &["nats.auth.passwordKey=password"])
        .err()
        .expect("a password key without its Secret is refused");
    assert!(err.contains("nats.auth.secretName is required"), "{err}");
}
