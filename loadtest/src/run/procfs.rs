//! Memory and CPU of a process, from /proc (Linux).

use serde::Serialize;
use std::sync::OnceLock;

/// One reading of a process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ProcSample {
    /// `VmHWM`: peak resident set since the process started.
    pub peak_rss_kib: u64,
    /// `VmRSS`.
    pub rss_kib: u64,
    /// utime + stime.
    pub cpu_s: f64,
}

/// Reads `/proc/<pid>` (`pid` may be `self`); `None` if the process is gone.
pub fn sample(pid: &str) -> Option<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Some(ProcSample {
        peak_rss_kib: kib("VmHWM:"),
        rss_kib: kib("VmRSS:"),
        cpu_s: cpu_seconds(&stat)?,
    })
}

/// utime + stime from a `/proc/<pid>/stat` line, in seconds.
fn cpu_seconds(stat: &str) -> Option<f64> {
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / clock_ticks())
}

/// `getconf CLK_TCK`, or 100.
fn clock_ticks() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t: &f64| *t > 0.0)
            .unwrap_or(100.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_names() {
        let line = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        let t = clock_ticks();
        assert_eq!(cpu_seconds(line), Some(300.0 / t));
    }

    #[test]
    fn reads_itself() {
        let s = sample("self").unwrap();
        assert!(s.rss_kib > 0 && s.peak_rss_kib >= s.rss_kib);
        assert!(sample("999999999").is_none());
    }
}
