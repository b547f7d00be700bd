//! NATS and Redis over real TLS with credentials: a `nats-server` with a `tls {}` block and
//! an `authorization {}` user, a `redis-server` on `--tls-port` only with an ACL user, both
//! serving certificates made at test time (`test_support::tls::TestPki`). A focused part of
//! the conformance checks runs over them, connected the way the tiers connect (their shared
//! flags); a wrong CA, a wrong password and a missing client certificate are each refused
//! with an error that says so, and never print the password.

mod conformance;

use clap::Parser;
use conformance::{bus, kv, store};
use shoal_infra::cli::{NatsArgs, RedisArgs};
use shoal_infra::nats::{NatsBus, NatsBusConfig, NatsConfigKv, NatsConfigKvConfig};
use shoal_infra::redis::RedisSnapshotStore;
use shoal_infra::testing::{NatsServer, RedisServer, ServerTls};
use shoal_test_support::tls::TestPki;
use std::sync::Arc;

const USER: &str = "shoal";
const PASSWORD: &str = "s3cret-Pa55";

fn server_tls(pki: &TestPki, verify_clients: bool) -> ServerTls {
    ServerTls {
        ca: pki.ca(),
        cert: pki.server_cert(),
        key: pki.server_key(),
        verify_clients,
    }
}

#[derive(Debug, Parser)]
struct Flags {
    #[command(flatten)]
    nats: NatsArgs,
    #[command(flatten)]
    redis: RedisArgs,
}

/// The tiers' flags, as a command line.
fn flags(args: &[String]) -> Flags {
    Flags::try_parse_from(std::iter::once("tier".to_owned()).chain(args.iter().cloned())).unwrap()
}

fn s(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}

fn path(p: std::path::PathBuf) -> String {
    p.display().to_string()
}

/// `--nats-url <tls url> --nats-tls-ca <ca> --nats-user shoal --nats-password <pw>`.
fn nats_flags(server: &NatsServer, pki: &TestPki, password: &str) -> Vec<String> {
    s(&[
        "--nats-url",
        &server.secure_url(),
        "--nats-tls-ca",
        &path(pki.ca()),
        "--nats-user",
        USER,
        "--nats-password",
        password,
    ])
}

fn redis_flags(server: &RedisServer, pki: &TestPki, password: &str) -> Vec<String> {
    s(&[
        "--redis-url",
        &server.secure_url(),
        "--redis-tls-ca",
        &path(pki.ca()),
        "--redis-username",
        USER,
        "--redis-password",
        password,
    ])
}

#[tokio::test]
async fn nats_over_tls_with_a_user_passes_the_kv_and_bus_checks() {
    let pki = TestPki::new("nats test CA");
    let server = NatsServer::start_secure(&server_tls(&pki, false), USER, PASSWORD);
    let args = flags(&nats_flags(&server, &pki, PASSWORD));
    let client = args.nats.connect().await.unwrap();
    let kv_store = NatsConfigKv::open(client.clone(), NatsConfigKvConfig::default())
        .await
        .unwrap();
    kv::revisions_and_entries(Arc::new(kv_store)).await;
    let nats_bus = NatsBus::open(client, NatsBusConfig::default())
        .await
        .unwrap();
    bus::snapshot_events_fan_out(Arc::new(nats_bus)).await;
}

