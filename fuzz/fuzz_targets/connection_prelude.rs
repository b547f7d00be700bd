//! Arbitrary bytes as the start of a proxy's HTTP/2 connection, through the edge's prelude
//! reader (`edge/src/ads/transport/prelude.rs`): the preface, frames, the first stream's
//! HPACK header block and its first gRPC message, read for the verdict (the first ADS
//! stream's node ID, or another stream, or not HTTP/2 we can follow) and the bytes to
//! replay, the client's ACK of our SETTINGS cut out.
//!
//! The first byte chooses the chunk cuts (the socket's reads), the limit on bytes read and
//! the start: half the inputs (bit 0) begin with a valid client preface and an empty client
//! SETTINGS frame, and of those half (bit 7) also with the ACK, so the fuzzer spends its
//! time in frames, HPACK and protobuf rather than in finding the preface. The rest is the
//! connection's bytes. `read_prelude` checks the replay (the bytes read less exactly that
//! ACK frame), the limit and that `Invalid` stays so; here, that the reader says the same
//! thing however the bytes are cut into reads.

#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_edge::ads::fuzzing::{PreludeOutcome, PreludeProgress, read_prelude};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty client SETTINGS frame.
const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
/// The client's ACK of the edge's empty SETTINGS.
const SETTINGS_ACK: [u8; 9] = [0, 0, 0, 4, 1, 0, 0, 0, 0];

/// Cuts `bytes` into chunks of `size` bytes (0: one chunk).
fn chunks(bytes: &[u8], size: usize) -> Vec<Vec<u8>> {
    if size == 0 {
        return vec![bytes.to_vec()];
    }
    bytes.chunks(size).map(<[u8]>::to_vec).collect()
}

/// The part of an `Invalid` reason that does not depend on the cuts: the limit's message
/// says how many bytes were read when it was certain, which does.
fn reason(why: &str) -> (bool, &str) {
    match why
        .strip_prefix("read ")
        .and_then(|r| r.split_once(" bytes without "))
    {
        Some((_, missing)) => (true, missing),
        None => (false, why),
    }
}

/// Whole and cut reads of the same bytes must agree.
fn agree(whole: &PreludeOutcome, cut: &PreludeOutcome, size: usize) {
    let context = || format!("chunks of {size}: {cut:?} vs whole {whole:?}");
    assert_eq!(whole.verdict, cut.verdict, "{}", context());
    assert_eq!(whole.acked, cut.acked, "{}", context());
    match (&whole.progress, &cut.progress) {
        (PreludeProgress::NeedMore, PreludeProgress::NeedMore) => {
            // Both read everything.
            assert_eq!(whole.replay, cut.replay, "{}", context());
        }
        (PreludeProgress::Ready, PreludeProgress::Ready) => {
            // The cut read stopped at the chunk that made it ready.
            assert!(whole.replay.starts_with(&cut.replay), "{}", context());
        }
        (PreludeProgress::Invalid(w), PreludeProgress::Invalid(c)) => {
            assert!(whole.replay.starts_with(&cut.replay), "{}", context());
            let (w_limit, w_why) = reason(w);
            let (c_limit, c_why) = reason(c);
            // The limit can be certain from a chunk before the bytes that break a rule
            // arrive (the rest of the preface, a frame header too large): only then may
            // the reasons differ.
            let may_differ = c_limit
                && !w_limit
                && (w_why.contains("not an HTTP/2 client preface")
                    || w_why.contains("larger than the"));
            assert!(
                (w_limit, w_why) == (c_limit, c_why) || may_differ,
                "{}",
                context()
            );
        }
        _ => panic!("{}", context()),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let size = [0, 1, 2, 3, 7, 9, 64, 1000][usize::from(control >> 1 & 7)];
    let max_bytes = [0, 24, 64, 256, 1024, 4096, 16_384, 1 << 20][usize::from(control >> 4 & 7)];
    let mut bytes = Vec::with_capacity(rest.len() + 42);
    if control & 1 != 0 {
        bytes.extend_from_slice(PREFACE);
        bytes.extend_from_slice(&SETTINGS);
        if control & 0x80 != 0 {
            bytes.extend_from_slice(&SETTINGS_ACK);
        }
    }
    bytes.extend_from_slice(rest);
    let whole = read_prelude(chunks(&bytes, 0), max_bytes);
    let cut = read_prelude(chunks(&bytes, size), max_bytes);
    agree(&whole, &cut, size);
});
