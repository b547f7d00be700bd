//! The wire API of Istio's CA, `istio.v1.auth.IstioCertificateService` (Istio's
//! `security/proto/istioca.proto`), as prost messages written by hand: one unary method,
//! `CreateCertificate`, that pilot-agent calls on istiod's secure port (15012) with the
//! pod's token in `authorization: Bearer …`.

/// The gRPC service name agents dial.
pub const SERVICE_NAME: &str = "istio.v1.auth.IstioCertificateService";

/// The path of the one method, `CreateCertificate`.
pub const CREATE_CERTIFICATE_PATH: &str =
    "/istio.v1.auth.IstioCertificateService/CreateCertificate";

/// A certificate request.
///
/// Field 4 (`metadata`, a `google.protobuf.Struct`) is not declared: istiod reads it only
/// when ztunnel asks for a certificate on behalf of another workload (impersonation),
/// which Shoal does not offer; prost skips the unknown field when decoding.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateRequest {
    /// The PEM-encoded PKCS#10 certificate signing request.
    #[prost(string, tag = "1")]
    pub csr: String,
    /// The requested validity in seconds; 0 (or unset) means the CA's default.
    #[prost(int64, tag = "3")]
    pub validity_duration: i64,
}

/// The signed certificate chain: the leaf first, then intermediates, the root last.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateResponse {
    #[prost(string, repeated, tag = "1")]
    pub cert_chain: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn field_numbers_match_istioca_proto() {
        let req = IstioCertificateRequest {
            csr: "x".into(),
            validity_duration: 60,
        };
        // Tag 1 length-delimited (0x0a), tag 3 varint (0x18).
        assert_eq!(req.encode_to_vec(), vec![0x0a, 1, b'x', 0x18, 60]);
        let resp = IstioCertificateResponse {
            cert_chain: vec!["a".into(), "b".into()],
        };
        assert_eq!(resp.encode_to_vec(), vec![0x0a, 1, b'a', 0x0a, 1, b'b']);
    }

    #[test]
    fn the_metadata_field_is_skipped_not_refused() {
        // csr "x", then field 4 (length-delimited, an empty Struct), then validity 7.
        let bytes = [0x0a, 1, b'x', 0x22, 0, 0x18, 7];
        let req = IstioCertificateRequest::decode(&bytes[..]).unwrap();
        assert_eq!(req.csr, "x");
        assert_eq!(req.validity_duration, 7);
    }
}