#[tokio::test]
async fn nats_mutual_tls_on_a_plain_url_with_a_password_file() {
    let pki = TestPki::new("nats mtls CA");
    let server = NatsServer::start_secure(&server_tls(&pki, true), USER, PASSWORD);
    let password_file = pki.dir().join("nats-password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    // A nats:// URL: the CA flag alone makes the client require TLS.
    let mut args = s(&[
        "--nats-url",
        &server.url(),
        "--nats-tls-ca",
        &path(pki.ca()),
        "--nats-user",
        USER,
        "--nats-password-file",
        &path(password_file),
    ]);
    let no_cert = flags(&args);
    let error = no_cert.nats.connect().await.unwrap_err().to_string();
    assert!(error.contains("connect to nats://127.0.0.1:"), "{error}");
    assert!(error.contains("TLS handshake failed"), "{error}");

    args.extend(s(&[
        "--nats-tls-cert",
        &path(pki.client_cert()),
        "--nats-tls-key",
        &path(pki.client_key()),
    ]));
    let client = flags(&args).nats.connect().await.unwrap();
    let kv_store = NatsConfigKv::open(client, NatsConfigKvConfig::default())
        .await
        .unwrap();
    kv::revisions_and_entries(Arc::new(kv_store)).await;
}

#[tokio::test]
async fn nats_wrong_ca_wrong_password_and_unreadable_ca_are_refused_clearly() {
    let pki = TestPki::new("nats test CA");
    let other = TestPki::new("some other CA");
    let server = NatsServer::start_secure(&server_tls(&pki, false), USER, PASSWORD);

    let wrong_ca = flags(&nats_flags(&server, &other, PASSWORD));
    let error = wrong_ca.nats.connect().await.unwrap_err().to_string();
    assert!(error.contains("TLS handshake failed"), "{error}");
    assert!(!error.contains('\n'), "one line: {error}");

    let wrong_password = flags(&nats_flags(&server, &pki, "not-the-password"));
    let error = wrong_password.nats.connect().await.unwrap_err().to_string();
    assert!(error.contains("authentication refused"), "{error}");
    assert!(!error.contains("not-the-password"), "{error}");

    let mut args = nats_flags(&server, &pki, PASSWORD);
    args[3] = "/nonexistent/ca.pem".into();
    let error = flags(&args).nats.connect().await.unwrap_err().to_string();
    assert!(
        error.contains("NATS TLS CA file /nonexistent/ca.pem: "),
        "{error}"
    );

    // A password in the URL is never printed, in an error or in Debug.
    let url = format!("tls://{USER}:{PASSWORD}@127.0.0.1:{}", server.port());
    let in_url = flags(&s(&[
        "--nats-url",
        &url,
        "--nats-tls-ca",
        &path(other.ca()),
    ]));
    let error = in_url.nats.connect().await.unwrap_err().to_string();
    let debug = format!("{in_url:?}");
    for printed in [&error, &debug] {
        assert!(!printed.contains(PASSWORD), "{printed}");
        assert!(printed.contains(&format!("tls://{USER}:***@")), "{printed}");
    }
}

#[tokio::test]
async fn redis_over_tls_with_an_acl_user_passes_the_store_checks() {
    let pki = TestPki::new("redis test CA");
    let server = RedisServer::start_secure(&server_tls(&pki, false), USER, PASSWORD);
    let args = flags(&redis_flags(&server, &pki, PASSWORD));
    let config = args.redis.store_config().unwrap().with_prefix("test");
    let redis = Arc::new(RedisSnapshotStore::connect(config).await.unwrap());
    store::chunks_missing_put_get(redis.clone()).await;
    store::latest_only_moves_forward(redis).await;
}

#[tokio::test]
async fn redis_mutual_tls_on_a_plain_url_with_the_password_in_a_file() {
    let pki = TestPki::new("redis mtls CA");
    let server = RedisServer::start_secure(&server_tls(&pki, true), USER, PASSWORD);
    let password_file = pki.dir().join("redis-password");
    std::fs::write(&password_file, PASSWORD).unwrap();
    // A redis:// URL: the CA flag alone makes the store speak TLS.
    let mut args = s(&[
        "--redis-url",
        &server.url(),
        "--redis-tls-ca",
        &path(pki.ca()),
        "--redis-username",
        USER,
        "--redis-password-file",
        &path(password_file),
    ]);
    let mut no_cert = flags(&args).redis.store_config().unwrap();
    no_cert.connect_retries = 0;
    let error = RedisSnapshotStore::connect(no_cert)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(error.contains("connect to redis://127.0.0.1:"), "{error}");
    assert!(error.contains("TLS handshake failed"), "{error}");

    args.extend(s(&[
        "--redis-tls-cert",
        &path(pki.client_cert()),
        "--redis-tls-key",
        &path(pki.client_key()),
    ]));
    let config = flags(&args)
        .redis
        .store_config()
        .unwrap()
        .with_prefix("test");
    let redis = Arc::new(RedisSnapshotStore::connect(config).await.unwrap());
    store::chunks_missing_put_get(redis).await;
}

#[tokio::test]
async fn redis_wrong_ca_wrong_password_and_unreadable_ca_are_refused_clearly() {
    let pki = TestPki::new("redis test CA");
    let other = TestPki::new("some other CA");
    let server = RedisServer::start_secure(&server_tls(&pki, false), USER, PASSWORD);
    let connect_error = |args: Vec<String>| async move {
        let mut config = flags(&args).redis.store_config().unwrap();
        config.connect_retries = 0;
        RedisSnapshotStore::connect(config)
            .await
            .err()
            .unwrap()
            .to_string()
    };

    let error = connect_error(redis_flags(&server, &other, PASSWORD)).await;
    assert!(error.contains("TLS handshake failed"), "{error}");
    assert!(!error.contains('\n'), "one line: {error}");

    let error = connect_error(redis_flags(&server, &pki, "not-the-password")).await;
    assert!(error.contains("authentication refused"), "{error}");
    assert!(!error.contains("not-the-password"), "{error}");

    let mut args = redis_flags(&server, &pki, PASSWORD);
    args[3] = "/nonexistent/ca.pem".into();
    let error = connect_error(args).await;
    assert!(
        error.contains("Redis TLS CA file /nonexistent/ca.pem: "),
        "{error}"
    );

    // A password in the URL is never printed, in an error or in Debug.
    let url = format!("rediss://{USER}:{PASSWORD}@127.0.0.1:{}", server.port());
    let args = s(&["--redis-url", &url, "--redis-tls-ca", &path(other.ca())]);
    let debug = format!("{:?}", flags(&args));
    let error = connect_error(args).await;
    for printed in [&error, &debug] {
        assert!(!printed.contains(PASSWORD), "{printed}");
        assert!(
            printed.contains(&format!("rediss://{USER}:***@")),
            "{printed}"
        );
    }
}

#[tokio::test]
async fn nats_token_from_a_file_and_a_wrong_token_refused() {
    let pki = TestPki::new("nats token CA");
    let server = NatsServer::start_secure_token(&server_tls(&pki, false), "t0ken-e2e");
    let token_file = pki.dir().join("token");
    let connect = |token: &str| {
        std::fs::write(&token_file, format!("{token}\n")).unwrap();
        let args = flags(&s(&[
            "--nats-url",
            &server.secure_url(),
            "--nats-tls-ca",
            &path(pki.ca()),
            "--nats-token-file",
            &path(token_file.clone()),
        ]));
        async move { args.nats.connect().await }
    };
    let error = connect("wrong-t0ken").await.unwrap_err().to_string();
    assert!(error.contains("authentication refused"), "{error}");
    assert!(error.contains("token given"), "{error}");
    assert!(!error.contains("wrong-t0ken"), "{error}");
    let client = connect("t0ken-e2e").await.unwrap();
    let kv_store = NatsConfigKv::open(client, NatsConfigKvConfig::default())
        .await
        .unwrap();
    kv::revisions_and_entries(Arc::new(kv_store)).await;
}
