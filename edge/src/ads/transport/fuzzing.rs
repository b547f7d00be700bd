//! The request path below tonic, without I/O, for the `cargo fuzz` targets in `fuzz/`
//! (feature `fuzzing`, never on in a build that serves): HTTP/2 DATA chunks through the
//! gRPC deframer and prost decoding, exactly as a stream task reads them; and a
//! connection's first bytes through the prelude reader (`read_prelude`), as the accept
//! loop reads them.

use super::inbound::Inbound;
use bytes::Bytes;
use futures::Stream;
use http_body::{Body, Frame};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tonic::Status;

/// A request body whose DATA chunks are all there.
struct Chunks(VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(c))))
    }
}

/// Every request (or refusal) the stream would read from `chunks`, with at most
/// `max_message` bytes a request. Checks on the way that the stream never holds more than
/// the chunk it reads plus one request, the bound the transport promises per stream.
pub fn decode_requests<T: prost::Message + Default>(
    chunks: impl IntoIterator<Item = Bytes>,
    max_message: usize,
) -> Vec<Result<T, Status>> {
    let chunks: VecDeque<Bytes> = chunks.into_iter().collect();
    let largest = chunks.iter().map(Bytes::len).max().unwrap_or(0);
    let mut inbound = Inbound::<_, T>::new(Chunks(chunks), max_message);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    while let Poll::Ready(Some(r)) = Pin::new(&mut inbound).poll_next(&mut cx) {
        let held = inbound.held();
        assert!(
            held <= largest + max_message,
            "a stream holds {held} bytes between requests (largest chunk {largest}, \
             limit {max_message})"
        );
        out.push(r);
    }
    out
}

/// How [`read_prelude`] ended (`prelude::Progress`, outside the crate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreludeProgress {
    /// Every chunk was read and more bytes are wanted.
    NeedMore,
    Ready,
    /// Why, as the prelude says it.
    Invalid(String),
}

/// Which ADS method the first stream calls (`prelude::AdsMethod`, outside the crate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreludeMethod {
    Sotw,
    Delta,
}

/// What the connection's first stream is (`prelude::Verdict`, outside the crate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreludeVerdict {
    Ads {
        method: PreludeMethod,
        node_id: String,
    },
    Other {
        why: String,
    },
}

/// What the prelude reader made of a connection's first bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreludeOutcome {
    pub progress: PreludeProgress,
    pub verdict: Option<PreludeVerdict>,
    /// Whether the client's ACK of our SETTINGS was seen (and cut out of `replay`).
    pub acked: bool,
    /// How many of the connection's bytes were read (whole chunks, up to the one after
    /// which the prelude said `Ready` or `Invalid`).
    pub read: usize,
    /// The bytes to replay: those read, less the cut ACK.
    pub replay: Vec<u8>,
}

/// The client's ACK of the edge's empty SETTINGS: the one frame the prelude cuts.
const SETTINGS_ACK: [u8; 9] = [0, 0, 0, 4, 1, 0, 0, 0, 0];

/// Reads a connection's first bytes, arriving as `chunks` (one read each), through the
/// prelude reader (`transport/prelude.rs`) with a limit of `max_bytes`, as the accept loop
/// does: each chunk appended to its buffer, then `advance()`, until `Ready` or `Invalid`.
///
/// Checks on the way (a panic is a fuzz failure):
/// - the replay is the bytes read, unchanged, when no ACK was cut; when one was, it lacks
///   exactly the 9 bytes of the connection's first SETTINGS frame with the ACK flag (frames
///   walked from the preface on, as sent), which are `[0,0,0,4,1,0,0,0,0]` but for flags
///   and the stream's reserved bit, both ignored (RFC 9113 §4.1);
/// - `Ready` has a verdict and the ACK, and was decidable from the first `max_bytes`
///   bytes alone (the chunk it came with may end past them: a read takes what is there);
/// - still waiting (`NeedMore`) means fewer than `max_bytes` bytes read;
/// - `Invalid` stays `Invalid`, with the same reason.
pub fn read_prelude(chunks: impl IntoIterator<Item = Vec<u8>>, max_bytes: usize) -> PreludeOutcome {
    let (outcome, input) = read_unchecked(chunks, max_bytes);
    check_replay(&outcome, &input);
    match &outcome.progress {
        PreludeProgress::Ready => {
            assert!(
                outcome.verdict.is_some() && outcome.acked,
                "Ready without a verdict and the ACK: {outcome:?}"
            );
            if outcome.read > max_bytes {
                let (within, _) = read_unchecked([input[..max_bytes].to_vec()], max_bytes);
                assert!(
                    within.progress == PreludeProgress::Ready
                        && within.verdict == outcome.verdict
                        && within.acked,
                    "Ready after {} bytes but not from the first {max_bytes} (the limit): \
                     {within:?}",
                    outcome.read
                );
            }
        }
        PreludeProgress::NeedMore => assert!(
            outcome.read < max_bytes,
            "waiting for more after {} bytes, with a limit of {max_bytes}",
            outcome.read
        ),
        PreludeProgress::Invalid(_) => {}
    }
    outcome
}

