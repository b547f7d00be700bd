//! What came back from one request through Envoy, kept whole so that a failed
//! assertion can show it.

use std::fmt;
use std::time::{Duration, Instant};

#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    /// Names lower-cased, in the order received.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// From sending the request to the end of the body.
    pub elapsed: Duration,
}

impl Reply {
    /// Sends `request` and reads the whole answer; `Err` says why there is none
    /// (connection refused, reset, client timeout).
    pub async fn fetch(request: reqwest::RequestBuilder) -> Result<Reply, String> {
        let started = Instant::now();
        let resp = request
            .send()
            .await
            .map_err(|e| format!("no answer: {e:#}"))?;
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = resp
            .text()
            .await
            .map_err(|e| format!("{status} with an unreadable body: {e:#}"))?;
        Ok(Reply {
            status,
            headers,
            body,
            elapsed: started.elapsed(),
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The backend that answered (its `x-backend` header), if one did.
    pub fn backend(&self) -> Option<&str> {
        self.header("x-backend")
    }

    /// A 200 from a backend: its name, else the whole reply as the error.
    pub fn served_by(&self) -> Result<&str, String> {
        match self.backend() {
            Some(name) if self.status == 200 => Ok(name),
            _ => Err(format!("expected a 200 from a backend, got {self}")),
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let body: String = self.body.chars().take(200).collect();
        write!(
            f,
            "{} after {} ms, body {body:?}, headers {:?}",
            self.status,
            self.elapsed.as_millis(),
            self.headers
        )
    }
}
