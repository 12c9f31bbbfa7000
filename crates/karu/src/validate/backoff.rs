//! Retry timing (spec 5.5): `Retry-After`, exponential backoff with jitter, the per-read
//! deadline and the attempt cap for unreachable hosts.

use std::time::{Duration, Instant, SystemTime};

use http::HeaderMap;
use http::header::RETRY_AFTER;

use crate::error::{Error, Status};

/// Longest wait a `Retry-After` can ask for; a server asking more is not worth waiting for
/// inside one read's deadline.
pub(crate) const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// Upper bound of the jitter added to a `Retry-After` wait, in milliseconds.
const RETRY_AFTER_JITTER_MS: u64 = 1000;

/// Base of the exponential backoff, in milliseconds.
const BASE_MS: u64 = 100;

/// Largest shift of the base: waits stop growing at 6.4 to 12.8 s.
const MAX_SHIFT: u32 = 6;

/// Attempts allowed when the host cannot be resolved or connected to: retrying an unreachable
/// host eight times only delays the inevitable.
pub(crate) const UNREACHABLE_ATTEMPTS: u32 = 3;

/// The wait a `Retry-After` header asks for, capped at 60 s: delay-seconds, or an HTTP date
/// (a past date counts as 0). `None` when absent or unparseable.
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if value.is_empty() {
        return None;
    }
    let wait = if value.bytes().all(|b| b.is_ascii_digit()) {
        // A number too large for u64 is still a valid (huge) delay: it hits the cap.
        Duration::from_secs(value.parse().unwrap_or(u64::MAX))
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(RETRY_AFTER_CAP))
}

/// The wait before retry `retry` (1 for the first retry).
///
/// With a `Retry-After` of `s`: `min(s, 60 s)` plus uniform jitter of 0 to 1000 ms. Otherwise
/// `base = 100 ms << min(retry, 6)` plus uniform jitter of 0 to `base`: 200–400 ms, then
/// 400–800 ms, up to 6.4–12.8 s. The jitter spreads clients that failed together.
pub(crate) fn delay(
    retry: u32,
    retry_after: Option<Duration>,
    rng: &mut fastrand::Rng,
) -> Duration {
    match retry_after {
        Some(wait) => {
            wait.min(RETRY_AFTER_CAP) + Duration::from_millis(rng.u64(0..=RETRY_AFTER_JITTER_MS))
        }
        None => {
            let base = BASE_MS << retry.min(MAX_SHIFT);
            Duration::from_millis(base + rng.u64(0..=base))
        }
    }
}

/// How many attempts a transfer gets: `max_attempts` (at least 1), but at most 3 once a failure
/// was a DNS or connect failure.
pub(crate) fn attempt_cap(max_attempts: u32, unreachable: bool) -> u32 {
    let cap = max_attempts.max(1);
    if unreachable {
        cap.min(UNREACHABLE_ATTEMPTS)
    } else {
        cap
    }
}

/// The deadline of one read (`KARU_REQUEST_TIMEOUT`): it covers every lookup, attempt and
/// wait. A timeout of `None` or zero disables it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deadline {
    /// When the read runs out of time; `None` when there is no deadline.
    end: Option<Instant>,
}

impl Deadline {
    /// A deadline `timeout` from now.
    pub(crate) fn new(timeout: Option<Duration>) -> Deadline {
        Deadline::starting_at(Instant::now(), timeout)
    }

    /// A deadline `timeout` after `start`. A timeout too large to represent is no deadline.
    pub(crate) fn starting_at(start: Instant, timeout: Option<Duration>) -> Deadline {
        let end = timeout
            .filter(|t| !t.is_zero())
            .and_then(|t| start.checked_add(t));
        Deadline { end }
    }

    #[cfg(test)]
    /// Whether there is a deadline at all.
    pub(crate) fn is_set(&self) -> bool {
        self.end.is_some()
    }

    /// Time left now; `None` when there is no deadline.
    pub(crate) fn remaining(&self) -> Option<Duration> {
        self.remaining_at(Instant::now())
    }

    /// Time left at `now`; `None` when there is no deadline.
    pub(crate) fn remaining_at(&self, now: Instant) -> Option<Duration> {
        self.end.map(|end| end.saturating_duration_since(now))
    }

