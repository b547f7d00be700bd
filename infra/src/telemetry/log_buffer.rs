//! Log lines gathered in memory and written out together: every `--log-flush-interval`
//! by a thread of its own, or by the task whose line fills `--log-buffer-bytes`. Through
//! stdout's line buffer every line cost a `write` on the task that logged it (two per
//! proxy stream, as istiod logs them: 3% of the edge's CPU over a sync of 10,000
//! proxies); a thread woken per line would cost as much again in wake-ups.
//!
//! ```text
//!  fmt layer ── BufferedLine (the buffer's lock while one line is appended) ──► buffer
//!  buffer ──► stdout: every interval (flusher thread), when full (the logging task), on flush
//! ```
//!
//! No line is dropped and none interleaves with another. Lines are written in the order
//! they were logged: whoever writes the buffer out takes the output's lock before it lets
//! go of the buffer's. [`LogBuffer::flush`] (on dropping
//! [`Telemetry`](super::Telemetry) at the end of `main`) writes what is left; a process
//! that aborts loses at most one interval's lines.

use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tracing_subscriber::fmt::MakeWriter;

/// The bytes gathered before the task logging writes them out itself.
pub const DEFAULT_BUFFER_BYTES: usize = 256 * 1024;
/// How often the flusher writes out what was gathered.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// A process's log buffer over `out` (stdout); clones share it.
#[derive(Clone)]
pub struct LogBuffer {
    inner: Arc<Inner>,
}

struct Inner {
    lines: Mutex<Vec<u8>>,
    out: Mutex<Box<dyn Write + Send>>,
    max_bytes: usize,
}

impl std::fmt::Debug for LogBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogBuffer")
            .field("max_bytes", &self.inner.max_bytes)
            .finish_non_exhaustive()
    }
}

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl LogBuffer {
    /// A buffer of up to `max_bytes` (at least one line) over `out`; nothing flushes it on
    /// a timer until [`Self::spawn_flusher`].
    pub fn new<W: Write + Send + 'static>(out: W, max_bytes: usize) -> LogBuffer {
        LogBuffer {
            inner: Arc::new(Inner {
                lines: Mutex::new(Vec::new()),
                out: Mutex::new(Box::new(out)),
                max_bytes,
            }),
        }
    }

    /// Starts the thread that writes the buffer out every `every`, for as long as a clone
    /// of this buffer lives.
    pub fn spawn_flusher(&self, every: Duration) -> std::io::Result<()> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        std::thread::Builder::new()
            .name("log-flusher".into())
            .spawn(move || {
                loop {
                    // A thread of its own, never a tokio worker.
                    #[allow(clippy::disallowed_methods)]
                    std::thread::sleep(every);
                    let Some(inner) = weak.upgrade() else { return };
                    write_out(lock(&inner.lines), &inner.out);
                }
            })
            .map(drop)
    }

    /// Writes out every line logged so far.
    pub fn flush(&self) {
        write_out(lock(&self.inner.lines), &self.inner.out);
    }
}

/// Writes `lines` out and empties them. The output's lock is taken before the buffer's is
/// released, so whoever writes next writes later lines.
fn write_out(mut lines: MutexGuard<'_, Vec<u8>>, out: &Mutex<Box<dyn Write + Send>>) {
    if lines.is_empty() {
        return;
    }
    let mut out = lock(out);
    let taken = std::mem::take(&mut *lines);
    drop(lines);
    // As with stdout itself, a line that cannot be written is not the logger's error.
    let _ = out.write_all(&taken);
    let _ = out.flush();
}

/// One event's line, appended under the buffer's lock (the fmt layer formats it first,
/// then writes it whole); written out on drop if it filled the buffer.
pub struct BufferedLine<'a> {
    lines: Option<MutexGuard<'a, Vec<u8>>>,
    buffer: &'a LogBuffer,
}

impl Write for BufferedLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(lines) = &mut self.lines {
            lines.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for BufferedLine<'_> {
    fn drop(&mut self) {
        if let Some(lines) = self.lines.take()
            && lines.len() >= self.buffer.inner.max_bytes
        {
            write_out(lines, &self.buffer.inner.out);
        }
    }
}

impl<'a> MakeWriter<'a> for LogBuffer {
    type Writer = BufferedLine<'a>;

    fn make_writer(&'a self) -> BufferedLine<'a> {
        BufferedLine {
            lines: Some(lock(&self.inner.lines)),
            buffer: self,
        }
    }
}

#[cfg(test)]
mod tests;
