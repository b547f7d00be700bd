//! Plain scalars with a `:` inside flow collections, as Go's YAML reads them.
//!
//! libyaml (under serde_norway) takes any `:` in a flow collection for a mapping's value
//! indicator, so `addresses: [1.2.3.4, 2001:db8::1]` fails with "did not find expected
//! ',' or ']'". YAML 1.2 and Go's yaml (which Istio and kubectl use) make `:` an
//! indicator only when a space, a line end or a flow indicator follows it, so that
//! scalar is the string `2001:db8::1`. This pass double-quotes such scalars before the
//! YAML is parsed, on the same line, so located errors keep their line numbers. Block
//! scalars, quoted scalars and comments are copied untouched.

use std::borrow::Cow;

/// `doc` with every plain scalar in a flow collection that holds a `:` double-quoted;
/// borrowed when there is none.
pub fn quote_colon_scalars(doc: &str) -> Cow<'_, str> {
    if !doc.contains('[') && !doc.contains('{') {
        return Cow::Borrowed(doc);
    }
    let mut out = String::with_capacity(doc.len() + 16);
    let mut changed = false;
    let mut depth = 0usize;
    // Inside a block scalar: the indentation of the line that opened it.
    let mut block_scalar: Option<usize> = None;
    let mut quote: Option<char> = None;
    // Just after a quoted scalar or a closed collection: a `:` here is a value
    // indicator whatever follows it (YAML 1.2's JSON-like keys: `{"a":1}`).
    let mut after_node = false;
    for line in doc.split_inclusive('\n') {
        let content = line.trim_start();
        let indent = line.len() - content.len();
        if let Some(opener) = block_scalar {
            if content.trim().is_empty() || indent > opener {
                out.push_str(line);
                continue;
            }
            block_scalar = None;
        }
        let chars: Vec<(usize, char)> = line.char_indices().collect();
        let mut i = 0;
        while i < chars.len() {
            let (at, c) = chars[i];
            let next = chars.get(i + 1).map(|(_, c)| *c);
            if let Some(q) = quote {
                out.push(c);
                if c == '\\' && q == '"' {
                    if let Some(n) = next {
                        out.push(n);
                        i += 1;
                    }
                } else if c == q {
                    if q == '\'' && next == Some('\'') {
                        out.push('\'');
                        i += 1;
                    } else {
                        quote = None;
                        after_node = true;
                    }
                }
                i += 1;
                continue;
            }
            let before = line[..at].trim_end();
            let after_space = at == 0 || line[..at].ends_with([' ', '\t']);
            if c == '#' && after_space {
                out.push_str(&line[at..]);
                break;
            }
            let value_start = depth > 0
                || before.is_empty()
                || before.ends_with(": ")
                || before.ends_with(':')
                || before == "-"
                || before.ends_with(" -");
            if (c == '"' || c == '\'') && value_start && (depth > 0 || starts_token(line, at)) {
                quote = Some(c);
                out.push(c);
                i += 1;
                continue;
            }
            if depth == 0 {
                if (c == '[' || c == '{') && value_start {
                    depth = 1;
                }
                out.push(c);
                i += 1;
                continue;
            }
            match c {
                '[' | '{' => depth += 1,
                ']' | '}' => depth -= 1,
                _ => {}
            }
            let adjacent_value = c == ':' && after_node;
            if !matches!(c, ' ' | '\t' | '\n' | '\r') {
                after_node = matches!(c, ']' | '}');
            }
            if matches!(c, '[' | '{' | ']' | '}' | ',' | ' ' | '\t' | '\n' | '\r')
                || adjacent_value
                || (c == ':' && is_indicator_end(next))
                || matches!(c, '!' | '&' | '*' | '?')
            {
                // Tags, anchors and aliases are left as written, with what follows.
                if matches!(c, '!' | '&' | '*') {
                    let end = token_end(&chars, i);
                    out.push_str(&line[at..chars.get(end).map_or(line.len(), |(a, _)| *a)]);
                    i = end;
                    continue;
                }
                out.push(c);
                i += 1;
                continue;
            }
            // A plain scalar: up to a flow indicator, `: `, ` #` or the line's end.
            after_node = false;
            let end = token_end(&chars, i);
            let stop = chars.get(end).map_or(line.len(), |(a, _)| *a);
            let token = line[at..stop].trim_end();
            if token.contains(':') {
                out.push('"');
                out.push_str(&token.replace('\\', "\\\\").replace('"', "\\\""));
                out.push('"');
                out.push_str(&line[at + token.len()..stop]);
                changed = true;
            } else {
                out.push_str(&line[at..stop]);
            }
            i = end;
        }
        if depth == 0 && quote.is_none() && opens_block_scalar(line) {
            block_scalar = Some(indent);
        }
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(doc)
    }
}