    /// Whether the deadline has passed.
    pub(crate) fn expired(&self) -> bool {
        self.expired_at(Instant::now())
    }

    /// Whether the deadline has passed at `now`.
    pub(crate) fn expired_at(&self, now: Instant) -> bool {
        self.remaining_at(now).is_some_and(|r| r.is_zero())
    }

    /// Whether waiting `wait` still leaves time for another attempt.
    pub(crate) fn fits(&self, wait: Duration) -> bool {
        self.fits_at(Instant::now(), wait)
    }

    /// Whether waiting `wait` from `now` still leaves time for another attempt.
    pub(crate) fn fits_at(&self, now: Instant, wait: Duration) -> bool {
        self.remaining_at(now).is_none_or(|r| wait < r)
    }

    /// The total timeout to give one attempt: the time left, but at least 1 ms (a zero
    /// timeout would mean "none" to a transport); `None` when there is no deadline.
    pub(crate) fn attempt_timeout(&self) -> Option<Duration> {
        self.remaining().map(|r| r.max(Duration::from_millis(1)))
    }

    /// TIMEOUT `"<url>: request timeout exceeded"`.
    pub(crate) fn exceeded(url: &str) -> Error {
        Error::new(Status::Timeout, format!("{url}: request timeout exceeded"))
    }

