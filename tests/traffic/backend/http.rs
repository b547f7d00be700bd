//! An HTTP/1.1 keep-alive server, as a real application behind Envoy, that lets a test
//! see both sides of the proxy:
//!
//! - it answers with its name (body and `x-backend`), so a client can tell which
//!   backend (subset) served it;
//! - it echoes each request header back as `x-echo-<name>`, and records every request,
//!   so a test sees what Envoy forwarded;
//! - it can be told to fail (the next N requests, or all) or to answer slowly, for
//!   retries, outlier detection, circuit breaking and timeouts.
//!
//! Hand-rolled rather than hyper: the root package has no HTTP server dependency, and
//! the tests send small requests only (bodies with `content-length`).

use super::Backend;
use super::tls::handshake_headers;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

/// A request as the backend received it; header names lower-cased, in arrival order.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl Received {
    /// Every value of header `name`.
    pub fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_values(name).into_iter().next()
    }
}

/// How the backend answers: healthy unless told otherwise.
#[derive(Debug, Default)]
struct Behaviour {
    /// Answer `fail_status` to this many more requests.
    fail_next: u32,
    fail_status: u16,
    /// Answer this status to every request.
    always: Option<u16>,
    /// Wait this long before each answer.
    delay: Duration,
}

impl Behaviour {
    /// The status of the next answer (consuming one planned failure).
    fn next_status(&mut self) -> u16 {
        if let Some(status) = self.always {
            return status;
        }
        if self.fail_next > 0 {
            self.fail_next -= 1;
            return self.fail_status;
        }
        200
    }
}

#[derive(Debug, Default)]
struct State {
    behaviour: Mutex<Behaviour>,
    received: Mutex<Vec<Received>>,
    /// TLS handshakes that failed (a TLS backend only).
    failed_handshakes: AtomicUsize,
}

pub struct HttpBackend {
    name: String,
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for HttpBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpBackend {
    /// A backend named `name` (also the name of the Pod it stands for) on a free
    /// loopback port.
    pub async fn start(name: &str) -> HttpBackend {
        Self::serve(name, None).await
    }

    /// A backend that terminates TLS with `tls` first; each request it records carries
    /// the handshake's SNI and client certificate as headers `x-tls-sni` and
    /// `x-tls-client-cert` (`present` or `none`), which it echoes like the others.
    pub async fn start_tls(name: &str, tls: Arc<rustls::ServerConfig>) -> HttpBackend {
        Self::serve(name, Some(TlsAcceptor::from(tls))).await
    }

    async fn serve(name: &str, tls: Option<TlsAcceptor>) -> HttpBackend {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        let addr = listener.local_addr().expect("backend addr");
        let state = Arc::new(State::default());
        let task = tokio::spawn(accept_loop(listener, name.to_string(), state.clone(), tls));
        HttpBackend {
            name: name.to_string(),
            addr,
            state,
            task,
        }
    }

    /// Answer `status` to the next `n` requests, then recover.
    pub fn fail_next(&self, n: u32, status: u16) {
        let mut b = self.state.behaviour.lock().unwrap();
        b.fail_next = n;
        b.fail_status = status;
    }

    /// Answer `status` to every request from now on.
    pub fn fail_always(&self, status: u16) {
        self.state.behaviour.lock().unwrap().always = Some(status);
    }

    /// Wait `delay` before each answer from now on.
    pub fn delay(&self, delay: Duration) {
        self.state.behaviour.lock().unwrap().delay = delay;
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// How many clients failed the TLS handshake (no or an untrusted certificate).
    pub fn failed_handshakes(&self) -> usize {
        self.state.failed_handshakes.load(Ordering::Relaxed)
    }

    pub fn received_count(&self) -> usize {
        self.state.received.lock().unwrap().len()
    }

    /// Forgets the requests received so far (after a test's warm-up).
    pub fn clear_received(&self) {
        self.state.received.lock().unwrap().clear();
    }
}

async fn accept_loop(
    listener: TcpListener,
    name: String,
    state: Arc<State>,
    tls: Option<TlsAcceptor>,
) {
    while let Ok((sock, _)) = listener.accept().await {
        let (name, state) = (name.clone(), state.clone());
        let Some(acceptor) = tls.clone() else {
            tokio::spawn(serve_connection(sock, name, state, Vec::new()));
            continue;
        };
        tokio::spawn(async move {
            match acceptor.accept(sock).await {
                Ok(stream) => {
                    let handshake = handshake_headers(stream.get_ref().1);
                    serve_connection(stream, name, state, handshake).await;
                }
                Err(_) => {
                    state.failed_handshakes.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
}

/// Answers requests on one connection until the peer closes it; `extra` headers are
/// added to each request received (what the TLS handshake showed).
async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    name: String,
    state: Arc<State>,
    extra: Vec<(String, String)>,
) {
    let mut buf = Vec::with_capacity(4096);
    loop {
        let Some(mut request) = read_request(&mut sock, &mut buf).await else {
            return;
        };
        request.headers.extend(extra.iter().cloned());
        // Decide before waiting, so a planned failure goes to the request that came first.
        let (status, delay) = {
            let mut b = state.behaviour.lock().unwrap();
            (b.next_status(), b.delay)
        };
        let response = response(&name, status, &request);
        state.received.lock().unwrap().push(request);
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // Flushed: a TLS stream holds written bytes until then.
        if sock.write_all(response.as_bytes()).await.is_err() || sock.flush().await.is_err() {
            return;
        }
    }
}

/// The next request on the connection, its body read and dropped; `None` when the peer
/// closed the connection or sent something that is not HTTP/1.1.
async fn read_request<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut Vec<u8>) -> Option<Received> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        read_more(sock, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let request = Received {
        method,
        path,
        headers,
    };
    let body_len: usize = request
        .header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < body_len {
        read_more(sock, buf).await?;
    }
    buf.drain(..body_len);
    Some(request)
}

async fn read_more<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 4096];
    match sock.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

/// The answer: the backend's name, the request's headers echoed as `x-echo-<name>`, and
/// `x-powered-by` (a header applications leak and meshes are told to strip).
fn response(name: &str, status: u16, request: &Received) -> String {
    let echoed: String = request
        .headers
        .iter()
        .map(|(k, v)| format!("x-echo-{k}: {v}\r\n"))
        .collect();
    format!(
        "HTTP/1.1 {status} {}\r\nx-backend: {name}\r\nx-powered-by: traffic-backend\r\n{echoed}content-type: text/plain\r\ncontent-length: {}\r\n\r\n{name}",
        reason(status),
        name.len(),
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

impl Backend for HttpBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }
}