/// Whether a quote at `at` starts a scalar rather than sits inside one (`it's`).
fn starts_token(line: &str, at: usize) -> bool {
    at == 0 || line[..at].ends_with([' ', '\t', '-', ':', '[', '{', ','])
}

/// Whether a `:` followed by `next` is a value indicator in a flow collection.
fn is_indicator_end(next: Option<char>) -> bool {
    matches!(
        next,
        None | Some(' ' | '\t' | '\n' | '\r' | ',' | '[' | ']' | '{' | '}')
    )
}

/// The index just past a plain scalar (or tag, anchor, alias) starting at `i`.
fn token_end(chars: &[(usize, char)], i: usize) -> usize {
    let mut j = i;
    while j < chars.len() {
        let c = chars[j].1;
        let next = chars.get(j + 1).map(|(_, c)| *c);
        let after_space = j > 0 && matches!(chars[j - 1].1, ' ' | '\t');
        if matches!(c, ',' | '[' | ']' | '{' | '}' | '\n' | '\r')
            || (c == ':' && j > i && is_indicator_end(next))
            || (c == '#' && after_space)
        {
            break;
        }
        j += 1;
    }
    j
}

/// Whether `line` ends (before any comment) with a block scalar's `|` or `>` header.
fn opens_block_scalar(line: &str) -> bool {
    let text = match line.find(" #") {
        Some(i) => &line[..i],
        None => line,
    };
    let last = text.split_whitespace().last().unwrap_or_default();
    let mut header = last.chars();
    matches!(header.next(), Some('|' | '>'))
        && header.all(|c| c.is_ascii_digit() || c == '+' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_in_a_flow_sequence_is_quoted_and_the_rest_kept() {
        let doc = "spec:\n  addresses: [1.2.3.4, 2001:db8::1, \"::2\"]  # v4 and v6\n";
        assert_eq!(
            quote_colon_scalars(doc),
            "spec:\n  addresses: [1.2.3.4, \"2001:db8::1\", \"::2\"]  # v4 and v6\n"
        );
        let map = "e: {address: 2001:db8::1, ports: {http: 80}}\n";
        assert_eq!(
            quote_colon_scalars(map),
            "e: {address: \"2001:db8::1\", ports: {http: 80}}\n"
        );
        let multi = "a: [\n  ::1,\n  fe80::1%eth0\n]\n";
        assert_eq!(
            quote_colon_scalars(multi),
            "a: [\n  \"::1\",\n  \"fe80::1%eth0\"\n]\n"
        );
    }

    #[test]
    fn what_is_not_a_flow_scalar_with_a_colon_is_untouched() {
        for doc in [
            "hosts: [reviews, ratings]\n",
            "description: see [docs] at http://x\n",
            "mesh: |\n  a: [x:y]\n  b: 1\nnext: [c]\n",
            "k: 'it''s [a:b]'\n",
            "k: \"[a:b]\"\n",
            "# [a:b]\nk: v\n",
            "m: {a: b, c: [d]}\n",
            "{\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"a\"},\"x\":[\"b\"]}",
        ] {
            assert!(
                matches!(quote_colon_scalars(doc), Cow::Borrowed(_)),
                "{doc}: {}",
                quote_colon_scalars(doc)
            );
        }
    }

    #[test]
    fn the_result_parses_as_go_reads_it() {
        #[derive(serde::Deserialize)]
        struct D {
            a: Vec<String>,
        }
        let fixed = quote_colon_scalars("a: [1.2.3.4, 2001:db8::1, '::1']\n");
        let d: D = serde_norway::from_str(&fixed).unwrap();
        assert_eq!(d.a, ["1.2.3.4", "2001:db8::1", "::1"]);
    }
}
