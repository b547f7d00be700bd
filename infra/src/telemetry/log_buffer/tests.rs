use super::*;

/// What was written out, and in how many writes.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<(Vec<u8>, usize)>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut s = lock(&self.0);
        s.0.extend_from_slice(buf);
        s.1 += 1;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Sink {
    fn text(&self) -> (String, usize) {
        let s = lock(&self.0);
        (String::from_utf8(s.0.clone()).unwrap(), s.1)
    }
}

/// `n` lines from each of `threads` loggers, each written in several calls.
fn log_from_threads(buffer: &LogBuffer, threads: usize, n: usize) {
    let loggers: Vec<_> = (0..threads)
        .map(|t| {
            let buffer = buffer.clone();
            std::thread::spawn(move || {
                for i in 0..n {
                    writeln!(buffer.make_writer(), "{t} {i}").unwrap();
                }
            })
        })
        .collect();
    for l in loggers {
        l.join().unwrap();
    }
}

fn lines_of(text: &str, logger: usize) -> Vec<usize> {
    text.lines()
        .map(|l| l.split_once(' ').unwrap())
        .filter(|(who, _)| *who == logger.to_string())
        .map(|(_, i)| i.parse().unwrap())
        .collect()
}

#[test]
fn lines_stay_whole_and_in_order_and_go_out_together() {
    let sink = Sink::default();
    // Small enough that loggers write it out themselves many times.
    let buffer = LogBuffer::new(sink.clone(), 4096);
    log_from_threads(&buffer, 4, 2_000);
    let (before, _) = sink.text();
    buffer.flush();
    let (text, writes) = sink.text();
    assert!(
        text.len() > before.len(),
        "the last lines waited for the flush"
    );
    for t in 0..4 {
        assert_eq!(
            lines_of(&text, t),
            (0..2_000).collect::<Vec<_>>(),
            "logger {t}"
        );
    }
    assert!(writes < 200, "{writes} writes for 8,000 lines");
}

#[test]
fn the_flusher_writes_lines_out_without_a_flush_and_ends_with_the_buffer() {
    let sink = Sink::default();
    let buffer = LogBuffer::new(sink.clone(), 1 << 20);
    buffer.spawn_flusher(Duration::from_millis(5)).unwrap();
    writeln!(buffer.make_writer(), "0 0").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sink.text().0.is_empty() {
        assert!(std::time::Instant::now() < deadline, "never written out");
        // A plain test thread: no runtime to block.
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(sink.text().0, "0 0\n");
    let weak = Arc::downgrade(&buffer.inner);
    drop(buffer);
    // The flusher holds the buffer only while it writes out (a tick may be under way as
    // the last clone goes): the buffer is gone once that tick ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while weak.strong_count() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the flusher kept the buffer"
        );
        #[allow(clippy::disallowed_methods)]
        std::thread::sleep(Duration::from_millis(1));
    }
}
