use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Wake;

/// What reached the connection below: each write as it was made.
#[derive(Default)]
struct Recorded {
    writes: Vec<Vec<u8>>,
    flushes: usize,
    shut: bool,
    /// Writes wait (the socket's buffer is full).
    full: bool,
}

impl AsyncWrite for Recorded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.full {
            return Poll::Pending;
        }
        self.writes.push(buf.to_vec());
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.flushes += 1;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shut = true;
        Poll::Ready(Ok(()))
    }
}

#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

struct Harness {
    conn: Coalesced<Recorded>,
    wakes: Arc<Wakes>,
}

impl Harness {
    fn new(limit: usize) -> Self {
        Harness {
            conn: Coalesced::new(Recorded::default(), limit),
            wakes: Arc::default(),
        }
    }

    fn cx<T>(&mut self, f: impl FnOnce(Pin<&mut Coalesced<Recorded>>, &mut Context<'_>) -> T) -> T {
        let waker = self.wakes.clone().into();
        let mut cx = Context::from_waker(&waker);
        f(Pin::new(&mut self.conn), &mut cx)
    }

    fn write(&mut self, bytes: &[u8]) -> Poll<io::Result<usize>> {
        self.cx(|c, cx| c.poll_write(cx, bytes))
    }

    fn flush(&mut self) -> Poll<io::Result<()>> {
        self.cx(|c, cx| c.poll_flush(cx))
    }

    /// As h2 sends a frame: written, then flushed.
    fn frame(&mut self, bytes: &[u8]) {
        assert!(matches!(self.write(bytes), Poll::Ready(Ok(n)) if n == bytes.len()));
        assert!(matches!(self.flush(), Poll::Ready(Ok(()))));
    }

    fn written(&self) -> Vec<usize> {
        self.conn.io.writes.iter().map(Vec::len).collect()
    }

    fn wakes(&self) -> usize {
        self.wakes.0.load(Ordering::Relaxed)
    }
}

#[test]
fn frames_flushed_one_by_one_go_out_together_once_nothing_follows() {
    let mut h = Harness::new(64 * 1024);
    for i in 0..3u8 {
        h.frame(&[i; 16 * 1024]);
    }
    assert!(
        h.written().is_empty(),
        "nothing written while frames follow"
    );
    assert_eq!(
        h.wakes(),
        3,
        "each put-off flush wakes the task to come back"
    );
    // The task comes back: a flush with nothing written since.
    assert!(matches!(h.flush(), Poll::Ready(Ok(()))));
    assert_eq!(h.written(), [48 * 1024]);
    let mut expected = Vec::new();
    for i in 0..3u8 {
        expected.extend_from_slice(&[i; 16 * 1024]);
    }
    assert_eq!(h.conn.io.writes[0], expected, "the bytes in order");
    assert_eq!(h.conn.io.flushes, 1);
    assert_eq!(h.conn.buf.capacity(), 0, "the buffer is freed once written");
}

#[test]
fn a_full_buffer_goes_out_in_one_write() {
    let mut h = Harness::new(32 * 1024);
    h.frame(&[1; 16 * 1024]);
    assert!(h.written().is_empty());
    h.frame(&[2; 16 * 1024]);
    assert_eq!(h.written(), [32 * 1024], "full: written at its flush");
    h.frame(&[3; 100]);
    assert!(matches!(h.flush(), Poll::Ready(Ok(()))));
    assert_eq!(h.written(), [32 * 1024, 100]);
}

#[test]
fn a_write_larger_than_the_buffer_goes_out_as_it_is() {
    let mut h = Harness::new(16 * 1024);
    assert!(matches!(h.write(&[7; 40_000]), Poll::Ready(Ok(40_000))));
    assert_eq!(h.written(), [40_000]);
    assert_eq!(h.conn.buf.capacity(), 0, "not copied");
    // Only what fits is taken of a write that would overfill the buffer.
    h.frame(&[1; 10_000]);
    assert!(matches!(h.write(&[2; 10_000]), Poll::Ready(Ok(6_384))));
}

#[test]
fn a_trickle_of_small_writes_waits_for_at_most_so_many_flushes() {
    let mut h = Harness::new(64 * 1024);
    for _ in 0..MAX_DEFERRED {
        h.frame(&[0; 10]);
    }
    assert!(h.written().is_empty());
    h.frame(&[0; 10]);
    assert_eq!(h.written(), [10 * (MAX_DEFERRED as usize + 1)]);
}

#[test]
fn a_full_socket_holds_the_flush_and_loses_nothing() {
    let mut h = Harness::new(64 * 1024);
    h.frame(b"hello ");
    h.conn.io.full = true;
    assert!(h.flush().is_pending(), "the flush waits for the socket");
    h.conn.io.full = false;
    assert!(matches!(h.flush(), Poll::Ready(Ok(()))));
    assert_eq!(h.conn.io.writes, [b"hello ".to_vec()]);
}

#[test]
fn shutdown_writes_what_is_buffered_first() {
    let mut h = Harness::new(64 * 1024);
    h.frame(b"goaway");
    assert!(h.written().is_empty());
    assert!(matches!(
        h.cx(|c, cx| c.poll_shutdown(cx)),
        Poll::Ready(Ok(()))
    ));
    assert_eq!(h.conn.io.writes, [b"goaway".to_vec()]);
    assert!(h.conn.io.shut);
}

#[test]
fn without_a_limit_writes_and_flushes_pass_through() {
    let mut h = Harness::new(0);
    h.frame(b"a");
    h.frame(b"b");
    assert_eq!(h.written(), [1, 1]);
    assert_eq!(h.conn.io.flushes, 2);
    assert_eq!(h.wakes(), 0);
}
