//! A plain TCP server that writes back every chunk it reads, prefixed with its name, so
//! a client of a TCP route can tell which backend the bytes reached.

use super::Backend;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct TcpEcho {
    name: String,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for TcpEcho {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TcpEcho {
    pub async fn start(name: &str) -> TcpEcho {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind echo");
        let addr = listener.local_addr().expect("echo addr");
        let prefix = format!("{name}: ");
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let prefix = prefix.clone();
                tokio::spawn(async move {
                    let mut chunk = [0u8; 4096];
                    loop {
                        let n = match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        let mut reply = prefix.clone().into_bytes();
                        reply.extend_from_slice(&chunk[..n]);
                        if sock.write_all(&reply).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        TcpEcho {
            name: name.to_string(),
            addr,
            task,
        }
    }
}

impl Backend for TcpEcho {
    fn name(&self) -> &str {
        &self.name
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Connects to `ip:port` (an Envoy listener), sends `line` and returns the echo up to its
/// newline: `<backend>: <line>`. `Err` says what went wrong (refused, closed, silent).
pub async fn exchange(ip: &str, port: u16, line: &str) -> Result<String, String> {
    let exchange = async {
        let mut sock = TcpStream::connect((ip, port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        sock.write_all(line.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut got = Vec::new();
        let mut chunk = [0u8; 256];
        while !got.ends_with(b"\n") {
            match sock.read(&mut chunk).await {
                Ok(0) => return Err(format!("closed after {:?}", String::from_utf8_lossy(&got))),
                Ok(n) => got.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(format!("read: {e}")),
            }
        }
        Ok(String::from_utf8_lossy(&got).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| "no echo within 5 s".to_string())?
}
