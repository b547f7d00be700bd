//! gRPC message framing over HTTP/2 DATA chunks, without I/O.
//!
//! A message that arrives within one chunk is a slice of it; one split across chunks is
//! gathered into a buffer of exactly its size, freed once the message is handed out, so an
//! idle stream holds no buffer (tonic's `Streaming` keeps one as large as the largest
//! message it ever received).

use bytes::{Buf, Bytes, BytesMut};

pub const HEADER_LEN: usize = 5;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("compressed gRPC message (flag {0}): compression was not requested")]
    Compressed(u8),
    #[error("gRPC message of {len} bytes exceeds the limit of {max}")]
    TooLarge { len: usize, max: usize },
}

/// Reassembles gRPC messages from body chunks.
#[derive(Debug)]
pub struct Framer {
    max: usize,
    header: [u8; HEADER_LEN],
    header_len: usize,
    /// The message being gathered, once its header is known.
    body: Option<BytesMut>,
    want: usize,
}

impl Framer {
    pub fn new(max_message: usize) -> Self {
        Framer {
            max: max_message,
            header: [0; HEADER_LEN],
            header_len: 0,
            body: None,
            want: 0,
        }
    }

    /// Feeds one chunk; calls `out` with every message it completes (without its header).
    pub fn push(&mut self, mut chunk: Bytes, mut out: impl FnMut(Bytes)) -> Result<(), FrameError> {
        while chunk.has_remaining() {
            if let Some(body) = &mut self.body {
                let take = (self.want - body.len()).min(chunk.len());
                body.extend_from_slice(&chunk.split_to(take));
                if body.len() == self.want {
                    let done = self.body.take().unwrap_or_default();
                    out(done.freeze());
                }
                continue;
            }
            if self.header_len < HEADER_LEN {
                let take = (HEADER_LEN - self.header_len).min(chunk.len());
                self.header[self.header_len..self.header_len + take]
                    .copy_from_slice(&chunk.split_to(take));
                self.header_len += take;
                if self.header_len < HEADER_LEN {
                    return Ok(());
                }
            }
            // A full header: start the message.
            self.header_len = 0;
            if self.header[0] != 0 {
                return Err(FrameError::Compressed(self.header[0]));
            }
            let len = u32::from_be_bytes([
                self.header[1],
                self.header[2],
                self.header[3],
                self.header[4],
            ]) as usize;
            if len > self.max {
                return Err(FrameError::TooLarge { len, max: self.max });
            }
            if chunk.len() >= len {
                out(chunk.split_to(len));
            } else {
                self.want = len;
                let mut body = BytesMut::with_capacity(len);
                body.extend_from_slice(&chunk);
                chunk.clear();
                self.body = Some(body);
            }
        }
        Ok(())
    }

    /// Whether a message is partly received.
    pub fn is_mid_message(&self) -> bool {
        self.header_len > 0 || self.body.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(msg: &[u8]) -> Vec<u8> {
        let mut v = vec![0];
        v.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        v.extend_from_slice(msg);
        v
    }

    fn feed(f: &mut Framer, chunks: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        for c in chunks {
            f.push(Bytes::from(c), |m| got.push(m.to_vec())).unwrap();
        }
        got
    }

    #[test]
    fn whole_split_and_joined_messages() {
        let mut stream = frame(b"hello");
        stream.extend(frame(b""));
        stream.extend(frame(b"world!"));
        // Every way of cutting the stream in two gives the same messages.
        for cut in 0..=stream.len() {
            let mut f = Framer::new(1024);
            let got = feed(&mut f, vec![stream[..cut].to_vec(), stream[cut..].to_vec()]);
            assert_eq!(
                got,
                [b"hello".to_vec(), vec![], b"world!".to_vec()],
                "cut {cut}"
            );
            assert!(!f.is_mid_message());
        }
        // Byte by byte.
        let mut f = Framer::new(1024);
        let got = feed(&mut f, stream.iter().map(|b| vec![*b]).collect());
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn rejects_compressed_and_oversized() {
        let mut f = Framer::new(4);
        assert_eq!(
            f.push(Bytes::from(frame(b"hello")), |_| {}),
            Err(FrameError::TooLarge { len: 5, max: 4 })
        );
        let mut f = Framer::new(1024);
        let mut c = frame(b"x");
        c[0] = 1;
        assert_eq!(
            f.push(Bytes::from(c), |_| {}),
            Err(FrameError::Compressed(1))
        );
    }
}
