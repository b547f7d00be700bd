//! `ClientStatusRequest.node_matchers` on a proxy's node ID. Envoy's rules: the matchers
//! are ORed, none means every proxy, and a `safe_regex` matches the whole ID.
//! Matching on node metadata (`node_metadatas`) is refused rather than ignored, so that
//! an answer never holds proxies the caller meant to leave out.

use super::error::{CsdsError, Result};
use envoy_types::pb::envoy::r#type::matcher::v3::{NodeMatcher, StringMatcher, string_matcher};
use regex::Regex;

/// The most a `safe_regex` may compile to (the regex crate's measure): a caller cannot
/// make the edge build a huge automaton.
const MAX_REGEX_BYTES: usize = 1 << 20;

/// The proxies a request asks about, its matchers compiled once.
#[derive(Debug)]
pub struct NodeFilter {
    /// Empty: every proxy.
    any_of: Vec<IdMatcher>,
}

#[derive(Debug)]
enum IdMatcher {
    /// A matcher without `node_id`: every proxy.
    All,
    Exact(String, bool),
    Prefix(String, bool),
    Suffix(String, bool),
    Contains(String, bool),
    Regex(Regex),
}

impl NodeFilter {
    pub fn new(matchers: &[NodeMatcher]) -> Result<NodeFilter> {
        let any_of = matchers
            .iter()
            .enumerate()
            .map(|(index, m)| {
                if !m.node_metadatas.is_empty() {
                    return Err(CsdsError::UnsupportedMatcher {
                        index,
                        what: "node_metadatas",
                    });
                }
                match &m.node_id {
                    None => Ok(IdMatcher::All),
                    Some(id) => IdMatcher::new(index, id),
                }
            })
            .collect::<Result<_>>()?;
        Ok(NodeFilter { any_of })
    }

    /// Whether the proxy `node_id` is asked about.
    pub fn matches(&self, node_id: &str) -> bool {
        self.any_of.is_empty() || self.any_of.iter().any(|m| m.matches(node_id))
    }
}

impl IdMatcher {
    fn new(index: usize, m: &StringMatcher) -> Result<IdMatcher> {
        use string_matcher::MatchPattern;
        let fold = |s: &str| {
            if m.ignore_case {
                s.to_ascii_lowercase()
            } else {
                s.to_string()
            }
        };
        Ok(match &m.match_pattern {
            None => return Err(CsdsError::NoPattern { index }),
            Some(MatchPattern::Exact(s)) => IdMatcher::Exact(fold(s), m.ignore_case),
            Some(MatchPattern::Prefix(s)) => IdMatcher::Prefix(fold(s), m.ignore_case),
            Some(MatchPattern::Suffix(s)) => IdMatcher::Suffix(fold(s), m.ignore_case),
            Some(MatchPattern::Contains(s)) => IdMatcher::Contains(fold(s), m.ignore_case),
            // Envoy: `ignore_case` has no effect on a regex.
            Some(MatchPattern::SafeRegex(re)) => {
                let bad = |reason: String| CsdsError::BadRegex {
                    index,
                    regex: re.regex.clone(),
                    reason,
                };
                let compiled = regex::RegexBuilder::new(&format!("^(?:{})$", re.regex))
                    .size_limit(MAX_REGEX_BYTES)
                    .build()
                    .map_err(|e| bad(e.to_string()))?;
                IdMatcher::Regex(compiled)
            }
            Some(MatchPattern::Custom(_)) => {
                return Err(CsdsError::UnsupportedMatcher {
                    index,
                    what: "a custom string matcher",
                });
            }
        })
    }

    fn matches(&self, id: &str) -> bool {
        let folded = |ignore_case: bool| {
            if ignore_case {
                std::borrow::Cow::Owned(id.to_ascii_lowercase())
            } else {
                std::borrow::Cow::Borrowed(id)
            }
        };
        match self {
            IdMatcher::All => true,
            IdMatcher::Exact(s, i) => *folded(*i) == **s,
            IdMatcher::Prefix(s, i) => folded(*i).starts_with(s.as_str()),
            IdMatcher::Suffix(s, i) => folded(*i).ends_with(s.as_str()),
            IdMatcher::Contains(s, i) => folded(*i).contains(s.as_str()),
            IdMatcher::Regex(re) => re.is_match(id),
        }
    }
}
