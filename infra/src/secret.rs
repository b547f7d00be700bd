//! Secrets a tier holds (a NATS password or token, a Redis password) and the URLs that
//! may carry one: printed redacted everywhere — `Debug`, logs, errors, `/debug`.

use std::fmt;

/// A password or token. `Debug` and `Display` print `***`; only [`Secret::expose`] gives
/// the value, at the one place it is handed to a client library.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A clap value parser, so a flag or environment variable reads straight into one.
    pub fn parse(value: &str) -> Result<Self, std::convert::Infallible> {
        Ok(Self::new(value))
    }

    /// The contents of `path`, without the trailing newline an editor or `kubectl create
    /// secret --from-file` leaves.
    pub fn read(path: &std::path::Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        Ok(Self::new(text.trim_end_matches(['\r', '\n'])))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// `url` with the password of its userinfo replaced by `***`: `redis://user:***@host`.
/// A userinfo without `:` is a NATS token (`nats://<token>@host`), redacted whole; for
/// Redis it is a user name alone and kept. Anything not shaped like a URL is returned as
/// is (it holds no userinfo to hide).
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The authority ends at the first '/', '?' or '#'; its userinfo at the last '@'.
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let userinfo = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None if scheme.starts_with("redis") => userinfo.to_owned(),
        None => "***".to_owned(),
    };
    format!("{scheme}://{userinfo}@{host}{path}")
}

/// Each URL of a comma-separated list (NATS takes several servers) redacted.
pub fn redact_urls(urls: &str) -> String {
    urls.split(',')
        .map(redact_url)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_tokens_are_redacted() {
        assert_eq!(
            redact_url("redis://user:s3cret@host:6379/0"),
            "redis://user:***@host:6379/0"
        );
        assert_eq!(redact_url("rediss://:s3cret@host"), "rediss://:***@host");
        assert_eq!(redact_url("redis://user@host"), "redis://user@host");
        assert_eq!(redact_url("nats://tok3n@host:4222"), "nats://***@host:4222");
        assert_eq!(redact_url("tls://u:p@a:1"), "tls://u:***@a:1");
        // An '@' in the password: the userinfo ends at the last '@'.
        assert_eq!(redact_url("redis://u:p@ss@h"), "redis://u:***@h");
        assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
        assert_eq!(redact_url("host:4222"), "host:4222");
        assert_eq!(
            redact_urls("nats://a:b@h1,nats://h2"),
            "nats://a:***@h1,nats://h2"
        );
    }

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("s3cret");
        assert_eq!(format!("{secret:?} {secret}"), "*** ***");
        assert_eq!(secret.expose(), "s3cret");
    }
}