/// [`read_prelude`] without its checks but the stickiness of `Invalid`; also gives every
/// byte read.
fn read_unchecked(
    chunks: impl IntoIterator<Item = Vec<u8>>,
    max_bytes: usize,
) -> (PreludeOutcome, Vec<u8>) {
    use super::prelude::{AdsMethod, Prelude, Progress, Verdict};
    let mut prelude = Prelude::new(max_bytes);
    let mut input = Vec::new();
    let mut progress = None;
    for chunk in chunks {
        input.extend_from_slice(&chunk);
        prelude.buffer_mut().extend_from_slice(&chunk);
        let now = prelude.advance();
        let done = now != Progress::NeedMore;
        progress = Some(now);
        if done {
            break;
        }
    }
    // No chunk at all: what the reader says of nothing.
    let progress = progress.unwrap_or_else(|| prelude.advance());
    if let Progress::Invalid(why) = &progress {
        prelude.buffer_mut().extend_from_slice(&SETTINGS_ACK);
        assert_eq!(
            prelude.advance(),
            progress,
            "Invalid ({why}) did not stay Invalid"
        );
        let len = prelude.buffer_mut().len();
        prelude.buffer_mut().truncate(len - SETTINGS_ACK.len());
    }
    let verdict = prelude.verdict().map(|verdict| match verdict {
        Verdict::Ads { method, node_id } => PreludeVerdict::Ads {
            method: match method {
                AdsMethod::Sotw => PreludeMethod::Sotw,
                AdsMethod::Delta => PreludeMethod::Delta,
            },
            node_id: node_id.clone(),
        },
        Verdict::Other { why } => PreludeVerdict::Other { why: why.clone() },
    });
    let outcome = PreludeOutcome {
        progress: match progress {
            Progress::NeedMore => PreludeProgress::NeedMore,
            Progress::Ready => PreludeProgress::Ready,
            Progress::Invalid(why) => PreludeProgress::Invalid(why),
        },
        verdict,
        acked: prelude.acked(),
        read: input.len(),
        replay: prelude.into_replay().to_vec(),
    };
    (outcome, input)
}

/// The replay is `input` as read, less exactly the first SETTINGS ACK frame if it was cut:
/// empty, on stream 0.
fn check_replay(outcome: &PreludeOutcome, input: &[u8]) {
    if !outcome.acked {
        assert!(
            outcome.replay == input,
            "no ACK was cut, yet the replay ({} bytes) is not the {} bytes read",
            outcome.replay.len(),
            input.len()
        );
        return;
    }
    let at = first_settings_ack(input).unwrap_or_else(|| {
        panic!(
            "an ACK was cut, yet the {} bytes read hold no SETTINGS ACK frame",
            input.len()
        )
    });
    // RFC 9113 §4.1: unknown flags and the stream ID's reserved bit are ignored, so the cut
    // frame is `[0,0,0,4,1,0,0,0,0]` give or take those bits.
    let cut = input.get(at..at + SETTINGS_ACK.len()).unwrap_or_else(|| {
        panic!("an ACK was cut, yet the SETTINGS ACK frame at {at} is cut short")
    });
    assert!(
        cut[..4] == SETTINGS_ACK[..4] && cut[5] & 0x7f == 0 && cut[6..] == SETTINGS_ACK[6..],
        "the cut SETTINGS ACK frame at {at} ({cut:02x?}) is not an empty one on stream 0"
    );
    let expected = [&input[..at], &input[at + SETTINGS_ACK.len()..]].concat();
    assert!(
        outcome.replay == expected,
        "the replay ({} bytes) is not the {} bytes read less the 9 at {at}",
        outcome.replay.len(),
        input.len()
    );
}

/// Where the first frame that is a SETTINGS with the ACK flag starts, walking `input`'s
/// frames from the end of the 24-byte client preface on.
fn first_settings_ack(input: &[u8]) -> Option<usize> {
    let mut at = 24;
    while let Some(&[l0, l1, l2, kind, flags]) = input.get(at..at + 5) {
        if kind == 4 && flags & 1 != 0 {
            return Some(at);
        }
        let len = usize::from(l0) << 16 | usize::from(l1) << 8 | usize::from(l2);
        at += 9 + len;
    }
    None
}
