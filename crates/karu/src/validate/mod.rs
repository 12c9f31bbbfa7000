//! Response validation: pure decisions about HTTP responses (spec 5.4 to 5.6).
//!
//! The engine hands over the status and headers of a response (and, where needed, a body
//! length or the first 4 KiB of an error body) and acts on the answer: keep bytes, drain,
//! retry, restart or fail. Nothing here does I/O, waits or retries, so every rule can be
//! tested exactly. URLs arrive already redacted; every message starts with `"<url>: "`.

pub(crate) mod backoff;
mod classify;
pub(crate) mod condition;
pub(crate) mod content_range;
pub(crate) mod etag;
mod head;
mod probe;
pub(crate) mod redact;
mod summary;

use http::HeaderMap;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, HeaderName, WARNING};

use crate::error::{Error, Status};

pub(crate) use {
    backoff::{Deadline, attempt_cap, delay, retry_after},
    classify::classify_error,
    head::{Expect, Head, check_head},
    probe::{Suffix, probe_size, suffix_answer},
    summary::{CAPTURE, summary},
};

/// GCS names the encoding an object was stored with; a different `Content-Encoding` means
/// the body was transformed on the way.
const STORED_ENCODING: &str = "x-goog-stored-content-encoding";

/// Longest header value quoted in a message.
const SHOWN_MAX: usize = 100;

/// An error whose message is `"<url>: <what>"`.
fn fail(status: Status, url: &str, what: impl std::fmt::Display) -> Error {
    Error::new(status, format!("{url}: {what}"))
}

/// HTTP `"<url>: the object changed while an interrupted read was being resumed"`: the final
/// error when restarts after version changes used up every attempt (spec 5.5).
pub(crate) fn version_changed(url: &str) -> Error {
    fail(
        Status::Http,
        url,
        "the object changed while an interrupted read was being resumed",
    )
}

/// HTTP `"<url>: response exceeded bytes F-L"`: a body longer than the range it announced.
/// The engine reports it when a 206 body runs past `last`.
pub(crate) fn body_too_long(url: &str, first: u64, last: u64) -> Error {
    fail(
        Status::Http,
        url,
        format_args!("response exceeded bytes {first}-{last}"),
    )
}

/// A header that should appear once.
enum Field<'h> {
    /// Absent.
    Missing,
    /// Present once, trimmed.
    One(&'h str),
    /// Repeated, or not visible ASCII: never trusted.
    Bad,
}

/// Looks up a header that must appear at most once.
fn field<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Field<'h> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Field::Missing;
    };
    if values.next().is_some() {
        return Field::Bad;
    }
    match value.to_str() {
        Ok(s) => Field::One(s.trim()),
        Err(_) => Field::Bad,
    }
}

/// Every value of a header joined by ", ", lossily decoded and cut short, for messages.
fn shown(headers: &HeaderMap, name: &HeaderName) -> String {
    let joined = headers
        .get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    match joined.char_indices().nth(SHOWN_MAX) {
        Some((cut, _)) => format!("{}...", &joined[..cut]),
        None => joined,
    }
}

/// The announced body length: one `Content-Length` (or repeats of one value), digits only.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut length = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        for part in value.to_str().ok()?.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n: u64 = part.parse().ok()?;
            if length.is_some_and(|l| l != n) {
                return None;
            }
            length = Some(n);
        }
    }
    length
}

/// The content codings of a header, lower-cased, without `identity` (which means none).
fn codings(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .split(',')
                .map(|c| c.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .filter(|c| !c.is_empty() && c != "identity")
        .collect()
}

/// Whether a `Warning` field carries code 214 (Transformation Applied). Commas inside quoted
/// warn-text do not separate warnings.
fn has_warning_214(headers: &HeaderMap) -> bool {
    headers.get_all(WARNING).iter().any(|value| {
        let mut in_quotes = false;
        let mut escaped = false;
        let mut starts = vec![0];
        let bytes = value.as_bytes();
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                _ if escaped => escaped = false,
                b'\\' if in_quotes => escaped = true,
                b'"' => in_quotes = !in_quotes,
                b',' if !in_quotes => starts.push(i + 1),
                _ => {}
            }
        }
        starts.into_iter().any(|s| {
            let item = bytes[s..].trim_ascii_start();
            item.starts_with(b"214") && item.get(3).is_none_or(|&b| b == b' ' || b == b',')
        })
    })
}

