//! `POST /apis/authentication.k8s.io/v1/tokenreviews`, answered as kube-apiserver's
//! service-account token authenticator answers it, for tokens of one issuer whose keys
//! the test gives ([`ServiceAccountIssuer`], e.g. from `shoal_test_support::jwt::TestIssuer`).
//!
//! What it does as the real one does: `201 Created` with the review echoed (spec
//! included, as the real server does) and a `status`; the signature checked against the
//! issuer's keys and `iss` against its name; an expired or not-yet-valid token
//! `authenticated: false`; audience semantics: `spec.audiences` empty means the server's
//! own API audiences, a token whose `aud` does not intersect the wanted ones is refused
//! with the real server's `token audiences [...] is invalid for the target audiences
//! [...]`, and `status.audiences` is the intersection; the user is
//! `system:serviceaccount:<ns>:<sa>` with the service account's uid, the groups
//! `system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`, and
//! the pod name and uid as `extra`.
//!
//! What the real one does that this does not: bound-object checks (the pod or secret the
//! token is bound to must still exist with the same uid, and the service account too);
//! legacy secret-based tokens and their revocation; other authenticators (OIDC,
//! webhook, client certificates, bootstrap tokens) in its union; authorization of the
//! caller (`create tokenreviews`, granted by `system:auth-delegator`); its own cache of
//! results; the exact error texts of every other failure (this one says
//! `invalid bearer token` with its own reason).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::{Value, json};
use shoal_proto::security::authn::jwt::{
    self, Claims, DEFAULT_MAX_TOKEN_BYTES, JwkSet, JwtError, parse_subject,
};

use crate::http::ApiError;

pub const PATH: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// The service-account token issuer the server trusts.
#[derive(Clone, Debug)]
pub struct ServiceAccountIssuer {
    /// Its `iss` (`--service-account-issuer`).
    pub issuer: String,
    /// Its public keys (`--service-account-key-file`).
    pub keys: JwkSet,
    /// The audiences used when a review names none (`--api-audiences`; the issuer by default).
    pub api_audiences: Vec<String>,
}

impl ServiceAccountIssuer {
    pub fn new(issuer: impl Into<String>, keys: JwkSet) -> Self {
        let issuer = issuer.into();
        ServiceAccountIssuer {
            api_audiences: vec![issuer.clone()],
            issuer,
            keys,
        }
    }
}

#[derive(Deserialize)]
struct Review {
    spec: Spec,
}

#[derive(Deserialize, serde::Serialize)]
struct Spec {
    #[serde(default)]
    token: String,
    #[serde(default)]
    audiences: Vec<String>,
}

pub fn router(issuer: Option<Arc<ServiceAccountIssuer>>) -> Router {
    Router::new().route(PATH, post(create)).with_state(issuer)
}

async fn create(State(issuer): State<Option<Arc<ServiceAccountIssuer>>>, body: Bytes) -> Response {
    let review: Review = match serde_json::from_slice(&body) {
        Ok(review) => review,
        Err(e) => {
            return ApiError::bad_request(format!("the TokenReview does not decode: {e}"))
                .into_response();
        }
    };
    let status = match issuer {
        Some(issuer) => review_status(&issuer, &review.spec.token, &review.spec.audiences, now()),
        None => unauthenticated("no service-account issuer is configured"),
    };
    let body = json!({
        "kind": "TokenReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": review.spec,
        "status": status,
    });
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn unauthenticated(reason: &str) -> Value {
    json!({"user": {}, "error": format!("[invalid bearer token, {reason}]")})
}

/// The `status` of a review of `token` for `audiences` at `now`.
pub fn review_status(
    issuer: &ServiceAccountIssuer,
    token: &str,
    audiences: &[String],
    now: i64,
) -> Value {
    let claims = match jwt::decode_verified(token, &issuer.keys, DEFAULT_MAX_TOKEN_BYTES) {
        Ok(claims) => claims,
        Err(e) => return unauthenticated(&e.to_string()),
    };
    if claims.iss.as_deref() != Some(issuer.issuer.as_str()) {
        return unauthenticated("token issuer is not the service-account issuer");
    }
    match jwt::check_times(&claims, now, Duration::ZERO) {
        Err(JwtError::Expired { .. }) => {
            return unauthenticated("service account token has expired");
        }
        Err(e) => return unauthenticated(&e.to_string()),
        Ok(()) => {}
    }
    let wanted = if audiences.is_empty() {
        &issuer.api_audiences
    } else {
        audiences
    };
    let both: Vec<&String> = wanted.iter().filter(|a| claims.aud.0.contains(a)).collect();
    if both.is_empty() {
        return unauthenticated(&format!(
            "token audiences {} is invalid for the target audiences {}",
            go_quoted(&claims.aud.0),
            go_quoted(wanted)
        ));
    }
    match user(&claims) {
        Some(user) => json!({"authenticated": true, "user": user, "audiences": both}),
        None => unauthenticated("token is not a service-account token"),
    }
}

fn user(claims: &Claims) -> Option<Value> {
    let (ns, sa) = parse_subject(claims.sub.as_deref()?)?;
    let k8s = claims.kubernetes.clone().unwrap_or_default();
    let uid = k8s.serviceaccount.and_then(|s| s.uid).unwrap_or_default();
    let mut extra = serde_json::Map::new();
    if let Some(pod) = k8s.pod {
        if let Some(name) = pod.name {
            extra.insert(
                "authentication.kubernetes.io/pod-name".into(),
                json!([name]),
            );
        }
        if let Some(uid) = pod.uid {
            extra.insert("authentication.kubernetes.io/pod-uid".into(), json!([uid]));
        }
    }
    Some(json!({
        "username": format!("system:serviceaccount:{ns}:{sa}"),
        "uid": uid,
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
        "extra": extra,
    }))
}

/// A string list as Go's `%q` writes it: `["a" "b"]`.
fn go_quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}
