//! The request's JWT in RBAC, as Istio matches it without its `istio_authn` filter: on
//! the payload `jwt_authn` puts in dynamic metadata (`envoy.filters.http.jwt_authn` /
//! `payload`, see `security::jwt`). A request without a verified token has no payload,
//! so every matcher here is false for it.
//!
//! - `requestPrincipals` (`<iss>/<sub>`, split at the last `/` as the issuer may be a
//!   URL): `*` any; `*<suffix>` the issuer's suffix (or, without `/`, the subject's);
//!   `<prefix>*` the subject's prefix (or, without `/`, the issuer's); else both exact.
//! - `request.auth.principal` likewise; `request.auth.audiences` the `aud` claim,
//!   `request.auth.presenter` `azp`, `request.auth.claims[a][b]` the nested claim `a.b`:
//!   each value matches the claim's string, or one element of its list.

use crate::xds::security::jwt::{JWT_AUTHN, PAYLOAD};
use envoy_types::pb::envoy::config::rbac::v3::{
    MetadataSource, Principal, SourcedMetadata, principal,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListMatcher, MetadataMatcher, OrMatcher, RegexMatcher, StringMatcher, ValueMatcher,
    list_matcher, metadata_matcher, string_matcher, value_matcher,
};

/// A request whose verified token's `iss/sub` is `value` (Istio's forms).
pub fn request_principal(value: &str) -> Principal {
    use string_matcher::MatchPattern::{Exact, Prefix, Suffix};
    let (iss, sub, found) = match value.rfind('/') {
        Some(i) => (&value[..i], &value[i + 1..], true),
        None => (value, "", false),
    };
    let (m_iss, m_sub) = if value == "*" {
        (any_string(), any_string())
    } else if let Some(rest) = value.strip_prefix('*') {
        if found {
            let m_iss = if iss == "*" {
                any_string()
            } else {
                pattern(Suffix(iss.trim_start_matches('*').into()))
            };
            (m_iss, pattern(Exact(sub.into())))
        } else {
            (any_string(), pattern(Suffix(rest.into())))
        }
    } else if let Some(rest) = value.strip_suffix('*') {
        if found {
            let m_sub = if sub == "*" {
                any_string()
            } else {
                pattern(Prefix(sub.trim_end_matches('*').into()))
            };
            (pattern(Exact(iss.into())), m_sub)
        } else {
            (pattern(Prefix(rest.into())), any_string())
        }
    } else {
        (pattern(Exact(iss.into())), pattern(Exact(sub.into())))
    };
    Principal {
        identifier: Some(principal::Identifier::AndIds(principal::Set {
            ids: vec![
                claim_is(&["iss".into()], m_iss),
                claim_is(&["sub".into()], m_sub),
            ],
        })),
    }
}

/// The claim path a `request.auth.*` key (other than `principal`) matches; `None` for a
/// key that names none (validation refuses those).
pub fn claim_path(key: &str) -> Option<Vec<String>> {
    match key {
        "request.auth.audiences" => Some(vec!["aud".into()]),
        "request.auth.presenter" => Some(vec!["azp".into()]),
        _ => nested_claims(key.strip_prefix("request.auth.claims")?),
    }
}

/// `[a][b]` as `[a, b]`; a single bracketed name may hold any character but brackets.
fn nested_claims(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let inner = rest.strip_prefix('[')?;
        let end = inner.find(']')?;
        let name = &inner[..end];
        if name.is_empty() || name.contains('[') {
            return None;
        }
        out.push(name.to_string());
        rest = &inner[end + 1..];
    }
    (!out.is_empty()).then_some(out)
}

/// A request whose verified token's claim at `path` is `value`'s string, or a list
/// holding one.
pub fn claim_is(path: &[String], value: StringMatcher) -> Principal {
    let string = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::StringMatch(value)),
    };
    let list = ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(
            ListMatcher {
                match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(string.clone()))),
            },
        ))),
    };
    let segments = std::iter::once(PAYLOAD.to_string())
        .chain(path.iter().cloned())
        .map(|key| metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(key)),
        })
        .collect();
    Principal {
        // `sourced_metadata` (dynamic), as `metadata` is deprecated.
        identifier: Some(principal::Identifier::SourcedMetadata(SourcedMetadata {
            metadata_matcher: Some(MetadataMatcher {
                filter: JWT_AUTHN.into(),
                path: segments,
                value: Some(ValueMatcher {
                    match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
                        value_matchers: vec![list, string],
                    })),
                }),
                invert: false,
            }),
            metadata_source: MetadataSource::Dynamic as i32,
        })),
    }
}

fn pattern(p: string_matcher::MatchPattern) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(p),
        ignore_case: false,
    }
}

fn any_string() -> StringMatcher {
    pattern(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
        regex: ".+".into(),
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests;
