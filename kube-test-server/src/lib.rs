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
//! Everything is bounded: the history, and each watch's queue (a watch that does not
//! read is ended, and its client resumes from its last resourceVersion).

mod http;
mod hub;
pub mod resource;
pub mod selector;
mod server;
pub mod store;
pub mod watch;
mod wire;

pub use resource::{GroupResource, ResourceType};
pub use server::{
    DEFAULT_BOOKMARK_INTERVAL, DEFAULT_WATCH_QUEUE_CAPACITY, Settings, TestApiServer,
};
pub use store::StoreError;
