//! Durations and rates as people write them: `20ms`, `1.5s`; `1Gbit`, `100Mbit`, `200MB/s`.

use std::time::Duration;

/// A duration: a number and one of `ns`, `us` (or `µs`), `ms`, `s`; `0` alone is zero.
pub fn duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("'{text}' is not a duration (e.g. 20ms, 1.5s, 500us)");
    let t = text.trim();
    if t == "0" {
        return Ok(Duration::ZERO);
    }
    let (number, unit) = split(t).ok_or_else(bad)?;
    let scale = match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(number * scale).map_err(|_| bad())
}

/// A rate in bytes per second: a number and a unit of bits (`bit`, `Kbit`, `Mbit`, `Gbit`,
/// decimal) or bytes per second (`B/s`, `KB/s`, `MB/s`, `GB/s` decimal; `KiB/s`, `MiB/s`,
/// `GiB/s` binary). At least one byte per second.
pub fn rate(text: &str) -> Result<u64, String> {
    let bad = || format!("'{text}' is not a rate (e.g. 1Gbit, 100Mbit, 200MB/s)");
    let (number, unit) = split(text.trim()).ok_or_else(bad)?;
    let bytes = match unit {
        "bit" => 1.0 / 8.0,
        "Kbit" | "kbit" => 1e3 / 8.0,
        "Mbit" | "mbit" => 1e6 / 8.0,
        "Gbit" | "gbit" => 1e9 / 8.0,
        "B/s" => 1.0,
        "KB/s" | "kB/s" => 1e3,
        "MB/s" => 1e6,
        "GB/s" => 1e9,
        "KiB/s" => 1024.0,
        "MiB/s" => 1024.0 * 1024.0,
        "GiB/s" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let rate = number * bytes;
    if !(1.0..=u64::MAX as f64).contains(&rate) {
        return Err(bad());
    }
    Ok(rate as u64)
}

/// A non-negative finite number and the unit after it.
fn split(t: &str) -> Option<(f64, &str)> {
    let at = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let number: f64 = t[..at].parse().ok()?;
    number.is_finite().then_some((number, t[at..].trim()))
}

/// `20 ms`, `150 µs`, `1.20 s`: a duration for people.
pub fn show_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

/// `125 MB/s (1.00 Gbit/s)`: a rate for people.
pub fn show_rate(bytes_per_second: u64) -> String {
    let b = bytes_per_second as f64;
    format!("{:.1} MB/s ({:.2} Gbit/s)", b / 1e6, b * 8.0 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        for bad in ["", "20", "ms", "-1ms", "20 parsecs", "1e3ms"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates() {
        assert_eq!(rate("1Gbit"), Ok(125_000_000));
        assert_eq!(rate("100Mbit"), Ok(12_500_000));
        assert_eq!(rate("200MB/s"), Ok(200_000_000));
        assert_eq!(rate("1MiB/s"), Ok(1 << 20));
        assert_eq!(rate("8bit"), Ok(1));
        for bad in ["", "1", "1Gb", "0MB/s", "-5MB/s", "1bit", "fast"] {
            assert!(rate(bad).is_err(), "{bad}");
        }
    }
}
