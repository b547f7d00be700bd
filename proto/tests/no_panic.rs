//! No input makes the parser panic: every prefix and many byte mutations of real mesh
//! YAML yield per-document results (errors with a location), never a crash.

use shoal_proto::config::parse::parse_documents;

fn corpus() -> Vec<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/mesh");
    let mut files = Vec::new();
    let mut dirs = vec![std::path::PathBuf::from(root)];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).expect("examples/mesh") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.push(std::fs::read_to_string(path).expect("read"));
            }
        }
    }
    files
}

#[test]
fn every_prefix_parses_without_panic() {
    for text in corpus() {
        for end in (0..=text.len()).filter(|i| text.is_char_boundary(*i)) {
            for result in parse_documents("prefix.yaml", &text[..end]) {
                if let Err(e) = result {
                    assert!(e.location.line >= 1, "{e}");
                }
            }
        }
    }
}

#[test]
fn byte_mutations_parse_without_panic() {
    // A small deterministic generator: no dependency, same cases every run.
    let mut state: u64 = 0x5eed;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let replacements = [
        b':', b'-', b' ', b'\n', b'{', b'[', b'"', b'0', b'x', b'*', b'&', b'!',
    ];
    for text in corpus() {
        let bytes = text.as_bytes();
        for _ in 0..2_000 {
            let mut mutated = bytes.to_vec();
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % mutated.len();
                mutated[at] = replacements[(next() as usize) % replacements.len()];
            }
            let Ok(s) = String::from_utf8(mutated) else {
                continue;
            };
            let _ = parse_documents("mutated.yaml", &s);
        }
    }
}
