//! Answers to the synchronous probes of spec 5.6: the one-byte size probe (`bytes=0-0`) and
//! the suffix range (`bytes=-T`) of `read_ends`.
//!
//! Both take the response after the engine read its body (a probe body is tiny), and both
//! expect the caller to have sent non-2xx statuses other than 416 through
//! [`classify_error`](super::classify_error) first: here they only yield a bare `"HTTP <status>"`.

use http::HeaderMap;
use http::header::CONTENT_RANGE;

use super::content_range::{self, ContentRange};
use super::{Field, content_length, etag, fail, field, shown, transformed};
use crate::error::{Error, Result, Status};

/// The size and strong ETag from the answer to `Range: bytes=0-0`.
///
/// 206 `bytes 0-0/T` with a one-byte body → T; 416 `bytes */0` → 0 (an empty object); 200 →
/// its `Content-Length`. Every other shape is an HTTP error with the messages of spec 5.6.
pub(crate) fn probe_size(
    url: &str,
    status: u16,
    headers: &HeaderMap,
    body_len: u64,
) -> Result<(u64, Option<String>)> {
    let total = match status {
        416 => match field(headers, &CONTENT_RANGE) {
            // The probe starts at 0, so only an empty object can put it past the end.
            Field::One(v) if content_range::parse_unsatisfied(v) == Some(0) => 0,
            _ => return Err(fail(Status::Http, url, "invalid Content-Range in HTTP 416")),
        },
        200..=299 => {
            if let Some(error) = transformed(url, headers) {
                return Err(error);
            }
            match status {
                206 => {
                    let range = range(url, headers, 0, 0)?;
                    let Some(total) = range.total else {
                        return Err(fail(
                            Status::Http,
                            url,
                            "partial response has no valid object size",
                        ));
                    };
                    body_fits(url, &range, body_len, 1, 0, 0)?;
                    if range.first != 0 || range.last != 0 {
                        return Err(unsatisfied(url, &range, "[0, 0]"));
                    }
                    total
                }
                200 => content_length(headers)
                    .ok_or_else(|| fail(Status::Http, url, "the server reported no size"))?,
                _ => return Err(unexpected(url, status)),
            }
        }
        _ => return Err(fail(Status::Http, url, format_args!("HTTP {status}"))),
    };
    Ok((total, etag::strong(headers)))
}

/// What a suffix answer (`Range: bytes=-T`) gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Suffix {
    /// The answer counts: `len` body bytes, the last of the object, starting at object offset
    /// `first` (a 200 starts at 0 and `len` is the whole object).
    Tail {
        /// Object offset of the first body byte.
        first: u64,
        /// Body bytes: `min(T, total)`.
        len: u64,
        /// Size of the object.
        total: u64,
        /// The response's strong ETag.
        etag: Option<String>,
    },
    /// The server ignored the suffix range (a 200 longer than T, or a 416 with a nonzero
    /// total): fetch the tail by offset instead, with `If-Match` set to the head's ETag.
    Ignored,
}

/// Judges the answer to `Range: bytes=-want` (spec 5.6, `read_ends`).
///
/// A 206 counts only if it ends at the object's last byte and holds `min(want, total)` bytes
/// (`body_len` of them); otherwise HTTP "Content-Range [x, y] does not satisfy requested last
/// N bytes". A 200 counts when the whole object is at most `want` bytes (its size is
/// `Content-Length`, else `body_len`) and is ignored when longer. A 416 `bytes */0` is an
/// empty object; `bytes */T` with T > 0 is ignored.
pub(crate) fn suffix_answer(
    url: &str,
    want: u64,
    status: u16,
    headers: &HeaderMap,
    body_len: u64,
) -> Result<Suffix> {
    let etag = etag::strong(headers);
    match status {
        416 => match field(headers, &CONTENT_RANGE) {
            Field::One(v) => match content_range::parse_unsatisfied(v) {
                Some(0) => Ok(Suffix::Tail {
                    first: 0,
                    len: 0,
                    total: 0,
                    etag,
                }),
                Some(_) => Ok(Suffix::Ignored),
                None => Err(fail(Status::Http, url, "invalid Content-Range in HTTP 416")),
            },
            _ => Err(fail(Status::Http, url, "invalid Content-Range in HTTP 416")),
        },
        200..=299 => {
            if let Some(error) = transformed(url, headers) {
                return Err(error);
            }
            match status {
                206 => {
                    let range = range(url, headers, 0, want.saturating_sub(1))?;
                    let Some(total) = range.total else {
                        return Err(fail(
                            Status::Http,
                            url,
                            "partial response has no valid object size",
                        ));
                    };
                    if range.last + 1 != total || range.len() != want.min(total) {
                        return Err(unsatisfied(url, &range, format_args!("last {want} bytes")));
                    }
                    body_fits(url, &range, body_len, range.len(), range.first, range.last)?;
                    Ok(Suffix::Tail {
                        first: range.first,
                        len: range.len(),
                        total,
                        etag,
                    })
                }
                200 => {
                    let total = content_length(headers).unwrap_or(body_len);
                    if total > want {
                        Ok(Suffix::Ignored)
                    } else {
                        Ok(Suffix::Tail {
                            first: 0,
                            len: total,
                            total,
                            etag,
                        })
                    }
                }
                _ => Err(unexpected(url, status)),
            }
        }
        _ => Err(fail(Status::Http, url, format_args!("HTTP {status}"))),
    }
}

