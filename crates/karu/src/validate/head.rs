//! The status line and headers of a batch transfer's response, checked against what was asked
//! (spec 5.4) before a single body byte is copied.

use http::HeaderMap;
use http::header::{CONTENT_RANGE, CONTENT_TYPE, ETAG};

use super::content_range::{self, ContentRange};
use super::{Field, condition, content_length, etag, fail, field, shown, transformed};
use crate::error::{Error, Status};

/// What an attempt asked for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expect<'a> {
    /// The object's URL, already redacted, for messages.
    pub(crate) url: &'a str,
    /// First byte asked in this attempt (absolute; includes bytes kept by a resume).
    pub(crate) start: u64,
    /// Last byte asked (absolute, inclusive); a resume does not move it.
    pub(crate) end: u64,
    /// First byte of the transfer before any resume.
    pub(crate) original_start: u64,
    /// `KARU_RANGE_FALLBACK_LIMIT`: most bytes discarded when a server ignores `Range`.
    pub(crate) fallback_limit: u64,
    /// The single strong tag sent in `If-Match`, if any.
    pub(crate) pin: Option<&'a str>,
    /// Whether `pin` is the caller's `if_match` (true) or Karu's own resume tag (false).
    pub(crate) pin_is_callers: bool,
    /// The `Last-Modified` date and object size an `If-Unmodified-Since` read is pinned to.
    pub(crate) unmodified: Option<(&'a str, Option<u64>)>,
}

/// The verdict on a response head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// Read the body: discard `skip` bytes, then keep `len` bytes for object offsets from
    /// `first`; drain or abort whatever follows.
    Body {
        /// Body bytes to discard first (a 200 to a request past offset 0).
        skip: u64,
        /// Object offset of the first kept byte.
        first: u64,
        /// Body bytes to keep. Less than asked when the object ends inside the request: the
        /// parts past the end then get RANGE. For a 200 without `Content-Length` it is the
        /// length asked, and the body may end sooner, at the end of the object.
        len: u64,
        /// Size of the object, when the response tells it.
        total: Option<u64>,
        /// The response's strong ETag (a resume tag candidate).
        etag: Option<String>,
        /// A 200 while resuming: forget the kept prefix, `first` is the original start.
        restarted: bool,
    },
    /// A non-2xx status: read up to 4 KiB of the body and call
    /// [`classify_error`](super::classify_error).
    ErrorBody {
        /// The response status.
        status: u16,
    },
    /// A final failure: no retry.
    Fail(Error),
    /// The response does not prove Karu's own resume tag (its strong ETag differs, or a 206
    /// has no strong ETag at all): drop the kept prefix and the tag, then restart (see
    /// [`Failure::version_changed`](super::Failure::version_changed)).
    VersionChanged,
    /// The response does not prove the caller's `if_match` (a different strong ETag, or none):
    /// a final PRECONDITION failure.
    Precondition(Error),
}

/// Checks the status and headers of a batch transfer's response against `expect` (spec 5.4).
///
/// Order: non-2xx statuses first (416 is RANGE "HTTP 416"; others need their body), then for
/// any 2xx a transformed encoding, then the ETag pin (a single strong pin must be proven by the
/// same strong ETag: bytes of two versions are never joined, and a caller's pin is never
/// answered with bytes of an unknown version), then the status-specific rules: 206
/// needs a Content-Range that satisfies the request, 200 means the server ignored `Range`,
/// any other 2xx is refused.
pub(crate) fn check_head(expect: &Expect, status: u16, headers: &HeaderMap) -> Head {
    let url = expect.url;
    if status == 416 {
        return Head::Fail(fail(Status::Range, url, "HTTP 416"));
    }
    if !(200..300).contains(&status) {
        return Head::ErrorBody { status };
    }
    if let Some(error) = transformed(url, headers) {
        return Head::Fail(error);
    }
    let etag = etag::strong(headers);
    if let Some(pin) = expect.pin.filter(|p| etag::is_single_strong(p)) {
        let pin = pin.trim();
        match &etag {
            Some(tag) if tag == pin => {}
            Some(tag) => {
                return if expect.pin_is_callers {
                    Head::Precondition(fail(
                        Status::Precondition,
                        url,
                        format_args!(
                            "the server ignored If-Match and sent ETag {tag}, so the object no \
                             longer matches if_match"
                        ),
                    ))
                } else {
                    Head::VersionChanged
                };
            }
            // A whole body to a resume restarts the read from its own bytes: nothing of the
            // pinned version is kept, so nothing needs proving.
            None if status == 200 && !expect.pin_is_callers => {}
            // No strong ETag (none, weak, or unreadable): the bytes may be any version, so
            // they are never spliced onto a kept prefix nor returned for a caller's pin.
            None => {
                return if expect.pin_is_callers {
                    Head::Precondition(fail(
                        Status::Precondition,
                        url,
                        format_args!(
                            "the server answered If-Match {pin} without a strong ETag ({}), so \
                             the bytes may not be the version if_match names",
                            unproven(headers)
                        ),
                    ))
                } else {
                    Head::VersionChanged
                };
            }
        }
    }
    if let Some((date, total)) = expect.unmodified
        && let Some(error) = condition::check_unmodified(url, date, total, status, headers)
    {
        return Head::Precondition(error);
    }
    match status {
        206 => partial(expect, headers, etag),
        200 => whole(expect, headers, etag),
        _ => Head::Fail(fail(
            Status::Http,
            url,
            format_args!("unexpected HTTP {status} response to a range request"),
        )),
    }
}

