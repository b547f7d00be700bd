//! Istio `headers` operations → Envoy's headers to add and remove (Istio's
//! `translateHeadersOperations`): `set` overwrites, `add` appends.

use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
use shoal_proto::config::istio::{HeaderOperations, Headers};

/// What one side (request or response) adds and removes.
#[derive(Debug, Default, PartialEq)]
pub struct HeaderChanges {
    pub add: Vec<HeaderValueOption>,
    pub remove: Vec<String>,
}

impl HeaderChanges {
    fn extend(&mut self, ops: &HeaderOperations) {
        let option =
            |(name, value): (&String, &String), action: HeaderAppendAction| HeaderValueOption {
                header: Some(HeaderValue {
                    key: name.to_ascii_lowercase(),
                    value: value.clone(),
                    ..Default::default()
                }),
                append_action: action as i32,
                ..Default::default()
            };
        self.add.extend(
            ops.set
                .iter()
                .map(|kv| option(kv, HeaderAppendAction::OverwriteIfExistsOrAdd)),
        );
        self.add.extend(
            ops.add
                .iter()
                .map(|kv| option(kv, HeaderAppendAction::AppendIfExistsOrAdd)),
        );
        self.remove
            .extend(ops.remove.iter().map(|n| n.to_ascii_lowercase()));
    }
}

/// The request and response changes of every `headers` given, in order.
pub fn changes<'a>(all: impl IntoIterator<Item = &'a Headers>) -> (HeaderChanges, HeaderChanges) {
    let (mut request, mut response) = (HeaderChanges::default(), HeaderChanges::default());
    for h in all {
        if let Some(ops) = &h.request {
            request.extend(ops);
        }
        if let Some(ops) = &h.response {
            response.extend(ops);
        }
    }
    (request, response)
}
