//! Istio `HTTPMatchRequest` → Envoy `RouteMatch` (Istio's `TranslateRouteMatch`).

use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RouteMatch, header_matcher, query_parameter_matcher,
    route_match,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatcher, StringMatcher, string_matcher};
use envoy_types::pb::google::protobuf::BoolValue;
use shoal_proto::config::istio::{HttpMatchRequest, StringMatch};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Fails with the offending pattern when a regex would not
/// compile (RE2 and Rust's `regex` accept the same syntax: no backreferences, no
/// lookaround).
pub fn route_match(m: &HttpMatchRequest) -> Result<RouteMatch, String> {
    let mut out = RouteMatch {
        path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
        case_sensitive: Some(BoolValue {
            value: !m.ignore_uri_case,
        }),
        ..Default::default()
    };
    for (name, sm) in &m.headers {
        out.headers.push(header(name, sm)?);
    }
    for (name, sm) in &m.without_headers {
        let mut h = header(name, sm)?;
        h.invert_match = true;
        // A missing header then counts as not matching the excluded value.
        h.treat_missing_header_as_empty = !is_present_match(sm);
        out.headers.push(h);
    }
    out.headers.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(uri) = &m.uri {
        out.path_specifier = Some(if let Some(exact) = &uri.exact {
            route_match::PathSpecifier::Path(exact.clone())
        } else if let Some(prefix) = &uri.prefix {
            route_match::PathSpecifier::Prefix(prefix.clone())
        } else if let Some(re) = &uri.regex {
            route_match::PathSpecifier::SafeRegex(regex(re)?)
        } else {
            route_match::PathSpecifier::Prefix("/".into())
        });
    }
    for (name, sm) in [
        (":method", &m.method),
        (":authority", &m.authority),
        (":scheme", &m.scheme),
    ] {
        if let Some(sm) = sm {
            out.headers.push(header(name, sm)?);
        }
    }
    for (name, sm) in &m.query_params {
        let specifier = match string_matcher(sm)? {
            Some(s) => query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(s),
            None => query_parameter_matcher::QueryParameterMatchSpecifier::PresentMatch(true),
        };
        out.query_parameters.push(QueryParameterMatcher {
            name: name.clone(),
            query_parameter_match_specifier: Some(specifier),
        });
    }
    Ok(out)
}

/// Istio reads an empty match, or the regex `*`, as "present".
fn is_present_match(sm: &StringMatch) -> bool {
    sm.regex.as_deref() == Some("*")
        || (sm.exact.is_none() && sm.prefix.is_none() && sm.regex.is_none())
}

/// Whether `re` compiles, memoized: every scope's build checks the same few patterns,
/// and compiling one costs tens of microseconds.
fn regex_compiles(re: &str) -> bool {
    static CHECKED: LazyLock<Mutex<HashMap<String, bool>>> = LazyLock::new(Default::default);
    let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ok) = checked.get(re) {
        return *ok;
    }
    if checked.len() >= 4096 {
        checked.clear();
    }
    let ok = regex::Regex::new(re).is_ok();
    checked.insert(re.to_string(), ok);
    ok
}

fn regex(re: &str) -> Result<RegexMatcher, String> {
    if !regex_compiles(re) {
        return Err(re.to_string());
    }
    Ok(RegexMatcher {
        regex: re.to_string(),
        ..Default::default()
    })
}

pub(super) fn string_matcher(sm: &StringMatch) -> Result<Option<StringMatcher>, String> {
    if is_present_match(sm) {
        return Ok(None);
    }
    let pattern = if let Some(exact) = &sm.exact {
        string_matcher::MatchPattern::Exact(exact.clone())
    } else if let Some(prefix) = &sm.prefix {
        string_matcher::MatchPattern::Prefix(prefix.clone())
    } else if let Some(re) = &sm.regex {
        string_matcher::MatchPattern::SafeRegex(regex(re)?)
    } else {
        return Ok(None);
    };
    Ok(Some(StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    }))
}

fn header(name: &str, sm: &StringMatch) -> Result<HeaderMatcher, String> {
    let specifier = match string_matcher(sm)? {
        Some(s) => header_matcher::HeaderMatchSpecifier::StringMatch(s),
        None => header_matcher::HeaderMatchSpecifier::PresentMatch(true),
    };
    Ok(HeaderMatcher {
        // Envoy compares header names in lower case; Istio accepts any case.
        name: name.to_ascii_lowercase(),
        header_match_specifier: Some(specifier),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_regex_is_reported() {
        let m = HttpMatchRequest {
            uri: Some(StringMatch {
                regex: Some("(unclosed".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(route_match(&m), Err("(unclosed".to_string()));
    }

    #[test]
    fn method_authority_and_query_params() {
        let exact = |s: &str| StringMatch {
            exact: Some(s.into()),
            ..Default::default()
        };
        let m = HttpMatchRequest {
            method: Some(exact("GET")),
            authority: Some(StringMatch {
                prefix: Some("api.".into()),
                ..Default::default()
            }),
            query_params: [("debug".to_string(), StringMatch::default())].into(),
            ignore_uri_case: true,
            ..Default::default()
        };
        let rm = route_match(&m).unwrap();
        let names: Vec<_> = rm.headers.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, [":method", ":authority"]);
        assert_eq!(rm.case_sensitive, Some(BoolValue { value: false }));
        assert_eq!(
            rm.query_parameters[0].query_parameter_match_specifier,
            Some(query_parameter_matcher::QueryParameterMatchSpecifier::PresentMatch(true))
        );
    }
}
