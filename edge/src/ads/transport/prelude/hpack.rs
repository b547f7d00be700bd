//! The prelude's reading of the first header block (RFC 7541): the `:path` and
//! `grpc-encoding` fields, as sent, without decoding any string or keeping a table.

/// The longest `:path` or `grpc-encoding` quoted in a `why`, in characters.
const QUOTED_CHARS: usize = 128;
/// SETTINGS_HEADER_TABLE_SIZE's default: the most a header block may size the table to.
const HPACK_TABLE_SIZE: usize = 4_096;

/// The two fields the prelude reads, as sent.
pub(super) struct Headers<'a> {
    pub path: Option<HpackString<'a>>,
    pub encoding: Option<HpackString<'a>>,
}

/// Walks `block` for the fields named `path_name` and `encoding_name` (and `:path`'s
/// static table entries).
///
/// Only those are looked for, and compared, not decoded: a Huffman-coded string has
/// exactly one encoding, so each is matched against the raw and the Huffman-coded form
/// of the few values that matter. No table is kept: this is the connection's first
/// header block, so an entry it could index from the dynamic table was added by itself,
/// which clients do not do for these (such a reference is ignored: the connection is
/// then served where it landed).
pub(super) fn read<'a>(
    block: &'a [u8],
    path_name: &Spelled,
    encoding_name: &Spelled,
) -> Result<Headers<'a>, String> {
    let (mut path, mut encoding) = (None, None);
    // Entries this block added to the dynamic table: an index past them and the static
    // table's 61 names nothing.
    let mut added = 0;
    let check_index = |index: usize, added: usize| match index {
        0 => Err("the first header block indexes entry 0 (HPACK)".to_string()),
        i if i > STATIC_ENTRIES + added => Err(format!(
            "the first header block indexes entry {i}, past both tables (HPACK)"
        )),
        _ => Ok(()),
    };
    let mut rest = block;
    while let Some(&first) = rest.first() {
        let name_index_bits = match first {
            0x80.. => {
                // Indexed field: the static table's :path entries (4 and 5) are "/" and
                // "/index.html", never ADS.
                let index = hpack_integer(&mut rest, 7).ok_or_else(malformed_block)?;
                check_index(index, added)?;
                if matches!(index, 4 | 5) {
                    path = Some(HpackString::STATIC_PATH);
                }
                continue;
            }
            0x40.. => {
                added += 1;
                6
            }
            0x20.. => {
                let size = hpack_integer(&mut rest, 5).ok_or_else(malformed_block)?;
                if size > HPACK_TABLE_SIZE {
                    return Err(format!(
                        "the first header block sizes the HPACK table to {size} bytes, over \
                         the {HPACK_TABLE_SIZE} allowed"
                    ));
                }
                continue;
            }
            // Literal without indexing, or never indexed.
            _ => 4,
        };
        let name_index = hpack_integer(&mut rest, name_index_bits).ok_or_else(malformed_block)?;
        if name_index > 0 {
            check_index(name_index, added)?;
        }
        let name = match name_index {
            0 => Some(take_hpack_string(&mut rest).ok_or_else(malformed_block)?),
            _ => None,
        };
        let value = take_hpack_string(&mut rest).ok_or_else(malformed_block)?;
        if matches!(name_index, 4 | 5) || name.is_some_and(|n| n.is(path_name)) {
            path = Some(value);
        } else if name.is_some_and(|n| n.is(encoding_name)) {
            encoding = Some(value);
        }
    }
    Ok(Headers { path, encoding })
}

fn malformed_block() -> String {
    "the first header block is not valid HPACK (a field runs past its end)".into()
}

/// Entries in HPACK's static table (RFC 7541 Appendix A).
const STATIC_ENTRIES: usize = 61;

/// A string the prelude compares against, in both of the forms HPACK may send it.
pub(super) struct Spelled {
    raw: &'static [u8],
    huffman: Vec<u8>,
}

impl Spelled {
    pub(super) fn new(raw: &'static str) -> Self {
        let mut huffman = Vec::new();
        // Only ever our own constants, every byte of which has a code.
        let _ = httlib_huffman::encode(raw.as_bytes(), &mut huffman);
        Spelled {
            raw: raw.as_bytes(),
            huffman,
        }
    }
}

/// An RFC 7541 §5.2 string as sent: raw or Huffman-coded.
#[derive(Clone, Copy)]
pub(super) struct HpackString<'a> {
    huffman: bool,
    bytes: &'a [u8],
}

impl HpackString<'_> {
    /// The static table's `:path` values, neither of which is ADS.
    const STATIC_PATH: HpackString<'static> = HpackString {
        huffman: false,
        bytes: b"/",
    };

    pub(super) fn is(&self, known: &Spelled) -> bool {
        match self.huffman {
            false => self.bytes == known.raw,
            true => self.bytes == known.huffman,
        }
    }

    /// For a log line: the raw string, or that it was Huffman-coded (not decoded here).
    pub(super) fn shown(&self) -> String {
        match self.huffman {
            false => quoted(self.bytes),
            true => format!("a Huffman-coded value of {} bytes", self.bytes.len()),
        }
    }
}

/// Takes an RFC 7541 §5.1 integer with a `prefix_bits` prefix off the front of `rest`.
fn hpack_integer(rest: &mut &[u8], prefix_bits: u32) -> Option<usize> {
    let mask = u8::MAX >> (8 - prefix_bits);
    let (&first, mut after) = rest.split_first()?;
    let mut value = usize::from(first & mask);
    if first & mask == mask {
        // At most 4 more bytes (28 bits): more would name no string a frame can hold.
        for shift in (0..=21).step_by(7) {
            let (&byte, next) = after.split_first()?;
            after = next;
            value += usize::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                *rest = after;
                return Some(value);
            }
        }
        return None;
    }
    *rest = after;
    Some(value)
}

/// Takes an RFC 7541 §5.2 string off the front of `rest`.
fn take_hpack_string<'a>(rest: &mut &'a [u8]) -> Option<HpackString<'a>> {
    let huffman = rest.first()? & 0x80 != 0;
    let len = hpack_integer(rest, 7)?;
    if len > rest.len() {
        return None;
    }
    let (bytes, after) = rest.split_at(len);
    *rest = after;
    Some(HpackString { huffman, bytes })
}

/// A header value fit for a log line: escaped, and cut short if long.
fn quoted(value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    let short: String = text.chars().take(QUOTED_CHARS).collect();
    format!("{short:?}")
}
