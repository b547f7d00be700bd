//! The start of a proxy's HTTP/2 connection, read before any HTTP/2 layer takes it: who
//! the first ADS stream is for (its node ID), so that the whole connection can go to the
//! edge that owns that proxy. I/O-free: bytes in, a verdict out.
//!
//! The edge writes one empty SETTINGS frame ([`EMPTY_SETTINGS`]) right after accepting, so
//! that clients which wait for the server's preface start talking. The client ACKs it; the
//! HTTP/2 server that later takes the connection never sent that SETTINGS and would fail
//! the connection on its ACK, so [`Prelude`] cuts exactly that one ACK frame out of the
//! bytes it gives back for replay. Everything else is replayed byte for byte.
//!
//! ```text
//!  preface, SETTINGS, [ACK: cut], HEADERS (first stream: :path) [+ CONTINUATION],
//!  DATA... (first stream: the first gRPC message: node.id)  ──► Verdict + replay bytes
//! ```
//!
//! Only what is needed is parsed: frame headers, the first stream's header block (HPACK,
//! with a fresh decoder: it is the connection's first header block) and the top-level
//! fields of its first message. Frames are parsed once each, in place; only the header
//! block and the first message, which may span frames, are gathered into owned buffers.

use bytes::{Bytes, BytesMut};

use super::{DELTA_PATH, SOTW_PATH};
use hpack::{Headers, Spelled};
use message::{Gathered, gather, node_id};

/// The server's SETTINGS frame the edge writes first: no parameters, so every one keeps
/// its RFC 9113 default (which is what the prelude's limits assume).
pub(crate) const EMPTY_SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];

/// The client connection preface (RFC 9113 §3.4), before its first SETTINGS frame.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_LEN: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's default: our SETTINGS allow nothing larger.
const MAX_FRAME_PAYLOAD: usize = 16_384;

/// RFC 9113 §6 frame types (only those the prelude acts on).
mod kind {
    pub(super) const DATA: u8 = 0x0;
    pub(super) const HEADERS: u8 = 0x1;
    pub(super) const RST_STREAM: u8 = 0x3;
    pub(super) const SETTINGS: u8 = 0x4;
    pub(super) const GOAWAY: u8 = 0x7;
    pub(super) const CONTINUATION: u8 = 0x9;
}

/// RFC 9113 §6 frame flags.
mod flag {
    pub(super) const ACK: u8 = 0x1;
    pub(super) const END_STREAM: u8 = 0x1;
    pub(super) const END_HEADERS: u8 = 0x4;
    pub(super) const PADDED: u8 = 0x8;
    pub(super) const PRIORITY: u8 = 0x20;
}

/// Which ADS method the first stream calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AdsMethod {
    Sotw,
    Delta,
}

impl AdsMethod {
    /// The field number of `node` in the method's request message.
    fn node_field(self) -> u32 {
        match self {
            // envoy.service.discovery.v3.DiscoveryRequest: 1 is version_info.
            AdsMethod::Sotw => 2,
            // envoy.service.discovery.v3.DeltaDiscoveryRequest.
            AdsMethod::Delta => 1,
        }
    }
}

/// What the connection's first stream is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// An ADS stream of proxy `node_id`.
    Ads { method: AdsMethod, node_id: String },
    /// Anything else (another service's path, e.g. the CA's CreateCertificate, or an ADS
    /// stream whose first message names no node or cannot be read: compressed, malformed).
    /// `why` says what it was, for a debug log.
    Other { why: String },
}

