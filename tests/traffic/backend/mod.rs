//! The applications behind Envoy: an HTTP/1.1 server that shows what it received and
//! misbehaves on request ([`http`]), and a TCP echo server ([`tcp`]).

pub mod http;
pub mod tcp;

pub use http::HttpBackend;
pub use tcp::TcpEcho;
