//! gRPC length-prefixed messages (a flag byte, a big-endian `u32` length, the bytes) cut
//! out of HTTP/2 DATA chunks, without I/O.
//!
//! A message that lies within one chunk is a slice of it (no copy). Only a message split
//! across chunks is gathered, into a buffer that grows with what arrived (never past the
//! message's size, at most twice what arrived) and leaves with the message: between
//! messages the deframer holds nothing but its 5-byte header (tonic's decoder keeps a
//! buffer as large as the largest request the stream ever received). The size a prefix
//! claims is not allocated up front: 5 bytes would otherwise make every stream hold the
//! request limit (4 MiB by default) for nothing.

use bytes::{Buf, Bytes};
use tonic::Status;

/// The gRPC message prefix: compressed flag and length.
pub(crate) const PREFIX_LEN: usize = 5;

/// A request the stream cannot take.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FrameError {
    #[error(
        "received a compressed gRPC message (flag {0}), but this server does not accept \
         request compression; turn off gRPC compression on the xDS client"
    )]
    Compressed(u8),
    #[error(
        "request of {len} bytes exceeds the limit of {max} bytes \
         (SHOAL_XDS_MAX_REQUEST_BYTES)"
    )]
    TooLarge { len: usize, max: usize },
    #[error("the request stream ended inside a gRPC message")]
    Truncated,
}

impl FrameError {
    /// The client's mistakes, told as such: compression the server does not take is
    /// UNIMPLEMENTED (gRPC's code for it, and the header check's), a request cut short
    /// INVALID_ARGUMENT. gRPC's libraries answer INTERNAL for a request they cannot
    /// parse; that reads as the server's fault, so this server does not.
    pub(crate) fn to_status(&self) -> Status {
        match self {
            FrameError::Compressed(_) => Status::unimplemented(self.to_string()),
            FrameError::Truncated => Status::invalid_argument(self.to_string()),
            FrameError::TooLarge { .. } => Status::resource_exhausted(self.to_string()),
        }
    }
}

/// Reassembles gRPC messages from body chunks.
#[derive(Debug)]
pub(crate) struct Deframer {
    max: usize,
    header: [u8; PREFIX_LEN],
    header_len: usize,
    /// The split message being gathered, once its header is known (`gather`).
    partial: Option<Vec<u8>>,
    want: usize,
}

impl Deframer {
    /// Accepts messages up to `max_message` bytes.
    pub(crate) fn new(max_message: usize) -> Self {
        Deframer {
            max: max_message,
            header: [0; PREFIX_LEN],
            header_len: 0,
            partial: None,
            want: 0,
        }
    }

    /// Takes bytes from `chunk` until one message is complete and returns it (without its
    /// prefix); `None` when `chunk` ran out first (what it held is kept for the next one).
    pub(crate) fn next(&mut self, chunk: &mut Bytes) -> Result<Option<Bytes>, FrameError> {
        if let Some(partial) = &mut self.partial {
            let take = (self.want - partial.len()).min(chunk.len());
            gather(partial, &chunk[..take], self.want);
            chunk.advance(take);
            if partial.len() < self.want {
                return Ok(None);
            }
            return Ok(self.partial.take().map(Bytes::from));
        }
        if self.header_len < PREFIX_LEN {
            let take = (PREFIX_LEN - self.header_len).min(chunk.len());
            self.header[self.header_len..self.header_len + take].copy_from_slice(&chunk[..take]);
            chunk.advance(take);
            self.header_len += take;
            if self.header_len < PREFIX_LEN {
                return Ok(None);
            }
        }
        // A whole prefix: start the message.
        self.header_len = 0;
        if self.header[0] != 0 {
            return Err(FrameError::Compressed(self.header[0]));
        }
        let [_, len @ ..] = self.header;
        let len = u32::from_be_bytes(len) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge { len, max: self.max });
        }
        if chunk.len() >= len {
            return Ok(Some(chunk.split_to(len)));
        }
        let mut partial = Vec::new();
        gather(&mut partial, chunk, len);
        chunk.clear();
        self.want = len;
        self.partial = Some(partial);
        Ok(None)
    }

    /// Whether a message is partly received.
    pub(crate) fn is_mid_message(&self) -> bool {
        self.header_len > 0 || self.partial.is_some()
    }

    /// Bytes held for a split message.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn held(&self) -> usize {
        self.partial.as_ref().map_or(0, |p| p.capacity())
    }
}