impl Verdict {
    fn other(why: impl Into<String>) -> Self {
        Verdict::Other { why: why.into() }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Read more bytes (into `buffer_mut()`), then call `advance()` again.
    NeedMore,
    /// The verdict is known AND the client's ACK of our SETTINGS has been seen and cut
    /// out: `into_replay()` gives the bytes to replay.
    Ready,
    /// Not an HTTP/2 connection we can follow (bad preface, frame bigger than the limit,
    /// a protocol violation we rely on, more than `max_bytes` buffered): close it or serve it
    /// as is; `String` says why.
    Invalid(String),
}

/// The reader of a connection's first bytes: feed it with `buffer_mut()` + `advance()`
/// until `Ready` (or `Invalid`), then take `verdict()` and `into_replay()`.
pub(crate) struct Prelude {
    /// The client's bytes so far, less the cut ACK: the replay.
    buffer: BytesMut,
    max_bytes: usize,
    /// Where in `buffer` the next unparsed frame (or the preface) starts.
    parsed: usize,
    preface_seen: bool,
    /// Whether the client's own SETTINGS, which must be its first frame, has been seen.
    client_settings_seen: bool,
    acked: bool,
    first_stream: FirstStream,
    verdict: Option<Verdict>,
    /// Set once `advance()` said `Invalid`: it keeps saying so.
    invalid: Option<String>,
}

impl Prelude {
    /// Reads at most `max_bytes` of the client's bytes before giving up (Progress::Invalid).
    ///
    /// Precisely: `Ready` needs the verdict and the ACK within the first `max_bytes` bytes;
    /// once that can no longer happen (the next frame would end past them), `Invalid`.
    /// How the bytes were split into reads changes nothing.
    pub fn new(max_bytes: usize) -> Self {
        Prelude {
            // One typical read's worth: the preface, SETTINGS and a first request fit.
            buffer: BytesMut::with_capacity(max_bytes.min(16 * 1024)),
            max_bytes,
            parsed: 0,
            preface_seen: false,
            client_settings_seen: false,
            acked: false,
            first_stream: FirstStream::Awaited,
            verdict: None,
            invalid: None,
        }
    }

    /// The buffer to read the client's next bytes into (append at the end; e.g. with
    /// tokio's `AsyncReadExt::read_buf(&mut BytesMut)`); `advance()` parses what is new.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buffer
    }

    /// Parses the bytes added since the last call.
    pub fn advance(&mut self) -> Progress {
        if let Some(why) = &self.invalid {
            return Progress::Invalid(why.clone());
        }
        match self.parse() {
            Ok(()) if self.ready() => Progress::Ready,
            Ok(()) => Progress::NeedMore,
            Err(why) => {
                self.invalid = Some(why.clone());
                Progress::Invalid(why)
            }
        }
    }

    /// The verdict once known (may be known before the ACK is seen).
    pub fn verdict(&self) -> Option<&Verdict> {
        self.verdict.as_ref()
    }

    /// Whether the client's ACK of our empty SETTINGS has been seen (and cut out).
    pub fn acked(&self) -> bool {
        self.acked
    }

    /// Everything the client sent so far, less that one ACK frame, to replay to the HTTP/2
    /// server that takes the connection. Callable at any time (e.g. after a timeout, when
    /// `acked()` is true but no verdict came: the caller then serves the connection locally).
    pub fn into_replay(self) -> Bytes {
        self.buffer.freeze()
    }

    fn ready(&self) -> bool {
        self.verdict.is_some() && self.acked
    }

    /// How many bytes the client sent before `buffer[offset]` (the cut ACK included).
    fn client_offset(&self, offset: usize) -> usize {
        let cut = if self.acked { FRAME_HEADER_LEN } else { 0 };
        offset.saturating_add(cut)
    }

    /// Parses every whole frame not yet parsed, up to `Ready`.
    fn parse(&mut self) -> Result<(), String> {
        if !self.preface_seen && !self.read_preface()? {
            return self.more_allowed();
        }
        while !self.ready() {
            // `get`: `buffer_mut()` lets a caller shrink the buffer (it should not).
            let unparsed = self.buffer.get(self.parsed..).unwrap_or_default();
            let Some(header) = FrameHeader::parse(unparsed) else {
                return self.more_allowed();
            };
            if header.len > MAX_FRAME_PAYLOAD {
                return Err(format!(
                    "a frame of {} bytes (type {:#x}), larger than the {MAX_FRAME_PAYLOAD} our \
                     SETTINGS allow",
                    header.len, header.kind
                ));
            }
            let end = self.parsed + FRAME_HEADER_LEN + header.len;
            if self.client_offset(end) > self.max_bytes {
                return Err(self.limit_reached());
            }
            if self.buffer.len() < end {
                return Ok(());
            }
            self.on_frame(&header, end)?;
        }
        Ok(())
    }

