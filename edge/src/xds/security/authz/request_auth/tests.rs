use super::*;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;

/// (path, the string pattern) of a claim matcher.
fn claim(p: &Principal) -> (Vec<String>, MatchPattern) {
    let Some(principal::Identifier::SourcedMetadata(sourced)) = &p.identifier else {
        panic!("not a metadata matcher: {p:?}")
    };
    assert_eq!(sourced.metadata_source, MetadataSource::Dynamic as i32);
    let m = sourced.metadata_matcher.as_ref().unwrap();
    assert_eq!(m.filter, "envoy.filters.http.jwt_authn");
    let path = m
        .path
        .iter()
        .map(|s| match &s.segment {
            Some(metadata_matcher::path_segment::Segment::Key(k)) => k.clone(),
            None => panic!("empty segment"),
        })
        .collect();
    // Either the claim's string or one element of its list.
    let Some(value_matcher::MatchPattern::OrMatch(or)) = &m.value.as_ref().unwrap().match_pattern
    else {
        panic!("{m:?}")
    };
    let [list, string] = or.value_matchers.as_slice() else {
        panic!("{or:?}")
    };
    let Some(value_matcher::MatchPattern::StringMatch(s)) = &string.match_pattern else {
        panic!("{string:?}")
    };
    let Some(value_matcher::MatchPattern::ListMatch(l)) = &list.match_pattern else {
        panic!("{list:?}")
    };
    let Some(list_matcher::MatchPattern::OneOf(one)) = &l.match_pattern else {
        panic!("{l:?}")
    };
    assert_eq!(**one, *string);
    (path, s.match_pattern.clone().unwrap())
}

/// The (iss, sub) patterns of a request principal.
fn iss_sub(value: &str) -> (MatchPattern, MatchPattern) {
    let p = request_principal(value);
    let Some(principal::Identifier::AndIds(set)) = &p.identifier else {
        panic!("{p:?}")
    };
    let (iss, sub) = (claim(&set.ids[0]), claim(&set.ids[1]));
    assert_eq!(iss.0, ["payload", "iss"]);
    assert_eq!(sub.0, ["payload", "sub"]);
    (iss.1, sub.1)
}

fn any() -> MatchPattern {
    MatchPattern::SafeRegex(RegexMatcher {
        regex: ".+".into(),
        ..Default::default()
    })
}

fn exact(s: &str) -> MatchPattern {
    MatchPattern::Exact(s.into())
}

#[test]
fn request_principals_split_issuer_and_subject_at_the_last_slash_as_istio() {
    assert_eq!(
        iss_sub("https://issuer.example.com/alice"),
        (exact("https://issuer.example.com"), exact("alice"))
    );
    assert_eq!(iss_sub("*"), (any(), any()));
    assert_eq!(
        iss_sub("https://issuer.example.com/*"),
        (exact("https://issuer.example.com"), any())
    );
    assert_eq!(
        iss_sub("https://issuer.example.com/team-*"),
        (
            exact("https://issuer.example.com"),
            MatchPattern::Prefix("team-".into())
        )
    );
    assert_eq!(
        iss_sub("*.example.com/alice"),
        (MatchPattern::Suffix(".example.com".into()), exact("alice"))
    );
    assert_eq!(iss_sub("*/alice"), (any(), exact("alice")));
    // Without a slash: a suffix of the subject, or a prefix of the issuer.
    assert_eq!(iss_sub("*ice"), (any(), MatchPattern::Suffix("ice".into())));
    assert_eq!(
        iss_sub("issuer*"),
        (MatchPattern::Prefix("issuer".into()), any())
    );
    // A URL issuer has a slash: `https:/` is then the issuer, as in Istio.
    assert_eq!(
        iss_sub("https://issuer*"),
        (exact("https:/"), MatchPattern::Prefix("issuer".into()))
    );
}

#[test]
fn request_auth_keys_name_their_claims_nested_too() {
    assert_eq!(claim_path("request.auth.audiences").unwrap(), ["aud"]);
    assert_eq!(claim_path("request.auth.presenter").unwrap(), ["azp"]);
    assert_eq!(
        claim_path("request.auth.claims[groups]").unwrap(),
        ["groups"]
    );
    assert_eq!(
        claim_path("request.auth.claims[nested][key.with.dots]").unwrap(),
        ["nested", "key.with.dots"]
    );
    assert_eq!(claim_path("request.auth.claims"), None);
    assert_eq!(claim_path("request.auth.claims[a]b"), None);
    assert_eq!(claim_path("request.auth.claims[]"), None);
    let p = claim_is(
        &["nested".into(), "role".into()],
        StringMatcher {
            match_pattern: Some(exact("admin")),
            ignore_case: false,
        },
    );
    assert_eq!(
        claim(&p),
        (
            vec!["payload".into(), "nested".into(), "role".into()],
            exact("admin")
        )
    );
}