/// HTTP error for a 2xx body that is not the stored bytes (spec 5.4, first row): its
/// `Content-Encoding` differs from `x-goog-stored-content-encoding`, or it carries
/// `Warning: 214`. Such a body is wrong on every attempt, so it is never retried.
fn transformed(url: &str, headers: &HeaderMap) -> Option<Error> {
    if headers.contains_key(STORED_ENCODING) {
        let stored = codings(headers, STORED_ENCODING);
        let got = codings(headers, CONTENT_ENCODING.as_str());
        if stored != got {
            let stored = stored.join(", ");
            let what = if got.is_empty() {
                format!(
                    "the server decoded an object stored with Content-Encoding {stored} \
                     (GCS decompressive transcoding), so the body is not the stored bytes; \
                     read it through gs:// or send \"Accept-Encoding: {stored}\" through \
                     KARU_HTTP_HEADERS"
                )
            } else {
                let stored = if stored.is_empty() {
                    "identity"
                } else {
                    &stored
                };
                format!(
                    "Content-Encoding {} differs from the stored encoding {stored}, so the \
                     body is not the stored bytes",
                    got.join(", ")
                )
            };
            return Some(fail(Status::Http, url, what));
        }
    }
    if has_warning_214(headers) {
        return Some(fail(
            Status::Http,
            url,
            "the response carries Warning: 214 (Transformation Applied), so the body is not \
             the stored bytes",
        ));
    }
    None
}

/// Test helper: a header map from name/value pairs (repeated names append).
#[cfg(test)]
pub(crate) fn test_headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            HeaderName::from_bytes(k.as_bytes()).unwrap(),
            http::HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::test_headers as map;

    #[test]
    fn content_length_is_strict() {
        assert_eq!(content_length(&map(&[("content-length", "12")])), Some(12));
        assert_eq!(
            content_length(&map(&[("content-length", "12, 12")])),
            Some(12)
        );
        assert_eq!(
            content_length(&map(&[("content-length", "12"), ("content-length", "12")])),
            Some(12)
        );
        assert_eq!(content_length(&map(&[])), None);
        for bad in [
            "",
            "+12",
            "-1",
            "1 2",
            "12, 13",
            "0x10",
            "99999999999999999999",
        ] {
            assert_eq!(
                content_length(&map(&[("content-length", bad)])),
                None,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn warning_214_is_found_anywhere_in_the_list() {
        let w = |v: &str| has_warning_214(&map(&[("warning", v)]));
        assert!(w("214 - \"Transformation Applied\""));
        assert!(w("214"));
        assert!(w("110 - \"Stale\", 214 proxy \"Transformation Applied\""));
        assert!(has_warning_214(&map(&[
            ("warning", "110 - \"x\""),
            ("warning", "214 - \"y\"")
        ])));
        assert!(!w("110 - \"Response is Stale\""));
        assert!(!w("2140 - \"x\""));
        assert!(!w("199 - \"a, 214 - b\""));
        assert!(!w("199 - \"a\\\", 214 - b\""));
    }

    #[test]
    fn shown_values_are_cut() {
        let long = "x".repeat(150);
        let s = shown(
            &map(&[("content-range", &long)]),
            &http::header::CONTENT_RANGE,
        );
        assert_eq!(s, format!("{}...", "x".repeat(100)));
    }

    #[test]
    fn capture_limits() {
        assert_eq!(CAPTURE, 4096);
    }

    #[test]
    fn helper_messages() {
        let e = version_changed("https://h/o");
        assert_eq!(e.status(), Status::Http);
        assert_eq!(
            e.message(),
            "https://h/o: the object changed while an interrupted read was being resumed"
        );
        let e = body_too_long("https://h/o", 5, 9);
        assert_eq!(e.status(), Status::Http);
        assert_eq!(e.message(), "https://h/o: response exceeded bytes 5-9");
    }
}
