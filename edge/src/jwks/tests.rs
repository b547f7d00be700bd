use super::schedule::{Outcome, Schedule, Wanted};
use super::*;
use shoal_proto::model::{NamedConfig, NamespaceConfig};
use shoal_proto::snapshot::Chunk;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const DOC_A: &str = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"aaaa","kid":"a"}]}"#;
const DOC_B: &str = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"bbbb","kid":"b"}]}"#;

fn config() -> JwksFetchConfig {
    JwksFetchConfig {
        refresh_interval: Duration::from_millis(150),
        retry_interval: Duration::from_millis(50),
        timeout: Duration::from_secs(2),
        ..Default::default()
    }
}

#[test]
fn new_uris_are_due_at_once_then_after_the_refresh_or_the_retry() {
    let mut s = Schedule::new(JwksFetchConfig::default());
    let t0 = Instant::now();
    let mut w = Wanted::new();
    w.add("https://a/jwks", "shop", "ra", None);
    w.add("https://a/jwks", "web", "ra", Some(Duration::from_secs(1)));
    assert!(s.want(w, t0).is_empty());
    assert_eq!(
        s.due(t0),
        [("https://a/jwks".to_string(), Duration::from_secs(1))],
        "the shortest timeout of its rules"
    );
    assert!(s.due(t0).is_empty(), "in flight");
    assert_eq!(s.policies("https://a/jwks").len(), 2);
    s.done("https://a/jwks", Outcome::Fetched, t0);
    assert_eq!(s.next_due(), Some(t0 + Duration::from_secs(20 * 60)));
    let t1 = t0 + Duration::from_secs(20 * 60);
    assert_eq!(s.due(t1).len(), 1);
    s.done("https://a/jwks", Outcome::Failed, t1);
    assert_eq!(s.next_due(), Some(t1 + Duration::from_secs(60)));
    // A new snapshot keeps a known URI's time and drops the others.
    let mut w = Wanted::new();
    w.add("https://a/jwks", "shop", "ra", None);
    w.add("https://b/jwks", "shop", "rb", None);
    s.want(w, t1);
    assert_eq!(
        s.due(t1),
        [("https://b/jwks".to_string(), Duration::from_secs(5))]
    );
    s.want(Wanted::new(), t1);
    assert!(s.uris().is_empty());
    assert_eq!(s.next_due(), None);
}

#[test]
fn uris_over_the_limit_are_not_fetched_and_name_their_policies() {
    let mut s = Schedule::new(JwksFetchConfig {
        max_uris: 1,
        ..Default::default()
    });
    let mut w = Wanted::new();
    w.add("https://a/jwks", "shop", "ra", None);
    w.add("https://b/jwks", "shop", "rb", None);
    let over = s.want(w, Instant::now());
    assert_eq!(
        over,
        [("https://b/jwks".to_string(), vec!["shop/rb".to_string()])]
    );
    assert_eq!(s.uris().len(), 1);
}

/// A JWKS server: answers every GET with the current (status, body).
struct Issuer {
    uri: String,
    answer: Arc<Mutex<(u16, String)>>,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Issuer {
    async fn start(body: &str) -> Issuer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}/jwks", listener.local_addr().unwrap());
        let answer = Arc::new(Mutex::new((200, body.to_string())));
        let hits = Arc::new(AtomicUsize::new(0));
        let (a, h) = (answer.clone(), hits.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let (status, body) = a.lock().unwrap().clone();
                h.fetch_add(1, Ordering::SeqCst);
                let mut buf = vec![0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let response = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(response.as_bytes()).await;
            }
        });
        Issuer {
            uri,
            answer,
            hits,
            task,
        }
    }

    fn answer(&self, status: u16, body: &str) {
        *self.answer.lock().unwrap() = (status, body.to_string());
    }
}

