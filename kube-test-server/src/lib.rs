//! A test stand-in for the Kubernetes API server.
//!
//! **This is not Kubernetes.** It has no etcd, no authentication or authorization, no
//! admission, no validation beyond names and namespaces, no discovery, no defaulting, no
//! garbage collection and no finalizers. It serves the list/watch HTTP API of a fixed set
//! of resource types faithfully enough for kube-runtime's `watcher`, so that Shoal's
//! Kubernetes registry can be tested where no real kube-apiserver can run.
//!
//! ```text
//!   test ──Rust API──▶ TestApiServer ──▶ Hub: Mutex<Store> + open watches
//!                                           │        │
//!   kube client ──HTTP/1.1──▶ http router ──┘        └─ Store: objects, revision,
//!                (list, watch, get, writes)             bounded history (pure)
//! ```
//!
//! What it does faithfully: one global resourceVersion (an etcd revision) stamped on every
//! write; LIST with label and field selectors and `limit`/`continue` pages served from
//! one snapshot; WATCH from a resourceVersion, replaying the retained history, then live,
//! with bookmarks, `timeoutSeconds`, and the apiserver's `410 Expired` ERROR event once
//! the history no longer reaches back (after [`TestApiServer::compact`]); CRD-style
//! multi-version resources (the same objects under every served version, `apiVersion`
//! rewritten to the one asked for). Faults for tests: [`TestApiServer::drop_watches`],
//! [`TestApiServer::compact`], [`TestApiServer::restart`].
//!
//! The wire as kube-apiserver writes it, including its awkward habits that clients must
//! live with: the items of a list of a built-in kind (core, `discovery.k8s.io`) carry
//! no `apiVersion` or `kind` (kubernetes/kubernetes#3030, #63676, #98925: only the list
//! says them; kubectl adds them back for display), while a custom resource's items and
//! every watch event's and GET's object carry both; an empty list is `"items": []`, or
//! `"items": null` with [`Settings::null_empty_lists`] (what older servers, metadata-only
//! lists and some distributions answer: kube-rs#1199, #1492); errors are `Status`
//! bodies, and an expired watch is an ERROR event with HTTP 200.
//!
//! TokenReview (`POST /apis/authentication.k8s.io/v1/tokenreviews`) for the tokens of one
//! issuer the test names ([`Settings::service_account_issuer`]): see [`token_review`] for
//! what it checks as the real server does, and what it does not.
//!
//! What it does not reproduce: protobuf or table encodings (JSON only); server-side
//! apply, PATCH and dry runs; `resourceVersionMatch` semantics (a list is always the
//! newest state); metadata-only (`PartialObjectMetadataList`) lists; per-resource
//! watch caches (one history for all kinds); priority and fairness, rate limits,
//! `429` with `Retry-After`; conversion webhooks (versions differ only in
//! `apiVersion`); `metadata.generation`, `selfLink` and `uid` preconditions.
//!
//! Everything is bounded: the history, and each watch's queue (a watch that does not
//! read is ended, and its client resumes from its last resourceVersion).

mod http;
mod hub;
pub mod resource;
pub mod selector;
mod server;
pub mod store;
pub mod token_review;
pub mod watch;
mod wire;

pub use resource::{GroupResource, ResourceType};
pub use server::{
    DEFAULT_BOOKMARK_INTERVAL, DEFAULT_WATCH_QUEUE_CAPACITY, Settings, TestApiServer,
};
pub use store::StoreError;
pub use token_review::ServiceAccountIssuer;
