//! The headers that mark a relayed stream, and who may send them: another Shoal edge
//! (proven by its client certificate) names itself and the identity it authenticated
//! the proxy as.

use crate::tls::PeerInfo;
use shoal_proto::security::{AuthMethod, Identity, SpiffeId};
use tonic::Status;

/// The header that marks a relayed stream, naming the edge that relays it.
pub const RELAYED_BY: &str = "x-shoal-relayed-by";
/// The identity the relaying edge authenticated the proxy as: `<spiffe id>;<method>`, or
/// `anonymous` for a stream it took on plaintext.
pub const RELAYED_IDENTITY: &str = "x-shoal-relayed-identity";

/// The identity a relayed stream carries. `Ok(None)`: not relayed. A stream with relay
/// headers is refused PERMISSION_DENIED unless its peer is an edge: its TLS client
/// certificate, verified against the mesh root, names `edge`.
pub(crate) fn relayed_identity(
    edge: &SpiffeId,
    peer: Option<&PeerInfo>,
    headers: &http::HeaderMap,
) -> Result<Option<Identity>, Status> {
    if !headers.contains_key(RELAYED_BY) && !headers.contains_key(RELAYED_IDENTITY) {
        return Ok(None);
    }
    let presented = match peer {
        None => "a plaintext stream".to_string(),
        Some(p) => match &p.spiffe {
            Some(id) if id == edge => {
                let value = headers
                    .get(RELAYED_IDENTITY)
                    .map(|v| v.to_str().unwrap_or("\u{fffd}"))
                    .unwrap_or("anonymous");
                return parse_identity(value).map(Some).map_err(|reason| {
                    Status::invalid_argument(format!("{RELAYED_IDENTITY} {value:?}: {reason}"))
                });
            }
            Some(id) => format!("a client certificate for {id}"),
            None => "no edge client certificate".to_string(),
        },
    };
    Err(Status::permission_denied(format!(
        "{RELAYED_BY} / {RELAYED_IDENTITY} are taken only from another Shoal edge (a client \
         certificate for {edge} under the mesh root); this stream presents {presented}"
    )))
}

/// The [`RELAYED_IDENTITY`] value of `identity`.
pub(crate) fn identity_header(identity: &Identity) -> String {
    match identity.principal() {
        None => "anonymous".into(),
        Some(p) => format!("{};{}", p.spiffe_id(), p.method.as_str()),
    }
}

fn parse_identity(value: &str) -> Result<Identity, String> {
    if value == "anonymous" {
        return Ok(Identity::Anonymous);
    }
    let (id, method) = value
        .split_once(';')
        .ok_or("expected <spiffe id>;<method> or anonymous")?;
    let method = [AuthMethod::Jwt, AuthMethod::ClientCertificate]
        .into_iter()
        .find(|m| m.as_str() == method)
        .ok_or_else(|| format!("unknown method {method:?}"))?;
    let id = SpiffeId::parse(id).map_err(|e| e.to_string())?;
    Ok(Identity::authenticated(id.into_principal(method)))
}

/// The path of a tunnel: a proxy's whole connection, relayed to its owner.
pub const TUNNEL_PATH: &str = "/shoal.edge.v1.ConnectionRelay/Open";
/// The tunnel's service, for tonic's router.
pub const TUNNEL_SERVICE: &str = "shoal.edge.v1.ConnectionRelay";
/// Which listener the proxy reached: `plaintext` or `secure`.
pub const TUNNEL_ORIGIN: &str = "x-shoal-tunnel-origin";
/// The certificate chain the proxy presented, verified by the relaying edge against the
/// mesh root: base64 DER, leaf first, comma-separated; empty when it presented none.
pub const TUNNEL_PEER_CERTS: &str = "x-shoal-tunnel-peer-certs";
/// The proxy's address as the relaying edge saw it.
pub const TUNNEL_REMOTE: &str = "x-shoal-tunnel-remote";

/// The [`TUNNEL_PEER_CERTS`] value of `certificates`.
pub(crate) fn peer_certs_header(certificates: &[bytes::Bytes]) -> String {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let encoded: Vec<String> = certificates.iter().map(|c| engine.encode(c)).collect();
    encoded.join(",")
}

/// The certificates of a [`TUNNEL_PEER_CERTS`] value.
pub(crate) fn parse_peer_certs(value: &str) -> Result<Vec<bytes::Bytes>, String> {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    value
        .split(',')
        .filter(|c| !c.is_empty())
        .map(|c| {
            engine
                .decode(c)
                .map(bytes::Bytes::from)
                .map_err(|e| format!("{TUNNEL_PEER_CERTS}: not base64 ({e})"))
        })
        .collect()
}
