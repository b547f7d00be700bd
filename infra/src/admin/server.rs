//! The axum router and its serving lifecycle.

use super::access::DebugAccess;
use super::{AdminError, Readiness, Result};
use axum::Router;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// A `/debug/<name>` page: returns the JSON to show.
pub type DebugFn = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;
/// A `/debug/<name>` page that reads the query string (e.g. `?proxy=<id>`).
pub type DebugQueryFn = Arc<dyn Fn(&BTreeMap<String, String>) -> serde_json::Value + Send + Sync>;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Builder of the admin server; cheap to clone into the router state.
#[derive(Clone)]
pub struct AdminServer {
    registry: Arc<Registry>,
    readiness: Readiness,
    debug: BTreeMap<String, DebugQueryFn>,
    access: DebugAccess,
}

/// An admin server bound to its address, not yet serving.
pub struct BoundAdmin {
    listener: TcpListener,
    router: Router,
    addr: SocketAddr,
}

impl AdminServer {
    /// `registry` should hold every metric before this is called (registration needs `&mut`);
    /// `shoal_ready` is added to it here, from `readiness`.
    pub fn new(mut registry: Registry, readiness: Readiness) -> Self {
        readiness.register(&mut registry);
        Self {
            registry: Arc::new(registry),
            readiness,
            debug: BTreeMap::new(),
            access: DebugAccess::default(),
        }
    }

    /// Who may read `/debug/*` (default: callers on this host only).
    pub fn debug_access(mut self, access: DebugAccess) -> Self {
        self.access = access;
        self
    }

    /// Serves `f()` as JSON at `/debug/<name>`.
    pub fn debug(self, name: &str, f: DebugFn) -> Self {
        self.debug_query(name, Arc::new(move |_: &BTreeMap<String, String>| f()))
    }

    /// Serves `f(query)` as JSON at `/debug/<name>?k=v`.
    pub fn debug_query(mut self, name: &str, f: DebugQueryFn) -> Self {
        self.debug.insert(name.to_owned(), f);
        self
    }

    /// The router, for callers that embed it in their own server.
    pub fn router(self) -> Router {
        Router::new()
            .route("/metrics", get(metrics))
            .route("/healthz/ready", get(ready))
            .route("/debug", get(debug_index))
            .route("/debug/{name}", get(debug_page))
            .with_state(Arc::new(self))
    }

    /// Binds `addr` (port 0 picks a free port; see [`BoundAdmin::local_addr`]).
    pub async fn bind(self, addr: SocketAddr) -> Result<BoundAdmin> {
        let bind_err = |source| AdminError::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        Ok(BoundAdmin {
            listener,
            router: self.router(),
            addr,
        })
    }

    /// Binds and serves until `shutdown` resolves.
    pub async fn serve(
        self,
        addr: SocketAddr,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        self.bind(addr).await?.serve(shutdown).await
    }
}

impl BoundAdmin {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests finish.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        tracing::info!(addr = %self.addr, "admin server listening");
        // The peer address decides who may read the debug pages.
        let service = self
            .router
            .into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(self.listener, service)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(AdminError::Serve)
    }
}

async fn metrics(State(admin): State<Arc<AdminServer>>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &admin.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS)], body).into_response(),
        Err(error) => {
            tracing::error!(%error, "encoding metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

async fn ready(State(admin): State<Arc<AdminServer>>) -> (StatusCode, &'static str) {
    if admin.readiness.is_ready() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn debug_index(
    State(admin): State<Arc<AdminServer>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = admin.access.check(peer, &headers).await {
        return refused.into_response();
    }
    let pages: Vec<String> = admin.debug.keys().map(|k| format!("/debug/{k}")).collect();
    axum::Json(pages).into_response()
}

async fn debug_page(
    State(admin): State<Arc<AdminServer>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    if let Err(refused) = admin.access.check(peer, &headers).await {
        return refused.into_response();
    }
    match admin.debug.get(&name) {
        Some(f) => axum::Json(f(&query)).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no debug page {name:?}")).into_response(),
    }
}
