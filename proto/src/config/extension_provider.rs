//! MeshConfig `extensionProviders`: the external authorizers that AuthorizationPolicies
//! with `action: CUSTOM` name. Only the `envoyExtAuthzHttp` and `envoyExtAuthzGrpc`
//! kinds are read; providers of other kinds (tracing, access logs) are accepted and
//! ignored, as the rest of the mesh config.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// One entry of `extensionProviders`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtensionProvider {
    pub name: String,
    pub envoy_ext_authz_http: Option<ExtAuthzHttp>,
    pub envoy_ext_authz_grpc: Option<ExtAuthzGrpc>,
}

/// `envoyExtAuthzHttp`: Envoy's ext_authz filter calling an HTTP service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtAuthzHttp {
    /// `<host>` or `<namespace>/<host>` of a service in the registry.
    pub service: String,
    #[serde(deserialize_with = "port")]
    pub port: u32,
    /// A protobuf duration (`"0.5s"`); Istio's default is 600 s.
    pub timeout: Option<String>,
    pub path_prefix: String,
    pub fail_open: bool,
    /// The HTTP status returned when the authorizer cannot be reached (`"503"`).
    pub status_on_error: String,
    pub include_request_headers_in_check: Vec<String>,
    /// Deprecated by Istio for `includeRequestHeadersInCheck`, still honoured.
    pub include_headers_in_check: Vec<String>,
    pub include_additional_headers_in_check: BTreeMap<String, String>,
    pub headers_to_upstream_on_allow: Vec<String>,
    pub headers_to_downstream_on_deny: Vec<String>,
    pub headers_to_downstream_on_allow: Vec<String>,
    pub include_request_body_in_check: Option<RequestBody>,
}

/// `envoyExtAuthzGrpc`: Envoy's ext_authz filter calling Envoy's gRPC authorization API.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtAuthzGrpc {
    pub service: String,
    #[serde(deserialize_with = "port")]
    pub port: u32,
    pub timeout: Option<String>,
    pub fail_open: bool,
    pub status_on_error: String,
    pub include_request_body_in_check: Option<RequestBody>,
}

/// `includeRequestBodyInCheck`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RequestBody {
    pub max_request_bytes: u32,
    pub allow_partial_message: bool,
    pub pack_as_bytes: bool,
}

/// A `uint32` as protobuf's JSON mapping reads it: a number or a decimal string (Istio's
/// own samples write `port: "9000"`). Snapshots are not self-describing (postcard):
/// there it is a plain number.
fn port<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    if !d.is_human_readable() {
        return u32::deserialize(d);
    }
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Port {
        Number(u32),
        Text(String),
    }
    match Port::deserialize(d)? {
        Port::Number(n) => Ok(n),
        Port::Text(s) => s
            .trim()
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("port {s:?} is not a number"))),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::mesh::MeshConfig;

    #[test]
    fn ports_read_as_numbers_or_strings_and_survive_a_snapshot() {
        let yaml = "extensionProviders:\n- name: a\n  envoyExtAuthzHttp: {service: s, port: \"8000\"}\n- name: b\n  envoyExtAuthzGrpc: {service: s, port: 9000}\n";
        let mesh: MeshConfig = serde_norway::from_str(yaml).unwrap();
        let http = mesh.extension_providers[0].envoy_ext_authz_http.as_ref();
        assert_eq!(http.unwrap().port, 8000);
        let grpc = mesh.extension_providers[1].envoy_ext_authz_grpc.as_ref();
        assert_eq!(grpc.unwrap().port, 9000);
        // Snapshots carry the mesh config in postcard, which is not self-describing.
        let bytes = postcard::to_stdvec(&mesh).unwrap();
        assert_eq!(postcard::from_bytes::<MeshConfig>(&bytes).unwrap(), mesh);
        let bad =
            "extensionProviders:\n- name: a\n  envoyExtAuthzHttp: {service: s, port: eighty}\n";
        let err = serde_norway::from_str::<MeshConfig>(bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("port \"eighty\" is not a number"), "{err}");
    }
}
