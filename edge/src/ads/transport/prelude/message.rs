//! The prelude's reading of the first gRPC message: gathered from DATA frames, then
//! walked (not decoded) for `node.id`.

use prost::encoding::{WireType, decode_key, decode_varint};

/// A gRPC message's prefix: compressed flag, then a big-endian u32 length.
const GRPC_PREFIX_LEN: usize = 5;

/// Where gathering the first gRPC message stands.
pub(super) enum Gathered<'a> {
    /// The whole message (without its prefix).
    Whole(&'a [u8]),
    /// Its prefix says it is compressed: not readable here.
    Compressed,
    Partial,
}

/// Adds the first message's share of `data` (a DATA frame's content) to `message`.
pub(super) fn gather<'a>(message: &'a mut Vec<u8>, mut data: &[u8]) -> Gathered<'a> {
    if message.len() < GRPC_PREFIX_LEN {
        let take = (GRPC_PREFIX_LEN - message.len()).min(data.len());
        message.extend_from_slice(&data[..take]);
        data = &data[take..];
    }
    let &[compressed, l0, l1, l2, l3, ..] = &message[..] else {
        return Gathered::Partial;
    };
    if compressed != 0 {
        return Gathered::Compressed;
    }
    // Saturating: a length beyond memory is never whole, and `max_bytes` ends the wait.
    let whole_len = usize::try_from(u32::from_be_bytes([l0, l1, l2, l3]))
        .unwrap_or(usize::MAX)
        .saturating_add(GRPC_PREFIX_LEN);
    let take = (whole_len - message.len()).min(data.len());
    message.extend_from_slice(&data[..take]);
    if message.len() < whole_len {
        return Gathered::Partial;
    }
    Gathered::Whole(&message[GRPC_PREFIX_LEN..])
}

/// `node.id` of a request whose `node` is field `node_field`, without decoding the rest.
/// Several `node` fields merge (protobuf), so the last `id` in any of them wins.
pub(super) fn node_id(request: &[u8], node_field: u32) -> Result<Option<String>, String> {
    let mut id = None;
    for field in Fields(request) {
        if let (tag, Value::Bytes(node)) = field?
            && tag == node_field
        {
            id = last_id(node)?.or(id);
        }
    }
    id.map(|id: &[u8]| {
        String::from_utf8(id.to_vec()).map_err(|_| "node.id is not UTF-8".to_string())
    })
    .transpose()
}

/// The last `id` (field 1) in an `envoy.config.core.v3.Node`.
fn last_id(node: &[u8]) -> Result<Option<&[u8]>, String> {
    let mut id = None;
    for field in Fields(node) {
        match field? {
            (1, Value::Bytes(value)) => id = Some(value),
            (1, Value::Scalar) => return Err("node.id is not a string".into()),
            _ => {}
        }
    }
    Ok(id)
}

/// A protobuf field's value, as far as the walk needs it.
enum Value<'a> {
    /// Length-delimited: a string, bytes or a message.
    Bytes(&'a [u8]),
    /// A varint or a fixed32/64.
    Scalar,
}

/// The top-level fields of an encoded protobuf message, each `(field number, value)`;
/// an `Err` ends the walk (a malformed message, or a group, which ADS never uses).
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let field = self.next_field();
        if field.is_err() {
            self.0 = &[];
        }
        Some(field)
    }
}

impl<'a> Fields<'a> {
    fn next_field(&mut self) -> Result<(u32, Value<'a>), String> {
        let malformed = |e: prost::DecodeError| e.to_string();
        let (tag, wire_type) = decode_key(&mut self.0).map_err(malformed)?;
        let value = match wire_type {
            WireType::Varint => {
                decode_varint(&mut self.0).map_err(malformed)?;
                Value::Scalar
            }
            WireType::ThirtyTwoBit => {
                self.skip(4, tag)?;
                Value::Scalar
            }
            WireType::SixtyFourBit => {
                self.skip(8, tag)?;
                Value::Scalar
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut self.0).map_err(malformed)?;
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                Value::Bytes(self.skip(len, tag)?)
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(format!("field {tag} is a group"));
            }
        };
        Ok((tag, value))
    }

    /// Takes the next `len` bytes.
    fn skip(&mut self, len: usize, tag: u32) -> Result<&'a [u8], String> {
        if len > self.0.len() {
            return Err(format!("field {tag} runs past the end of its message"));
        }
        let (value, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(value)
    }
}
