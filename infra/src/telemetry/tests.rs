use super::*;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// What the subscriber wrote, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for Captured {
    type Writer = Captured;

    fn make_writer(&'w self) -> Captured {
        self.clone()
    }
}

fn log_with(format: LogFormat) -> String {
    let captured = Captured::default();
    let subscriber = subscriber(format, captured.clone(), false);
    tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!("push", revision = 42_u64);
        let _entered = span.enter();
        tracing::info!(
            proxy = "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local",
            "pushed"
        );
    });
    let bytes = captured.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn json_lines_are_objects_with_the_events_fields_and_its_span() {
    let out = log_with(LogFormat::Json);
    let line: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["message"], "pushed");
    assert_eq!(line["proxy"], "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local");
    assert_eq!(line["span"]["name"], "push");
    assert_eq!(line["span"]["revision"], 42);
    assert!(line["timestamp"].is_string());
}

#[test]
fn text_lines_are_plain_without_color() {
    let out = log_with(LogFormat::Text);
    assert!(out.contains("INFO") && out.contains("pushed") && out.contains("revision=42"));
    assert!(!out.contains('\u{1b}'), "no ANSI escapes: {out:?}");
    assert!(serde_json::from_str::<serde_json::Value>(out.trim()).is_err());
}