/// How a response's ETag fails to prove a version, for messages.
fn unproven(headers: &HeaderMap) -> String {
    if headers.contains_key(ETAG) {
        format!("ETag {}", shown(headers, &ETAG))
    } else {
        "no ETag".to_owned()
    }
}

/// A 206: the Content-Range must start at `start`, stop no later than `end`, and either reach
/// `end` or the last byte of the object.
fn partial(expect: &Expect, headers: &HeaderMap, etag: Option<String>) -> Head {
    let Expect {
        url, start, end, ..
    } = *expect;
    if is_multipart(headers) {
        // Its body is boundaries and part headers around the bytes, whatever the top-level
        // Content-Range says: never object bytes from its first byte.
        return Head::Fail(fail(
            Status::Http,
            url,
            format_args!(
                "a multipart/byteranges answer to the single range [{start}, {end}] \
                 (Content-Type {:?})",
                shown(headers, &CONTENT_TYPE)
            ),
        ));
    }
    let range = match field(headers, &CONTENT_RANGE) {
        Field::Missing => {
            return Head::Fail(fail(
                Status::Http,
                url,
                format_args!("missing Content-Range for requested [{start}, {end}]"),
            ));
        }
        Field::One(value) => content_range::parse(value),
        Field::Bad => None,
    };
    let Some(range) = range else {
        return Head::Fail(fail(
            Status::Http,
            url,
            format_args!(
                "malformed Content-Range {:?}",
                shown(headers, &CONTENT_RANGE)
            ),
        ));
    };
    if !satisfies(&range, start, end) {
        return Head::Fail(fail(
            Status::Http,
            url,
            format_args!(
                "Content-Range [{}, {}] does not satisfy requested [{start}, {end}]",
                range.first, range.last
            ),
        ));
    }
    let len = range.len();
    // The body must hold exactly the announced range; a Content-Length that says otherwise
    // is a contradiction no retry fixes.
    if let Some(n) = content_length(headers)
        && n != len
    {
        return Head::Fail(fail(
            Status::Http,
            url,
            format_args!(
                "Content-Length {n} does not match Content-Range [{}, {}]",
                range.first, range.last
            ),
        ));
    }
    Head::Body {
        skip: 0,
        first: start,
        len,
        total: range.total,
        etag,
        restarted: false,
    }
}

/// Whether any `Content-Type` of a response names `multipart/byteranges` (parameters aside).
fn is_multipart(headers: &HeaderMap) -> bool {
    headers.get_all(CONTENT_TYPE).iter().any(|v| {
        let media = v
            .as_bytes()
            .split(|&b| b == b';')
            .next()
            .unwrap_or_default();
        media
            .trim_ascii()
            .eq_ignore_ascii_case(b"multipart/byteranges")
    })
}

/// Whether a Content-Range answers a request for `[start, end]`.
fn satisfies(range: &ContentRange, start: u64, end: u64) -> bool {
    range.first == start
        && range.last <= end
        && (range.last == end
            || range
                .total
                .is_some_and(|t| range.last.checked_add(1) == Some(t)))
}