/// Appends `bytes` to a message of `want` bytes being gathered: the buffer doubles (so
/// copies stay linear) but never past `want`, so the finished message fills it exactly
/// and what a stream holds follows what the client sent, not what its prefix claimed.
fn gather(partial: &mut Vec<u8>, bytes: &[u8], want: usize) {
    let need = partial.len() + bytes.len();
    if need > partial.capacity() {
        let capacity = need.max(partial.capacity() * 2).min(want);
        partial.reserve_exact(capacity - partial.len());
    }
    partial.extend_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ads::transport::tests::grpc as frame;

    fn feed(d: &mut Deframer, chunks: &[&[u8]]) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut got = Vec::new();
        for c in chunks {
            let mut chunk = Bytes::copy_from_slice(c);
            while let Some(m) = d.next(&mut chunk)? {
                got.push(m.to_vec());
            }
            assert!(chunk.is_empty());
        }
        Ok(got)
    }

    #[test]
    fn every_cut_of_the_stream_gives_the_same_messages() {
        let mut stream = frame(b"hello");
        stream.extend(frame(b""));
        stream.extend(frame(b"world!"));
        let want = [b"hello".to_vec(), vec![], b"world!".to_vec()];
        for cut in 0..=stream.len() {
            let mut d = Deframer::new(1024);
            let got = feed(&mut d, &[&stream[..cut], &stream[cut..]]).unwrap();
            assert_eq!(got, want, "cut at {cut}");
            assert!(!d.is_mid_message());
            assert_eq!(d.held(), 0);
        }
        let mut d = Deframer::new(1024);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(feed(&mut d, &bytes).unwrap(), want);
    }

    #[test]
    fn a_message_within_one_chunk_is_a_slice_of_it() {
        let mut chunk = Bytes::from(frame(b"in one piece"));
        let start = chunk.as_ptr() as usize + PREFIX_LEN;
        let msg = Deframer::new(1024).next(&mut chunk).unwrap().unwrap();
        assert_eq!(msg.as_ptr() as usize, start);
        assert!(chunk.is_empty());
    }

    #[test]
    fn a_split_message_is_gathered_at_its_exact_size_and_released() {
        let body = vec![7u8; 100_000];
        let stream = frame(&body);
        let mut d = Deframer::new(1 << 20);
        let mut first = Bytes::copy_from_slice(&stream[..16_384]);
        assert_eq!(d.next(&mut first).unwrap(), None);
        assert_eq!(d.held(), 16_384 - PREFIX_LEN);
        let mut rest = Bytes::copy_from_slice(&stream[16_384..]);
        let msg = d.next(&mut rest).unwrap().unwrap();
        assert_eq!(msg.len(), 100_000);
        assert_eq!(d.held(), 0);
        assert!(!d.is_mid_message());
    }

    /// Issue 17 ("every per-client allocation is bounded"): a prefix claiming the request
    /// limit made the stream allocate all of it at once, from 5 bytes.
    #[test]
    fn a_prefix_alone_holds_nothing_for_the_size_it_claims() {
        const MAX: usize = 4 * 1024 * 1024;
        let body: Vec<u8> = (0..MAX).map(|i| i as u8).collect();
        let stream = frame(&body);
        let mut d = Deframer::new(MAX);
        let mut prefix = Bytes::copy_from_slice(&stream[..PREFIX_LEN + 10]);
        assert_eq!(d.next(&mut prefix).unwrap(), None);
        assert!(d.held() <= 10, "holds {} bytes after 10 arrived", d.held());
        // What it holds follows what arrived (at most twice that), and the message is
        // whole at its exact size.
        let mut at = PREFIX_LEN + 10;
        let mut msg = None;
        for size in [1, 100, 16_384, 65_535].into_iter().cycle() {
            let end = (at + size).min(stream.len());
            let mut chunk = Bytes::copy_from_slice(&stream[at..end]);
            msg = d.next(&mut chunk).unwrap();
            at = end;
            if msg.is_some() {
                break;
            }
            let arrived = at - PREFIX_LEN;
            assert!(
                d.held() <= 2 * arrived,
                "holds {} after {arrived}",
                d.held()
            );
        }
        assert_eq!(msg.unwrap(), body);
        assert_eq!(d.held(), 0);
    }

    #[test]
    fn rejects_oversized_and_compressed_messages() {
        let mut d = Deframer::new(4);
        assert_eq!(
            feed(&mut d, &[&frame(b"hello")]),
            Err(FrameError::TooLarge { len: 5, max: 4 })
        );
        // Refused from its prefix alone: nothing is allocated for it.
        let mut d = Deframer::new(4);
        let mut prefix = Bytes::from_static(&[0, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            d.next(&mut prefix),
            Err(FrameError::TooLarge { .. })
        ));
        assert_eq!(d.held(), 0);
        let mut compressed = frame(b"x");
        compressed[0] = 1;
        assert_eq!(
            feed(&mut Deframer::new(1024), &[&compressed]),
            Err(FrameError::Compressed(1))
        );
        assert_eq!(
            FrameError::Compressed(1).to_status().code(),
            tonic::Code::Unimplemented
        );
        assert_eq!(
            FrameError::Truncated.to_status().code(),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            FrameError::TooLarge { len: 5, max: 4 }.to_status().code(),
            tonic::Code::ResourceExhausted
        );
    }
}
