//! Version conditions: what pins a ranged GET to one version of an object, and the check
//! that an answer proves the version a `Last-Modified` pin names.

use http::HeaderMap;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, LAST_MODIFIED};

use super::{SHOWN_MAX, fail, shown};
use crate::error::{Error, Status};

/// The version condition a read carries, sent with every attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Condition {
    /// `If-Match`: the ETag as given (a single strong tag pins a version; `*` or a list is
    /// sent as the caller wrote it).
    IfMatch(String),
    /// `If-Unmodified-Since`, for objects without a strong ETag: the `Last-Modified` date
    /// every answer must repeat, and the object size it must state (when known).
    IfUnmodifiedSince {
        /// The `Last-Modified` value a first answer gave, sent and compared as is.
        date: String,
        /// The object size (`Content-Range` total) every answer must state.
        total: Option<u64>,
    },
}

impl Condition {
    /// The header that carries the condition, and its value.
    pub(crate) fn header(&self) -> (http::HeaderName, &str) {
        match self {
            Condition::IfMatch(tag) => (http::header::IF_MATCH, tag),
            Condition::IfUnmodifiedSince { date, .. } => (http::header::IF_UNMODIFIED_SINCE, date),
        }
    }

    /// The `If-Match` value, for `If-Match` pins.
    pub(crate) fn if_match(&self) -> Option<&str> {
        match self {
            Condition::IfMatch(tag) => Some(tag),
            Condition::IfUnmodifiedSince { .. } => None,
        }
    }
}

/// The object size an answer states: `Content-Range`'s total on a 206, `Content-Length` on
/// a plain 200.
pub(crate) fn stated_total(status: u16, headers: &HeaderMap) -> Option<u64> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
    match status {
        206 => header(CONTENT_RANGE)?
            .rsplit_once('/')?
            .1
            .trim()
            .parse()
            .ok(),
        200 if header(CONTENT_ENCODING).is_none() => header(CONTENT_LENGTH)?.trim().parse().ok(),
        _ => None,
    }
}

/// PRECONDITION unless a 2xx answer repeats `date` as its `Last-Modified` and states `total`
/// (when known) as the object size: a server that ignored `If-Unmodified-Since`, or a
/// `Last-Modified` that cannot be compared, never passes off another version's bytes.
pub(crate) fn check_unmodified(
    url: &str,
    date: &str,
    total: Option<u64>,
    status: u16,
    headers: &HeaderMap,
) -> Option<Error> {
    let modified = headers.get(LAST_MODIFIED).and_then(|v| v.to_str().ok());
    if modified != Some(date) {
        let seen = match modified {
            Some(_) => shown(headers, &LAST_MODIFIED),
            None => "missing".to_owned(),
        };
        let pinned: String = date.chars().take(SHOWN_MAX).collect();
        return Some(fail(
            Status::Precondition,
            url,
            format_args!(
                "the object changed: Last-Modified is {seen}, the read is pinned to {pinned}"
            ),
        ));
    }
    let stated = stated_total(status, headers);
    match (total, stated) {
        (Some(want), Some(got)) if want != got => Some(fail(
            Status::Precondition,
            url,
            format_args!("the object changed: its size is {got}, the read is pinned to {want}"),
        )),
        (Some(_), None) => Some(fail(
            Status::Precondition,
            url,
            "the answer does not state the object size, so it may be another version",
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Wed, 21 Oct 2015 07:28:00 GMT";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn the_stated_total_comes_from_content_range_or_a_plain_length() {
        let mut h = headers(&[("content-range", "bytes 0-9/100"), ("content-length", "10")]);
        assert_eq!(stated_total(206, &h), Some(100));
        assert_eq!(stated_total(200, &h), Some(10));
        h.insert(CONTENT_ENCODING, "gzip".parse().unwrap());
        assert_eq!(stated_total(200, &h), None);
        assert_eq!(stated_total(416, &h), None);
    }

    #[test]
    fn an_answer_proves_a_last_modified_pin_only_with_the_same_date_and_size() {
        let ok = headers(&[("last-modified", DATE), ("content-range", "bytes 0-9/100")]);
        assert!(check_unmodified("u", DATE, Some(100), 206, &ok).is_none());
        assert!(check_unmodified("u", DATE, None, 206, &ok).is_none());
        let bad = [
            headers(&[("content-range", "bytes 0-9/100")]),
            headers(&[
                ("last-modified", "Thu, 22 Oct 2015 07:28:00 GMT"),
                ("content-range", "bytes 0-9/100"),
            ]),
            headers(&[("last-modified", DATE), ("content-range", "bytes 0-9/101")]),
            headers(&[("last-modified", DATE)]),
        ];
        for h in &bad {
            let e = check_unmodified("u", DATE, Some(100), 206, h).expect("refused");
            assert_eq!(e.status(), Status::Precondition, "{h:?}");
        }
    }

    #[test]
    fn pins_name_their_header() {
        assert_eq!(
            Condition::IfMatch("\"e\"".into()).header(),
            (http::header::IF_MATCH, "\"e\"")
        );
        let since = Condition::IfUnmodifiedSince {
            date: DATE.into(),
            total: None,
        };
        assert_eq!(since.header(), (http::header::IF_UNMODIFIED_SINCE, DATE));
        assert_eq!(since.if_match(), None);
    }
}