    /// Checks the preface as far as it has arrived: whether it is all there.
    fn read_preface(&mut self) -> Result<bool, String> {
        let seen = self.buffer.len().min(PREFACE.len());
        if self.buffer[..seen] != PREFACE[..seen] {
            return Err("not an HTTP/2 client preface".into());
        }
        if seen < PREFACE.len() {
            return Ok(false);
        }
        self.preface_seen = true;
        self.parsed = PREFACE.len();
        Ok(true)
    }

    /// Whether reading on can still end `Ready` within `max_bytes`.
    fn more_allowed(&self) -> Result<(), String> {
        if self.client_offset(self.buffer.len()) >= self.max_bytes {
            return Err(self.limit_reached());
        }
        Ok(())
    }

    fn limit_reached(&self) -> String {
        let missing = if self.verdict.is_none() {
            "a verdict"
        } else {
            "the client's ACK of our SETTINGS"
        };
        format!(
            "read {} bytes without {missing}, and the next frame would pass the limit of {} \
             bytes",
            self.client_offset(self.buffer.len()),
            self.max_bytes
        )
    }

    /// Handles the whole frame at `parsed..end` and moves past it.
    fn on_frame(&mut self, header: &FrameHeader, end: usize) -> Result<(), String> {
        let is_settings = header.kind == kind::SETTINGS;
        let is_ack = is_settings && header.flags & flag::ACK != 0;
        if !self.client_settings_seen {
            // RFC 9113 §3.4: the preface ends with the client's own SETTINGS.
            if !is_settings || is_ack {
                return Err(format!(
                    "the first frame after the preface is type {:#x} flags {:#x}, not the \
                     client's SETTINGS",
                    header.kind, header.flags
                ));
            }
            self.client_settings_seen = true;
        }
        self.first_stream.check_contiguous(header)?;
        if is_ack && !self.acked {
            return self.cut_ack(header, end);
        }
        let payload = &self.buffer[self.parsed + FRAME_HEADER_LEN..end];
        if let Some(verdict) = self.first_stream.on_frame(header, payload)? {
            self.verdict = Some(verdict);
        }
        self.parsed = end;
        Ok(())
    }

    /// Removes the client's ACK of our SETTINGS (the frame at `parsed..end`) from the
    /// replay: the server that takes the connection never sent that SETTINGS.
    fn cut_ack(&mut self, header: &FrameHeader, end: usize) -> Result<(), String> {
        if header.len != 0 || header.stream != 0 {
            // RFC 9113 §6.5: FRAME_SIZE_ERROR / PROTOCOL_ERROR; and we cut exactly 9 bytes.
            return Err(format!(
                "a SETTINGS ACK of {} bytes on stream {}",
                header.len, header.stream
            ));
        }
        let len = self.buffer.len();
        self.buffer.copy_within(end..len, self.parsed);
        self.buffer.truncate(len - (end - self.parsed));
        self.acked = true;
        Ok(())
    }
}

/// A frame's 9-byte header (RFC 9113 §4.1).
struct FrameHeader {
    len: usize,
    kind: u8,
    flags: u8,
    /// Without the reserved bit.
    stream: u32,
}

impl FrameHeader {
    /// The header at the start of `bytes`, if all 9 bytes are there.
    fn parse(bytes: &[u8]) -> Option<Self> {
        let &[l0, l1, l2, kind, flags, s0, s1, s2, s3, ..] = bytes else {
            return None;
        };
        Some(FrameHeader {
            len: usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2),
            kind,
            flags,
            stream: u32::from_be_bytes([s0, s1, s2, s3]) & 0x7fff_ffff,
        })
    }
}

/// How far the connection's first stream (that of its first HEADERS frame) has been read.
enum FirstStream {
    /// No HEADERS frame yet.
    Awaited,
    /// Its header block is split over CONTINUATION frames: the fragments so far.
    HeaderBlock {
        stream: u32,
        end_stream: bool,
        block: Vec<u8>,
    },
    /// An ADS stream: its first gRPC message (prefix included) so far.
    Message {
        stream: u32,
        method: AdsMethod,
        message: Vec<u8>,
    },
    /// The verdict is known; nothing more to read.
    Settled,
}

