//! Go's `time.ParseDuration` format, as pilot-agent reads `SECRET_TTL` ("24h0m0s",
//! "90s", "1.5h", "500ms").

use std::time::Duration;

/// Parses a Go duration (no sign: a negative TTL means nothing here).
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("an empty duration".into());
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("{text:?}: a number without a unit"))?;
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("{text:?}: {num:?} is not a number"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(format!("{text:?}: unknown unit {other:?}")),
        };
        total += value * scale;
        rest = next;
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("{text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse("24h0m0s").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1.5h").unwrap(), Duration::from_secs(5_400));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        assert!(parse("10").is_err());
        assert!(parse("10d").is_err());
        assert!(parse("").is_err());
    }
}
