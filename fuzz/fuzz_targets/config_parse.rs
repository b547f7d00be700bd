//! Arbitrary bytes as a config file and as an API server's object: through the entry
//! points the directory registry (`ingest/src/registry/scan.rs`), `shoal analyze` and the
//! Kubernetes registry (`ingest/src/kubernetes/convert.rs`) use, validation included
//! (`parse_documents` validates every object it reads).
//!
//! The input is read three ways: as YAML text (what a file holds), as one JSON object
//! (what `convert` writes from a `DynamicObject`, re-serialized as it does), and as a
//! watch event `{"type": ..., "object": ...}` whose object is then parsed.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_proto::config::parse::{parse_documents, parse_ignored, parse_nodes};
use shoal_proto::config::validate::validate;

#[derive(serde::Deserialize)]
struct WatchEvent {
    #[serde(rename = "type")]
    _type: String,
    object: serde_json::Value,
}

fn parse(source: &str, text: &str) {
    let _ = parse_nodes(source, text);
    let _ = parse_ignored(source, text);
    let documents = parse_documents(source, text);
    // What `shoal analyze` reports on them (cross-object references).
    let _ = shoal_proto::analyze::to_json(&shoal_proto::analyze::analyze(&documents));
    for doc in documents {
        match doc {
            // What was accepted validates again the same way (the builder trusts it).
            Ok(parsed) => {
                if let Err(e) = validate(&parsed.config) {
                    panic!("{}: accepted, then invalid: {}", parsed.location, e.0);
                }
            }
            Err(e) => {
                assert!(!e.reason.is_empty(), "a rejection without a reason: {e:?}");
                let _ = e.to_string();
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    parse("fuzz.yaml", text);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        if let Ok(json) = serde_json::to_string(&value) {
            parse("kubernetes/fuzz", &json);
        }
        if let Ok(event) = serde_json::from_value::<WatchEvent>(value)
            && let Ok(json) = serde_json::to_string(&event.object)
        {
            parse("kubernetes/fuzz", &json);
        }
    }
});