/// What the first stream's header block says.
enum Route {
    Ads(AdsMethod),
    Other(String),
}

impl FirstStream {
    /// RFC 9113 §6.10: a header block is contiguous; checked before any frame is handled
    /// (a SETTINGS ACK inside the first stream's block included).
    fn check_contiguous(&self, header: &FrameHeader) -> Result<(), String> {
        if let FirstStream::HeaderBlock { stream, .. } = self
            && (header.kind != kind::CONTINUATION || header.stream != *stream)
        {
            return Err(format!(
                "a frame of type {:#x} on stream {} inside stream {stream}'s header block",
                header.kind, header.stream
            ));
        }
        Ok(())
    }

    /// Follows the first stream through one frame: the verdict once it is known.
    fn on_frame(
        &mut self,
        header: &FrameHeader,
        payload: &[u8],
    ) -> Result<Option<Verdict>, String> {
        match header.kind {
            kind::HEADERS => self.on_headers(header, payload),
            kind::CONTINUATION => self.on_continuation(header, payload),
            kind::DATA => self.on_data(header, payload),
            kind::RST_STREAM if self.stream() == Some(header.stream) => {
                Ok(self.settle(Verdict::other("the first stream was reset")))
            }
            kind::GOAWAY if !matches!(self, FirstStream::Settled) => Ok(self.settle(
                Verdict::other("the client sent GOAWAY before its first request"),
            )),
            _ => Ok(None),
        }
    }

    /// The first stream's ID, once known and while it is followed.
    fn stream(&self) -> Option<u32> {
        match self {
            FirstStream::HeaderBlock { stream, .. } | FirstStream::Message { stream, .. } => {
                Some(*stream)
            }
            FirstStream::Awaited | FirstStream::Settled => None,
        }
    }

    fn settle(&mut self, verdict: Verdict) -> Option<Verdict> {
        *self = FirstStream::Settled;
        Some(verdict)
    }

    fn on_headers(
        &mut self,
        header: &FrameHeader,
        payload: &[u8],
    ) -> Result<Option<Verdict>, String> {
        match self {
            FirstStream::Awaited => {}
            // Trailers (or anything else) before the whole first message: no message.
            FirstStream::Message { stream, .. } if *stream == header.stream => {
                return Ok(self.settle(Verdict::other(
                    "the first stream ended before its first message",
                )));
            }
            _ => return Ok(None),
        }
        if header.stream.is_multiple_of(2) {
            return Err(format!(
                "HEADERS on stream {}, which a client cannot open",
                header.stream
            ));
        }
        let fragment = unpadded(header, payload, true)?;
        let end_stream = header.flags & flag::END_STREAM != 0;
        if header.flags & flag::END_HEADERS != 0 {
            let decided = route(fragment, end_stream)?;
            return Ok(self.enter(header.stream, decided));
        }
        *self = FirstStream::HeaderBlock {
            stream: header.stream,
            end_stream,
            block: fragment.to_vec(),
        };
        Ok(None)
    }

    fn on_continuation(
        &mut self,
        header: &FrameHeader,
        payload: &[u8],
    ) -> Result<Option<Verdict>, String> {
        // `check_contiguous` made sure a CONTINUATION here belongs to the open block, if any.
        let FirstStream::HeaderBlock {
            stream,
            end_stream,
            block,
        } = self
        else {
            return Ok(None);
        };
        block.extend_from_slice(payload);
        if header.flags & flag::END_HEADERS == 0 {
            return Ok(None);
        }
        let (stream, decided) = (*stream, route(block, *end_stream)?);
        Ok(self.enter(stream, decided))
    }

    /// Goes on from the first stream's whole header block.
    fn enter(&mut self, stream: u32, route: Route) -> Option<Verdict> {
        match route {
            Route::Ads(method) => {
                *self = FirstStream::Message {
                    stream,
                    method,
                    message: Vec::new(),
                };
                None
            }
            Route::Other(why) => self.settle(Verdict::Other { why }),
        }
    }