fn naming(uri: &str, version: u64) -> Arc<PushContext> {
    let ns = NamespaceConfig {
        namespace: "shop".into(),
        request_authentications: vec![NamedConfig {
            name: "jwt".into(),
            namespace: "shop".into(),
            created: 0,
            spec: shoal_proto::config::security::RequestAuthentication {
                jwt_rules: vec![shoal_proto::config::security::JwtRule {
                    issuer: "https://issuer".into(),
                    jwks_uri: uri.into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
        }],
        ..Default::default()
    };
    Arc::new(PushContext::from_chunks(version, [Chunk::Namespace(ns)]))
}

async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn keys_are_fetched_pushed_on_change_kept_on_failure_and_forgotten() {
    let issuer = Issuer::start(DOC_A).await;
    let store = Arc::new(JwksStore::new());
    let (snap_tx, snap_rx) = watch::channel(naming(&issuer.uri, 1));
    let (push_tx, mut pushes) = tokio::sync::mpsc::channel(16);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let refresher = JwksRefresher::new(config(), store.clone(), snap_rx);
    let task = tokio::spawn(refresher.run(
        move |changes| {
            let _ = push_tx.try_send(changes);
        },
        async {
            let _ = stop_rx.await;
        },
    ));
    // First fetch: stored and pushed as a change of the RequestAuthentication.
    let first = tokio::time::timeout(Duration::from_secs(10), pushes.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(first.full);
    assert_eq!(
        first.keys.iter().collect::<Vec<_>>(),
        [&ChangeKey::Config(shoal_proto::config::ConfigKey::new(
            shoal_proto::config::Kind::RequestAuthentication,
            "shop",
            "jwt"
        ))]
    );
    assert_eq!(store.get(&issuer.uri).as_deref(), Some(DOC_A));
    // Refreshed, unchanged: no push.
    let hits = issuer.hits.load(Ordering::SeqCst);
    wait_for("a refresh", || issuer.hits.load(Ordering::SeqCst) > hits).await;
    // Failing (an error status, then a document that is no JWKS): the last good keys stay.
    issuer.answer(500, "down");
    let hits = issuer.hits.load(Ordering::SeqCst);
    wait_for("failed refreshes", || {
        issuer.hits.load(Ordering::SeqCst) > hits + 1
    })
    .await;
    issuer.answer(200, r#"{"keys": "none"}"#);
    let hits = issuer.hits.load(Ordering::SeqCst);
    wait_for("failed refreshes", || {
        issuer.hits.load(Ordering::SeqCst) > hits + 1
    })
    .await;
    assert_eq!(store.get(&issuer.uri).as_deref(), Some(DOC_A));
    assert!(pushes.try_recv().is_err(), "nothing changed");
    // Rotated: stored and pushed.
    issuer.answer(200, DOC_B);
    tokio::time::timeout(Duration::from_secs(10), pushes.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.get(&issuer.uri).as_deref(), Some(DOC_B));
    // No longer named: forgotten.
    snap_tx.send_replace(Arc::new(PushContext::from_chunks(2, [])));
    wait_for("the URI forgotten", || store.is_empty()).await;
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    issuer.task.abort();
}

#[tokio::test]
async fn a_document_over_the_size_bound_or_never_served_leaves_no_keys() {
    let big = format!(
        r#"{{"keys":[{{"kty":"RSA","e":"AQAB","n":"{}"}}]}}"#,
        "a".repeat(4096)
    );
    let issuer = Issuer::start(&big).await;
    let http = reqwest::Client::new();
    let small = JwksFetchConfig {
        max_bytes: 1024,
        ..config()
    };
    let err = fetch(&http, &issuer.uri, Duration::from_secs(2), &small)
        .await
        .unwrap_err();
    assert!(err.contains("over 1024 bytes"), "{err}");
    assert!(
        fetch(&http, &issuer.uri, Duration::from_secs(2), &config())
            .await
            .is_ok()
    );
    issuer.answer(200, r#"{"keys":[]}"#);
    let err = fetch(&http, &issuer.uri, Duration::from_secs(2), &config())
        .await
        .unwrap_err();
    assert!(err.contains("no key"), "{err}");
    issuer.task.abort();
    // Nothing listens: an error, in time.
    let err = fetch(
        &http,
        "http://127.0.0.1:1/jwks",
        Duration::from_secs(2),
        &config(),
    )
    .await
    .unwrap_err();
    assert!(err.starts_with("GET http://127.0.0.1:1/jwks"), "{err}");
}