/// The single, well-formed Content-Range of a 206 that asked for `[start, end]` (used only in
/// the "missing" message).
fn range(url: &str, headers: &HeaderMap, start: u64, end: u64) -> Result<ContentRange> {
    let parsed = match field(headers, &CONTENT_RANGE) {
        Field::Missing => {
            return Err(fail(
                Status::Http,
                url,
                format_args!("missing Content-Range for requested [{start}, {end}]"),
            ));
        }
        Field::One(v) => content_range::parse(v),
        Field::Bad => None,
    };
    parsed.ok_or_else(|| {
        fail(
            Status::Http,
            url,
            format_args!(
                "malformed Content-Range {:?}",
                shown(headers, &CONTENT_RANGE)
            ),
        )
    })
}

/// A body longer than the `asked` bytes `first-last` is "response exceeded bytes F-L"; one of
/// a different length than its Content-Range is "response body does not match Content-Range".
fn body_fits(
    url: &str,
    range: &ContentRange,
    body_len: u64,
    asked: u64,
    first: u64,
    last: u64,
) -> Result<()> {
    if body_len > asked {
        return Err(super::body_too_long(url, first, last));
    }
    if body_len != range.len() {
        return Err(fail(
            Status::Http,
            url,
            "response body does not match Content-Range",
        ));
    }
    Ok(())
}

/// HTTP `"<url>: Content-Range [x, y] does not satisfy requested <asked>"`.
fn unsatisfied(url: &str, range: &ContentRange, asked: impl std::fmt::Display) -> Error {
    fail(
        Status::Http,
        url,
        format_args!(
            "Content-Range [{}, {}] does not satisfy requested {asked}",
            range.first, range.last
        ),
    )
}

