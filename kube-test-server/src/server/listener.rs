//! The accept loop. Each connection runs in a task of a `JoinSet` owned by the loop, so
//! aborting the loop's task closes the listener and every connection at once: what a
//! restart of the server needs, and what `axum::serve` (which detaches connections)
//! cannot do.

use std::io;
use std::net::SocketAddr;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

/// Listens on `address`. SO_REUSEADDR lets a restart bind the port again while the
/// connections it closed are still in TIME_WAIT.
pub fn bind(address: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(1024)
}

/// Serves `router` on `listener` until the returned task is aborted.
pub fn serve(listener: TcpListener, router: Router) -> JoinHandle<()> {
    let port = listener
        .local_addr()
        .map(|address| address.port())
        .unwrap_or(0);
    let accept_loop = async move {
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let service = TowerToHyperService::new(router.clone());
                        let connection = async move {
                            let served = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                            if let Err(error) = served {
                                tracing::debug!(%error, "connection ended with an error");
                            }
                        };
                        connections.spawn(connection.instrument(tracing::debug_span!("connection", %peer)));
                    }
                    Err(error) => tracing::warn!(%error, "accept failed"),
                },
                Some(_) = connections.join_next() => {}
            }
        }
    };
    tokio::spawn(accept_loop.instrument(tracing::info_span!("kube_test_server", port)))
}