    fn on_data(&mut self, header: &FrameHeader, payload: &[u8]) -> Result<Option<Verdict>, String> {
        let FirstStream::Message {
            stream,
            method,
            message,
        } = self
        else {
            return Ok(None);
        };
        if *stream != header.stream {
            return Ok(None);
        }
        let data = unpadded(header, payload, false)?;
        let verdict = match gather(message, data) {
            Gathered::Whole(request) => Some(node_verdict(*method, request)),
            Gathered::Compressed => Some(Verdict::other("the first ADS message is compressed")),
            Gathered::Partial if header.flags & flag::END_STREAM != 0 => Some(Verdict::other(
                "the first stream ended before its first message",
            )),
            Gathered::Partial => None,
        };
        Ok(verdict.and_then(|verdict| self.settle(verdict)))
    }
}

/// A HEADERS or DATA frame's payload without its padding (and, for HEADERS, priority
/// fields): RFC 9113 §6.1, §6.2.
fn unpadded<'a>(
    header: &FrameHeader,
    payload: &'a [u8],
    is_headers: bool,
) -> Result<&'a [u8], String> {
    let mut rest = payload;
    let mut pad_len = 0;
    if header.flags & flag::PADDED != 0 {
        let Some((&len, after)) = rest.split_first() else {
            return Err(format!(
                "a PADDED frame on stream {} with no pad length",
                header.stream
            ));
        };
        pad_len = usize::from(len);
        rest = after;
    }
    if is_headers && header.flags & flag::PRIORITY != 0 {
        // Stream dependency (4 bytes) and weight (1 byte).
        rest = rest.get(5..).ok_or_else(|| {
            format!(
                "a HEADERS frame on stream {} too short for its priority",
                header.stream
            )
        })?;
    }
    let Some(kept) = rest.len().checked_sub(pad_len) else {
        // RFC 9113: padding as long as the payload is a PROTOCOL_ERROR.
        return Err(format!(
            "a frame on stream {} padded past its end",
            header.stream
        ));
    };
    Ok(&rest[..kept])
}

/// Which method the first stream's header block calls, if ADS (its `:path` and
/// `grpc-encoding`, read by [`hpack::read`]).
fn route(block: &[u8], end_stream: bool) -> Result<Route, String> {
    let known = Known::get();
    let Headers { path, encoding } = hpack::read(block, &known.path_name, &known.encoding_name)?;
    let Some(path) = path else {
        return Ok(Route::Other("the first stream has no :path".into()));
    };
    let method = if path.is(&known.sotw) {
        AdsMethod::Sotw
    } else if path.is(&known.delta) {
        AdsMethod::Delta
    } else {
        return Ok(Route::Other(format!(
            "the first stream calls {}, not ADS",
            path.shown()
        )));
    };
    if let Some(encoding) = encoding.filter(|e| !e.is(&known.identity)) {
        return Ok(Route::Other(format!(
            "the first ADS stream is compressed (grpc-encoding {})",
            encoding.shown()
        )));
    }
    if end_stream {
        return Ok(Route::Other(
            "the first ADS stream ended without a message".into(),
        ));
    }
    Ok(Route::Ads(method))
}

/// The strings the prelude looks for.
struct Known {
    path_name: Spelled,
    encoding_name: Spelled,
    sotw: Spelled,
    delta: Spelled,
    identity: Spelled,
}

impl Known {
    fn get() -> &'static Known {
        static KNOWN: std::sync::OnceLock<Known> = std::sync::OnceLock::new();
        KNOWN.get_or_init(|| Known {
            path_name: Spelled::new(":path"),
            encoding_name: Spelled::new("grpc-encoding"),
            sotw: Spelled::new(SOTW_PATH),
            delta: Spelled::new(DELTA_PATH),
            identity: Spelled::new("identity"),
        })
    }
}

/// The verdict on an ADS stream's first request: whose node it names.
fn node_verdict(method: AdsMethod, request: &[u8]) -> Verdict {
    match node_id(request, method.node_field()) {
        Ok(Some(node_id)) if !node_id.is_empty() => Verdict::Ads { method, node_id },
        Ok(_) => Verdict::other("first request names no node"),
        Err(why) => Verdict::Other {
            why: format!("the first ADS request cannot be read: {why}"),
        },
    }
}

mod hpack;
mod message;

#[cfg(test)]
mod tests;
