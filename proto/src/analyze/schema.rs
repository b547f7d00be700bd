//! What the parser itself found: documents rejected by schema or validation (IST0106),
//! accepted objects' validation warnings (IST0133), kinds Shoal does not implement and
//! valid security policies it does not enforce yet (SHL0001), and spec fields it ignores
//! (SHL0002).

use super::codes::{SCHEMA_VALIDATION_ERROR, SCHEMA_WARNING, UNSUPPORTED_FIELD, UNSUPPORTED_KIND};
use super::{Level, Message, origin_of_error};
use crate::config::parse::{ParseError, Parsed};

/// How the parser words a kind it does not implement (`config::parse::unsupported`).
const UNSUPPORTED_KIND_PREFIX: &str = "unsupported by Shoal, ignored:";
/// ... and a field it ignores, in an accepted object's warnings.
const UNSUPPORTED_FIELD_MARK: &str = "not supported by Shoal";

/// security.istio.io kinds whose objects deny requests: Shoal lets those requests
/// through, so ignoring one is an error, not a warning.
const DENYING_KINDS: [&str; 2] = ["AuthorizationPolicy", "RequestAuthentication"];

pub(super) fn analyze(documents: &[Result<Parsed, ParseError>], out: &mut Vec<Message>) {
    for document in documents {
        match document {
            Ok(parsed) => {
                for warning in &parsed.warnings {
                    out.push(if warning.contains(UNSUPPORTED_FIELD_MARK) {
                        Message::about(UNSUPPORTED_FIELD, parsed, warning.clone())
                    } else {
                        Message::about(
                            SCHEMA_WARNING,
                            parsed,
                            format!("Schema validation warning: {warning}"),
                        )
                    });
                }
            }
            Err(error) => out.push(rejected(error)),
        }
    }
}

fn rejected(error: &ParseError) -> Message {
    let origin = origin_of_error(error);
    if error.reason.starts_with(UNSUPPORTED_KIND_PREFIX) {
        let kind = error.object.split_once(' ').map_or("", |(k, _)| k);
        let message = Message::new(UNSUPPORTED_KIND, origin, error.reason.clone());
        return if DENYING_KINDS.contains(&kind) {
            message.at_level(Level::Error)
        } else {
            message
        };
    }
    Message::new(
        SCHEMA_VALIDATION_ERROR,
        origin,
        format!("Schema validation error: {}", error.reason),
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::findings;

    #[test]
    fn invalid_and_unparseable_documents_are_schema_errors() {
        let yaml = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: broken, namespace: shop}
spec:
  hosts: [a]
  http:
  - timeout: 1s
---
kind: [
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: typed, namespace: shop}
spec:
  host: a
  subsets: 5
";
        let got = findings(yaml);
        assert_eq!(got.len(), 3, "{got:#?}");
        assert!(
            got[0]
                .starts_with("IST0106 Error VirtualService shop/broken: Schema validation error: "),
            "{got:#?}"
        );
        assert!(
            got[1].starts_with("IST0106 Error document 2: Schema validation error: "),
            "{got:#?}"
        );
        assert!(
            got[2]
                .starts_with("IST0106 Error DestinationRule shop/typed: Schema validation error: "),
            "{got:#?}"
        );
    }

    #[test]
    fn unsupported_kinds_warn_and_a_request_authentication_is_accepted() {
        let yaml = "apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: shop}
spec: {jwtRules: [{issuer: https://example.com, jwksUri: https://example.com/jwks}]}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: ef, namespace: shop}
spec: {}
";
        let got = findings(yaml);
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(
            got[0].starts_with("SHL0001 Warning EnvoyFilter shop/ef: "),
            "{got:#?}"
        );
    }

    #[test]
    fn unknown_fields_and_validation_warnings() {
        let yaml = "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: tls, protocol: TLS}]
  resolution: DNS
  subjectAltNames: [x]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: orphan, namespace: shop}
endpoints: []
";
        assert_eq!(
            findings(yaml),
            [
                "SHL0002 Warning ServiceEntry shop/ext: fields not supported by Shoal, ignored: spec.subjectAltNames",
                "IST0133 Warning EndpointSlice shop/orphan: Schema validation warning: no kubernetes.io/service-name label: not bound to a Service",
            ]
        );
    }

    #[test]
    fn security_kinds_are_validated_and_request_authentication_enforced() {
        let yaml = "apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: broken, namespace: shop}
spec: {action: DENY}
---
apiVersion: security.istio.io/v1beta1
kind: PeerAuthentication
metadata: {name: default, namespace: shop}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: shop}
spec: {jwtRules: [{issuer: https://example.com, jwksUri: https://example.com/jwks}]}
";
        assert_eq!(
            findings(yaml),
            [
                "IST0106 Error AuthorizationPolicy shop/broken: Schema validation error: spec.rules: DENY action without rules is meaningless as it will never be triggered; add an empty rule {} if you want it triggered for every request",
            ]
        );
    }
}