/// A 200: the server ignored `Range` and sends the whole object from byte 0. Skip to the
/// original start (never the resumed one: the kept prefix may belong to another version), if
/// the fallback limit allows discarding that much.
fn whole(expect: &Expect, headers: &HeaderMap, etag: Option<String>) -> Head {
    let Expect {
        url,
        end,
        original_start: skip,
        fallback_limit: limit,
        ..
    } = *expect;
    if skip > limit {
        return Head::Fail(fail(
            Status::Http,
            url,
            format_args!("server ignored Range; refusing to discard {skip} bytes (limit {limit})"),
        ));
    }
    let total = content_length(headers);
    // One past the last byte the body can give for this request.
    let stop = end.saturating_add(1).min(total.unwrap_or(u64::MAX));
    Head::Body {
        skip: total.map_or(skip, |t| skip.min(t)),
        first: skip,
        len: stop.saturating_sub(skip),
        total,
        etag,
        restarted: expect.start != skip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::test_headers as map;
    use http::HeaderValue;
    use proptest::prelude::*;

    const URL: &str = "https://h/b/o?<redacted>";

    fn expect(start: u64, end: u64) -> Expect<'static> {
        Expect {
            url: URL,
            start,
            end,
            original_start: start,
            fallback_limit: 8 << 20,
            pin: None,
            pin_is_callers: false,
            unmodified: None,
        }
    }

    fn body(skip: u64, first: u64, len: u64, total: Option<u64>) -> Head {
        Head::Body {
            skip,
            first,
            len,
            total,
            etag: None,
            restarted: false,
        }
    }

    fn failed(head: Head, status: Status, message: &str) {
        match head {
            Head::Fail(e) => {
                assert_eq!(e.status(), status);
                assert_eq!(e.message(), format!("{URL}: {message}"));
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn partial_content_that_satisfies() {
        let e = expect(100, 199);
        let h = map(&[
            ("content-range", "bytes 100-199/1000"),
            ("content-length", "100"),
        ]);
        assert_eq!(check_head(&e, 206, &h), body(0, 100, 100, Some(1000)));
        let h = map(&[("content-range", "bytes 100-199/*")]);
        assert_eq!(check_head(&e, 206, &h), body(0, 100, 100, None));
        // The object ends inside the request.
        let h = map(&[("content-range", "bytes 100-149/150")]);
        assert_eq!(check_head(&e, 206, &h), body(0, 100, 50, Some(150)));
        let h = map(&[("content-range", "bytes 100-199/200"), ("etag", "\"v1\"")]);
        assert_eq!(
            check_head(&e, 206, &h),
            Head::Body {
                skip: 0,
                first: 100,
                len: 100,
                total: Some(200),
                etag: Some("\"v1\"".into()),
                restarted: false
            }
        );
    }

    #[test]
    fn partial_content_violations() {
        let e = expect(100, 199);
        failed(
            check_head(&e, 206, &HeaderMap::new()),
            Status::Http,
            "missing Content-Range for requested [100, 199]",
        );
        failed(
            check_head(&e, 206, &map(&[("content-range", "bytes 100-199")])),
            Status::Http,
            "malformed Content-Range \"bytes 100-199\"",
        );
        failed(
            check_head(&e, 206, &map(&[("content-range", "bytes 100-199/100")])),
            Status::Http,
            "malformed Content-Range \"bytes 100-199/100\"",
        );
        failed(
            check_head(
                &e,
                206,
                &map(&[
                    ("content-range", "bytes 100-199/*"),
                    ("content-range", "bytes 100-199/*"),
                ]),
            ),
            Status::Http,
            "malformed Content-Range \"bytes 100-199/*, bytes 100-199/*\"",
        );
        for (cr, x, y) in [
            ("bytes 0-199/1000", 0, 199),
            ("bytes 101-199/1000", 101, 199),
            ("bytes 100-200/1000", 100, 200),
            ("bytes 100-149/1000", 100, 149),
            ("bytes 100-149/*", 100, 149),
            ("bytes 100-149/151", 100, 149),
        ] {
            failed(
                check_head(&e, 206, &map(&[("content-range", cr)])),
                Status::Http,
                &format!("Content-Range [{x}, {y}] does not satisfy requested [100, 199]"),
            );
        }
        failed(
            check_head(
                &e,
                206,
                &map(&[
                    ("content-range", "bytes 100-199/1000"),
                    ("content-length", "99"),
                ]),
            ),
            Status::Http,
            "Content-Length 99 does not match Content-Range [100, 199]",
        );
    }

    #[test]
    fn multipart_answers_are_refused_whatever_their_content_range() {
        let e = expect(100, 199);
        for ct in [
            "multipart/byteranges; boundary=x",
            "Multipart/ByteRanges",
            " multipart/byteranges ;boundary=\"a;b\"",
        ] {
            let h = map(&[
                ("content-range", "bytes 100-199/1000"),
                ("content-type", ct),
            ]);
            failed(
                check_head(&e, 206, &h),
                Status::Http,
                &format!(
                    "a multipart/byteranges answer to the single range [100, 199] \
                     (Content-Type {ct:?})"
                ),
            );
        }
        for ct in [
            "application/octet-stream",
            "multipart/mixed",
            "text/multipart/byteranges",
        ] {
            let h = map(&[
                ("content-range", "bytes 100-199/1000"),
                ("content-type", ct),
            ]);
            assert_eq!(
                check_head(&e, 206, &h),
                body(0, 100, 100, Some(1000)),
                "{ct}"
            );
        }
    }

    #[test]
    fn resumed_partial_content_starts_at_the_resumed_byte() {
        let e = Expect {
            original_start: 100,
            ..expect(150, 199)
        };
        let h = map(&[("content-range", "bytes 150-199/1000")]);
        assert_eq!(check_head(&e, 206, &h), body(0, 150, 50, Some(1000)));
        let h = map(&[("content-range", "bytes 100-199/1000")]);
        failed(
            check_head(&e, 206, &h),
            Status::Http,
            "Content-Range [100, 199] does not satisfy requested [150, 199]",
        );
    }

    #[test]
    fn whole_object_answers() {
        // From byte 0: keep what was asked.
        let h = map(&[("content-length", "1000")]);
        assert_eq!(
            check_head(&expect(0, 99), 200, &h),
            body(0, 0, 100, Some(1000))
        );
        assert_eq!(
            check_head(&expect(0, 99), 200, &HeaderMap::new()),
            body(0, 0, 100, None)
        );
        // Short object.
        let h = map(&[("content-length", "40")]);
        assert_eq!(
            check_head(&expect(0, 99), 200, &h),
            body(0, 0, 40, Some(40))
        );
        // Past offset 0, within the limit: skip.
        let h = map(&[("content-length", "1000")]);
        assert_eq!(
            check_head(&expect(500, 599), 200, &h),
            body(500, 500, 100, Some(1000))
        );
        let e = Expect {
            fallback_limit: 500,
            ..expect(500, 599)
        };
        assert_eq!(check_head(&e, 200, &h), body(500, 500, 100, Some(1000)));
        // The object ends before the request: nothing to keep.
        let h = map(&[("content-length", "300")]);
        assert_eq!(
            check_head(&expect(500, 599), 200, &h),
            body(300, 500, 0, Some(300))
        );
        // Beyond the limit.
        let e = Expect {
            fallback_limit: 499,
            ..expect(500, 599)
        };
        failed(
            check_head(&e, 200, &h),
            Status::Http,
            "server ignored Range; refusing to discard 500 bytes (limit 499)",
        );
        let e = Expect {
            fallback_limit: 0,
            ..expect(1, 1)
        };
        failed(
            check_head(&e, 200, &h),
            Status::Http,
            "server ignored Range; refusing to discard 1 bytes (limit 0)",
        );
    }

    #[test]
    fn whole_object_while_resuming_restarts_from_the_original_start() {
        let h = map(&[("content-length", "1000")]);
        let e = Expect {
            original_start: 0,
            ..expect(60, 99)
        };
        let mut want = body(0, 0, 100, Some(1000));
        if let Head::Body { restarted, .. } = &mut want {
            *restarted = true;
        }
        assert_eq!(check_head(&e, 200, &h), want);
        // The limit is checked against the original offset, not the resumed one.
        let e = Expect {
            original_start: 10,
            fallback_limit: 10,
            ..expect(60, 99)
        };
        assert!(matches!(
            check_head(&e, 200, &h),
            Head::Body {
                skip: 10,
                first: 10,
                len: 90,
                restarted: true,
                ..
            }
        ));
        let e = Expect {
            original_start: 11,
            fallback_limit: 10,
            ..expect(60, 99)
        };
        failed(
            check_head(&e, 200, &h),
            Status::Http,
            "server ignored Range; refusing to discard 11 bytes (limit 10)",
        );
    }

    #[test]
    fn statuses() {
        let e = expect(0, 9);
        failed(
            check_head(&e, 416, &HeaderMap::new()),
            Status::Range,
            "HTTP 416",
        );
        for s in [301, 304, 400, 401, 403, 404, 412, 429, 500, 503, 101] {
            assert_eq!(
                check_head(&e, s, &HeaderMap::new()),
                Head::ErrorBody { status: s }
            );
        }
        for s in [201, 203, 204, 299] {
            failed(
                check_head(&e, s, &HeaderMap::new()),
                Status::Http,
                &format!("unexpected HTTP {s} response to a range request"),
            );
        }
    }

    #[test]
    fn transformed_encodings() {
        let e = expect(0, 9);
        let cr = ("content-range", "bytes 0-9/100");
        failed(
            check_head(
                &e,
                206,
                &map(&[cr, ("x-goog-stored-content-encoding", "gzip")]),
            ),
            Status::Http,
            "the server decoded an object stored with Content-Encoding gzip (GCS decompressive \
             transcoding), so the body is not the stored bytes; read it through gs:// or send \
             \"Accept-Encoding: gzip\" through KARU_HTTP_HEADERS",
        );
        failed(
            check_head(
                &e,
                200,
                &map(&[
                    ("x-goog-stored-content-encoding", "gzip"),
                    ("content-encoding", "br"),
                ]),
            ),
            Status::Http,
            "Content-Encoding br differs from the stored encoding gzip, so the body is not the \
             stored bytes",
        );
        failed(
            check_head(
                &e,
                200,
                &map(&[
                    ("x-goog-stored-content-encoding", "identity"),
                    ("content-encoding", "gzip"),
                ]),
            ),
            Status::Http,
            "Content-Encoding gzip differs from the stored encoding identity, so the body is not \
             the stored bytes",
        );
        failed(
            check_head(
                &e,
                206,
                &map(&[cr, ("warning", "214 - \"Transformation Applied\"")]),
            ),
            Status::Http,
            "the response carries Warning: 214 (Transformation Applied), so the body is not the \
             stored bytes",
        );
        // Matching encodings, and encodings without a stored counterpart, are the stored bytes.
        for h in [
            map(&[
                cr,
                ("x-goog-stored-content-encoding", "gzip"),
                ("content-encoding", "GZIP"),
            ]),
            map(&[cr, ("x-goog-stored-content-encoding", "identity")]),
            map(&[cr, ("content-encoding", "gzip")]),
            map(&[cr, ("warning", "110 - \"Response is Stale\"")]),
        ] {
            assert_eq!(check_head(&e, 206, &h), body(0, 0, 10, Some(100)), "{h:?}");
        }
        // A transformed error page is still an error page.
        let h = map(&[("x-goog-stored-content-encoding", "gzip")]);
        assert_eq!(check_head(&e, 404, &h), Head::ErrorBody { status: 404 });
    }

    #[test]
    fn etag_pins() {
        let h = map(&[("content-range", "bytes 0-9/100"), ("etag", "\"v2\"")]);
        let caller = Expect {
            pin: Some("\"v1\""),
            pin_is_callers: true,
            unmodified: None,
            ..expect(0, 9)
        };
        match check_head(&caller, 206, &h) {
            Head::Precondition(e) => {
                assert_eq!(e.status(), Status::Precondition);
                assert_eq!(
                    e.message(),
                    format!(
                        "{URL}: the server ignored If-Match and sent ETag \"v2\", so the object \
                         no longer matches if_match"
                    )
                );
            }
            other => panic!("{other:?}"),
        }
        // The same check applies to a 200.
        assert!(matches!(
            check_head(&caller, 200, &map(&[("etag", "\"v2\"")])),
            Head::Precondition(_)
        ));
        let own = Expect {
            pin_is_callers: false,
            unmodified: None,
            ..caller
        };
        assert_eq!(check_head(&own, 206, &h), Head::VersionChanged);
        assert_eq!(
            check_head(&own, 200, &map(&[("etag", "\"v2\"")])),
            Head::VersionChanged
        );

        // An answer without a strong ETag does not prove a pin: a caller's pin fails, a
        // resume restarts. Only a whole body to a resume is taken, as a restart.
        for tag in [None, Some("W/\"v1\""), Some("v1")] {
            let mut h = map(&[("content-range", "bytes 0-9/100")]);
            if let Some(t) = tag {
                h.insert("etag", HeaderValue::from_str(t).unwrap());
            }
            let shown = tag.map_or("no ETag".to_owned(), |t| format!("ETag {t}"));
            for status in [200, 206] {
                match check_head(&caller, status, &h) {
                    Head::Precondition(e) => assert_eq!(
                        e.message(),
                        format!(
                            "{URL}: the server answered If-Match \"v1\" without a strong ETag \
                             ({shown}), so the bytes may not be the version if_match names"
                        )
                    ),
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(check_head(&own, 206, &h), Head::VersionChanged, "{tag:?}");
            let resumed = Expect {
                original_start: 0,
                ..own
            };
            assert!(matches!(
                check_head(
                    &Expect {
                        start: 5,
                        ..resumed
                    },
                    200,
                    &h
                ),
                Head::Body {
                    restarted: true,
                    etag: None,
                    ..
                }
            ));
        }

        // Nothing contradicts: a matching tag, or a pin that is not one strong tag.
        let keep = |pin: &'static str, etag: Option<&str>| {
            let mut h = map(&[("content-range", "bytes 0-9/100")]);
            if let Some(t) = etag {
                h.insert("etag", HeaderValue::from_str(t).unwrap());
            }
            let e = Expect {
                pin: Some(pin),
                ..caller
            };
            assert!(
                matches!(check_head(&e, 206, &h), Head::Body { .. }),
                "{pin} {etag:?}"
            );
        };
        keep("\"v2\"", Some("\"v2\""));
        keep("*", None);
        keep("*", Some("\"v2\""));
        keep("\"v1\", \"v3\"", Some("\"v2\""));
    }

    /// Values near `x`, where off-by-one mistakes live, and anything else.
    fn near(x: u64) -> impl Strategy<Value = u64> {
        prop_oneof![
            Just(x),
            Just(x.saturating_sub(1)),
            Just(x.saturating_add(1)),
            any::<u64>()
        ]
    }

    /// A request `[start, end]` and a Content-Range `(first, last, total)` close to it.
    fn case() -> impl Strategy<Value = (u64, u64, u64, u64, Option<u64>)> {
        (any::<u64>(), any::<u64>())
            .prop_map(|(a, b)| (a.min(b), a.max(b)))
            .prop_flat_map(|(s, e)| (Just(s), Just(e), near(s), prop_oneof![near(e), s..=e]))
            .prop_flat_map(|(s, e, f, l)| {
                let total = prop::option::of(prop_oneof![
                    near(l.saturating_add(1)),
                    near(e.saturating_add(1))
                ]);
                (Just(s), Just(e), Just(f), Just(l), total)
            })
    }

    proptest! {
        #[test]
        fn valid_partial_content_is_accepted(
            start in any::<u64>(),
            span in any::<u64>(),
            cut in any::<u64>(),
            star in any::<bool>(),
        ) {
            let end = start.saturating_add(span % (1 << 40));
            prop_assume!(!(start == 0 && end == u64::MAX));
            // Either the whole request, or a prefix ending at the object's last byte.
            let last = start + cut % (end - start + 1);
            let total = if last < end {
                Some(last + 1)
            } else if star {
                None
            } else {
                end.checked_add(1 + cut % 7)
            };
            let cr = ContentRange { first: start, last, total };
            let h = map(&[("content-range", &cr.to_string())]);
            let head = check_head(&expect(start, end), 206, &h);
            prop_assert_eq!(head, body(0, start, last - start + 1, total));
        }

        #[test]
        fn partial_content_matches_the_rule((start, end, first, last, total) in case()) {
            let value = match total {
                Some(t) => format!("bytes {first}-{last}/{t}"),
                None => format!("bytes {first}-{last}/*"),
            };
            let head = check_head(&expect(start, end), 206, &map(&[("content-range", &value)]));
            match content_range::parse(&value) {
                None => prop_assert!(
                    matches!(head, Head::Fail(ref e) if e.message().contains("malformed Content-Range")),
                    "{:?}", head
                ),
                Some(cr) => {
                    let ok = first == start
                        && last <= end
                        && (last == end || total == last.checked_add(1));
                    if ok {
                        prop_assert_eq!(head, body(0, start, cr.len(), total));
                    } else {
                        prop_assert!(
                            matches!(head, Head::Fail(ref e) if e.message().contains("does not satisfy")),
                            "{:?}", head
                        );
                    }
                }
            }
        }
        #[test]
        fn never_panics(
            start in any::<u64>(),
            end in any::<u64>(),
            original_start in any::<u64>(),
            fallback_limit in any::<u64>(),
            status in 100u16..600,
            cr in "[ -~]{0,40}",
            cl in prop::option::of(any::<u64>()),
        ) {
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&cr) {
                h.insert(CONTENT_RANGE, v);
            }
            if let Some(n) = cl {
                h.insert(http::header::CONTENT_LENGTH, n.into());
            }
            let e = Expect { original_start, fallback_limit, ..expect(start, end) };
            let _ = check_head(&e, status, &h);
        }
    }
}