    /// TIMEOUT `"<url>: request timeout leaves no time for another attempt"`.
    pub(crate) fn no_time(url: &str) -> Error {
        Error::new(
            Status::Timeout,
            format!("{url}: request timeout leaves no time for another attempt"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
        h
    }

    /// 2015-10-21 07:28:00 UTC, the date in RFC 9110's example.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    #[test]
    fn retry_after_seconds() {
        assert_eq!(retry_after(&headers("0"), now()), Some(Duration::ZERO));
        assert_eq!(
            retry_after(&headers("7"), now()),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            retry_after(&headers(" 12 "), now()),
            Some(Duration::from_secs(12))
        );
        assert_eq!(retry_after(&headers("60"), now()), Some(RETRY_AFTER_CAP));
        assert_eq!(retry_after(&headers("61"), now()), Some(RETRY_AFTER_CAP));
        assert_eq!(retry_after(&headers("3600"), now()), Some(RETRY_AFTER_CAP));
        assert_eq!(
            retry_after(&headers("99999999999999999999999"), now()),
            Some(RETRY_AFTER_CAP)
        );
    }

    #[test]
    fn retry_after_dates() {
        let h = headers("Wed, 21 Oct 2015 07:28:30 GMT");
        assert_eq!(retry_after(&h, now()), Some(Duration::from_secs(30)));
        // RFC 850 and asctime forms are HTTP dates too.
        let h = headers("Wednesday, 21-Oct-15 07:28:05 GMT");
        assert_eq!(retry_after(&h, now()), Some(Duration::from_secs(5)));
        let h = headers("Wed Oct 21 07:28:10 2015");
        assert_eq!(retry_after(&h, now()), Some(Duration::from_secs(10)));
        // Past dates count as 0, far ones are capped.
        let h = headers("Wed, 21 Oct 2015 07:00:00 GMT");
        assert_eq!(retry_after(&h, now()), Some(Duration::ZERO));
        let h = headers("Thu, 22 Oct 2015 07:28:00 GMT");
        assert_eq!(retry_after(&h, now()), Some(RETRY_AFTER_CAP));
    }

    #[test]
    fn retry_after_garbage() {
        assert_eq!(retry_after(&HeaderMap::new(), now()), None);
        for bad in [
            "",
            "soon",
            "-5",
            "+5",
            "1.5",
            "5s",
            "Wed, 32 Oct 2015 07:28:00 GMT",
        ] {
            assert_eq!(retry_after(&headers(bad), now()), None, "{bad:?}");
        }
    }

    #[test]
    fn attempt_caps() {
        assert_eq!(attempt_cap(8, false), 8);
        assert_eq!(attempt_cap(8, true), 3);
        assert_eq!(attempt_cap(2, true), 2);
        assert_eq!(attempt_cap(0, false), 1);
        assert_eq!(attempt_cap(1, true), 1);
    }

    #[test]
    fn deadline() {
        let t0 = Instant::now();
        let off = Deadline::starting_at(t0, None);
        assert!(!off.is_set());
        assert_eq!(off.remaining_at(t0), None);
        assert!(!off.expired_at(t0 + Duration::from_secs(1_000_000)));
        assert!(off.fits_at(t0, Duration::from_secs(1_000_000)));
        assert_eq!(off.attempt_timeout(), None);
        assert!(!Deadline::starting_at(t0, Some(Duration::ZERO)).is_set());
        assert!(!Deadline::starting_at(t0, Some(Duration::MAX)).is_set());

        let d = Deadline::starting_at(t0, Some(Duration::from_secs(10)));
        assert_eq!(d.remaining_at(t0), Some(Duration::from_secs(10)));
        assert!(!d.expired_at(t0 + Duration::from_secs(9)));
        assert!(d.expired_at(t0 + Duration::from_secs(10)));
        assert!(d.expired_at(t0 + Duration::from_secs(11)));
        assert_eq!(
            d.remaining_at(t0 + Duration::from_secs(11)),
            Some(Duration::ZERO)
        );
        assert!(d.fits_at(t0, Duration::from_secs(9)));
        assert!(!d.fits_at(t0, Duration::from_secs(10)));
        assert!(!d.fits_at(t0 + Duration::from_secs(5), Duration::from_secs(6)));

        let gone = Deadline::starting_at(t0 - Duration::from_secs(5), Some(Duration::from_secs(1)));
        assert!(gone.expired());
        assert!(!gone.fits(Duration::ZERO));
        assert!(Deadline::new(None).fits(Duration::from_secs(1 << 40)));
        assert_eq!(gone.attempt_timeout(), Some(Duration::from_millis(1)));
        assert!(
            Deadline::new(Some(Duration::from_secs(3600)))
                .remaining()
                .unwrap()
                > Duration::from_secs(3599)
        );
    }

    #[test]
    fn deadline_messages() {
        let e = Deadline::exceeded("https://h/o?<redacted>");
        assert_eq!(e.status(), Status::Timeout);
        assert_eq!(
            e.message(),
            "https://h/o?<redacted>: request timeout exceeded"
        );
        let e = Deadline::no_time("https://h/o");
        assert_eq!(e.status(), Status::Timeout);
        assert_eq!(
            e.message(),
            "https://h/o: request timeout leaves no time for another attempt"
        );
    }

    #[test]
    fn first_retries_follow_the_documented_ranges() {
        let mut rng = fastrand::Rng::with_seed(7);
        let ms = Duration::from_millis;
        for (n, lo, hi) in [
            (1, 200, 400),
            (2, 400, 800),
            (3, 800, 1600),
            (6, 6400, 12800),
            (7, 6400, 12800),
        ] {
            for _ in 0..200 {
                let d = delay(n, None, &mut rng);
                assert!(d >= ms(lo) && d <= ms(hi), "retry {n}: {d:?}");
            }
        }
    }

    proptest! {
        #[test]
        fn backoff_bounds(n in 0u32..1000, seed in any::<u64>()) {
            let mut rng = fastrand::Rng::with_seed(seed);
            let base = Duration::from_millis(100 << n.min(6));
            let d = delay(n, None, &mut rng);
            prop_assert!(d >= base && d <= base * 2, "{n}: {d:?}");
        }

        #[test]
        fn retry_after_bounds(n in 0u32..10, secs in 0u64..200, seed in any::<u64>()) {
            let mut rng = fastrand::Rng::with_seed(seed);
            let wait = Duration::from_secs(secs).min(RETRY_AFTER_CAP);
            let d = delay(n, Some(Duration::from_secs(secs)), &mut rng);
            prop_assert!(d >= wait && d <= wait + Duration::from_millis(1000), "{secs}: {d:?}");
        }

        #[test]
        fn retry_after_never_panics(s in "[ -~]*", at in any::<u64>()) {
            if let Ok(v) = http::HeaderValue::from_str(&s) {
                let mut h = HeaderMap::new();
                h.insert(RETRY_AFTER, v);
                let now = SystemTime::UNIX_EPOCH + Duration::from_secs(at % (1 << 40));
                if let Some(d) = retry_after(&h, now) {
                    prop_assert!(d <= RETRY_AFTER_CAP);
                }
            }
        }
    }
}