/// HTTP `"<url>: unexpected HTTP <status> response to a range request"` (a 2xx other than
/// 200 and 206).
fn unexpected(url: &str, status: u16) -> Error {
    fail(
        Status::Http,
        url,
        format_args!("unexpected HTTP {status} response to a range request"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::test_headers as map;

    const URL: &str = "https://h/o";

    fn http_error<T: std::fmt::Debug>(r: Result<T>, message: &str) {
        let e = r.expect_err(message);
        assert_eq!(e.status(), Status::Http, "{e}");
        assert_eq!(e.message(), format!("{URL}: {message}"));
    }

    #[test]
    fn size_from_partial_content() {
        let h = map(&[("content-range", "bytes 0-0/1234"), ("etag", "\"abc\"")]);
        assert_eq!(
            probe_size(URL, 206, &h, 1),
            Ok((1234, Some("\"abc\"".into())))
        );
        let h = map(&[("content-range", "bytes 0-0/1"), ("etag", "W/\"abc\"")]);
        assert_eq!(probe_size(URL, 206, &h, 1), Ok((1, None)));
    }

    #[test]
    fn size_edge_cases() {
        let h = map(&[("content-range", "bytes 0-0/*")]);
        http_error(
            probe_size(URL, 206, &h, 1),
            "partial response has no valid object size",
        );
        let h = map(&[("content-range", "bytes 0-0/10")]);
        http_error(probe_size(URL, 206, &h, 2), "response exceeded bytes 0-0");
        http_error(
            probe_size(URL, 206, &h, 0),
            "response body does not match Content-Range",
        );
        let h = map(&[("content-range", "bytes 0-9/10")]);
        http_error(probe_size(URL, 206, &h, 10), "response exceeded bytes 0-0");
        http_error(
            probe_size(URL, 206, &h, 1),
            "response body does not match Content-Range",
        );
        let h = map(&[("content-range", "bytes 1-1/10")]);
        http_error(
            probe_size(URL, 206, &h, 1),
            "Content-Range [1, 1] does not satisfy requested [0, 0]",
        );
        http_error(
            probe_size(URL, 206, &HeaderMap::new(), 1),
            "missing Content-Range for requested [0, 0]",
        );
        let h = map(&[("content-range", "bytes 0-0/0")]);
        http_error(
            probe_size(URL, 206, &h, 1),
            "malformed Content-Range \"bytes 0-0/0\"",
        );
    }

    #[test]
    fn size_from_unsatisfied_range() {
        let h = map(&[("content-range", "bytes */0"), ("etag", "\"e\"")]);
        assert_eq!(probe_size(URL, 416, &h, 0), Ok((0, Some("\"e\"".into()))));
        for bad in ["bytes */5", "bytes 0-0/5", "bytes */", "junk"] {
            let h = map(&[("content-range", bad)]);
            http_error(
                probe_size(URL, 416, &h, 0),
                "invalid Content-Range in HTTP 416",
            );
        }
        http_error(
            probe_size(URL, 416, &HeaderMap::new(), 0),
            "invalid Content-Range in HTTP 416",
        );
    }

    #[test]
    fn size_from_whole_object() {
        let h = map(&[("content-length", "77"), ("etag", "\"e\"")]);
        assert_eq!(probe_size(URL, 200, &h, 1), Ok((77, Some("\"e\"".into()))));
        http_error(
            probe_size(URL, 200, &HeaderMap::new(), 1),
            "the server reported no size",
        );
        http_error(
            probe_size(URL, 204, &HeaderMap::new(), 0),
            "unexpected HTTP 204 response to a range request",
        );
        http_error(probe_size(URL, 500, &HeaderMap::new(), 0), "HTTP 500");
        let h = map(&[
            ("content-length", "77"),
            ("x-goog-stored-content-encoding", "gzip"),
        ]);
        assert!(
            probe_size(URL, 200, &h, 1)
                .unwrap_err()
                .message()
                .contains("GCS decompressive transcoding")
        );
    }

    fn tail(first: u64, len: u64, total: u64) -> Result<Suffix> {
        Ok(Suffix::Tail {
            first,
            len,
            total,
            etag: None,
        })
    }

    #[test]
    fn suffix_partial_content() {
        let h = map(&[("content-range", "bytes 90-99/100")]);
        assert_eq!(suffix_answer(URL, 10, 206, &h, 10), tail(90, 10, 100));
        // A short object: the whole of it is the tail.
        let h = map(&[("content-range", "bytes 0-4/5")]);
        assert_eq!(suffix_answer(URL, 10, 206, &h, 5), tail(0, 5, 5));
        let h = map(&[("content-range", "bytes 90-98/100")]);
        http_error(
            suffix_answer(URL, 10, 206, &h, 9),
            "Content-Range [90, 98] does not satisfy requested last 10 bytes",
        );
        let h = map(&[("content-range", "bytes 91-99/100")]);
        http_error(
            suffix_answer(URL, 10, 206, &h, 9),
            "Content-Range [91, 99] does not satisfy requested last 10 bytes",
        );
        let h = map(&[("content-range", "bytes 90-99/*")]);
        http_error(
            suffix_answer(URL, 10, 206, &h, 10),
            "partial response has no valid object size",
        );
        let h = map(&[("content-range", "bytes 90-99/100")]);
        http_error(
            suffix_answer(URL, 10, 206, &h, 11),
            "response exceeded bytes 90-99",
        );
        http_error(
            suffix_answer(URL, 10, 206, &h, 9),
            "response body does not match Content-Range",
        );
        http_error(
            suffix_answer(URL, 10, 206, &HeaderMap::new(), 10),
            "missing Content-Range for requested [0, 9]",
        );
    }

    #[test]
    fn suffix_ignored_or_whole() {
        let h = map(&[("content-length", "100")]);
        assert_eq!(suffix_answer(URL, 10, 200, &h, 10), Ok(Suffix::Ignored));
        let h = map(&[("content-length", "10"), ("etag", "\"e\"")]);
        assert_eq!(
            suffix_answer(URL, 10, 200, &h, 10),
            Ok(Suffix::Tail {
                first: 0,
                len: 10,
                total: 10,
                etag: Some("\"e\"".into())
            })
        );
        assert_eq!(
            suffix_answer(URL, 10, 200, &HeaderMap::new(), 4),
            tail(0, 4, 4)
        );
        assert_eq!(
            suffix_answer(URL, 10, 200, &HeaderMap::new(), 11),
            Ok(Suffix::Ignored)
        );
        let h = map(&[("content-range", "bytes */100")]);
        assert_eq!(suffix_answer(URL, 10, 416, &h, 0), Ok(Suffix::Ignored));
        let h = map(&[("content-range", "bytes */0")]);
        assert_eq!(suffix_answer(URL, 10, 416, &h, 0), tail(0, 0, 0));
        let h = map(&[("content-range", "bytes 0-1/2")]);
        http_error(
            suffix_answer(URL, 10, 416, &h, 0),
            "invalid Content-Range in HTTP 416",
        );
        http_error(
            suffix_answer(URL, 10, 204, &HeaderMap::new(), 0),
            "unexpected HTTP 204 response to a range request",
        );
        http_error(
            suffix_answer(URL, 10, 403, &HeaderMap::new(), 0),
            "HTTP 403",
        );
    }
}
