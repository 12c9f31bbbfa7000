//! What a non-2xx answer means: its status, and whether it is worth another attempt.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

use super::{backoff, fail, summary};
use crate::error::{Error, Status};

/// A classified failed attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The error the read gets if no attempt is left (or at once when not transient).
    pub(crate) error: Error,
    /// Worth retrying while attempts remain.
    pub(crate) transient: bool,
    /// The server asked Karu to slow down (429 or 503); counted as throttled.
    pub(crate) throttled: bool,
    /// The wait the server asked for, capped at 60 s.
    pub(crate) retry_after: Option<Duration>,
    /// The object changed under Karu's own resume pin: drop the kept prefix and the tag, then
    /// restart from scratch (a retry like any other).
    pub(crate) version_changed: bool,
}

impl Failure {
    /// A version change under Karu's own resume tag (a contradicting ETag, or a 412): retried
    /// as a restart; if attempts run out, HTTP "the object changed while an interrupted read
    /// was being resumed".
    pub(crate) fn version_changed(url: &str) -> Failure {
        Failure {
            error: super::version_changed(url),
            transient: true,
            throttled: false,
            retry_after: None,
            version_changed: true,
        }
    }
}

/// Classifies a non-2xx response from its status, headers and the first 4 KiB of its body.
///
/// `own_pin` says the request carried Karu's own resume tag in `If-Match` (not a caller's
/// `if_match`): a 412 then means the object changed mid-read, which is a restart rather than
/// a PRECONDITION failure.
///
/// 401/403 → AUTH, 404 → NOT_FOUND, 412 → PRECONDITION, 416 → RANGE ("HTTP 416"), others →
/// HTTP; 408, 425, 429, 5xx and a 400 whose body names `RequestTimeout` (S3 closing an idle
/// connection) are transient. Messages read `"<url>: HTTP <status>: <summary>"`.
pub(crate) fn classify_error(
    url: &str,
    status: u16,
    headers: &HeaderMap,
    body_prefix: &[u8],
    own_pin: bool,
) -> Failure {
    if status == 412 && own_pin {
        return Failure::version_changed(url);
    }
    let body = &body_prefix[..body_prefix.len().min(summary::CAPTURE)];
    let kind = match status {
        401 | 403 => Status::Auth,
        404 => Status::NotFound,
        412 => Status::Precondition,
        416 => Status::Range,
        _ => Status::Http,
    };
    let transient = matches!(status, 408 | 425 | 429 | 500..=599)
        || (status == 400 && contains(body, b"RequestTimeout"));
    let summary = summary::summary(body);
    // 416 needs no body text: the spec's message is exactly "HTTP 416".
    let error = if status == 416 || summary.is_empty() {
        fail(kind, url, format_args!("HTTP {status}"))
    } else {
        fail(kind, url, format_args!("HTTP {status}: {summary}"))
    };
    Failure {
        error,
        transient,
        throttled: matches!(status, 429 | 503),
        retry_after: backoff::retry_after(headers, SystemTime::now()),
        version_changed: false,
    }
}

/// Whether `needle` occurs in `haystack` (bodies need not be UTF-8).
fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use http::header::RETRY_AFTER;

    const URL: &str = "https://<redacted>@h/b/o?<redacted>";

    fn classify(status: u16, body: &str) -> Failure {
        classify_error(URL, status, &HeaderMap::new(), body.as_bytes(), false)
    }

    #[test]
    fn status_mapping_and_messages() {
        let cases = [
            (401, Status::Auth, false),
            (403, Status::Auth, false),
            (404, Status::NotFound, false),
            (412, Status::Precondition, false),
            (400, Status::Http, false),
            (405, Status::Http, false),
            (409, Status::Http, false),
            (302, Status::Http, false),
            (408, Status::Http, true),
            (425, Status::Http, true),
            (429, Status::Http, true),
            (500, Status::Http, true),
            (502, Status::Http, true),
            (503, Status::Http, true),
            (504, Status::Http, true),
            (599, Status::Http, true),
        ];
        for (status, kind, transient) in cases {
            let f = classify(status, "  <Error>\n <Code>X</Code>\n</Error>  ");
            assert_eq!(f.error.status(), kind, "{status}");
            assert_eq!(f.transient, transient, "{status}");
            assert_eq!(f.throttled, status == 429 || status == 503, "{status}");
            assert!(!f.version_changed);
            assert_eq!(f.retry_after, None);
            assert_eq!(
                f.error.message(),
                format!("{URL}: HTTP {status}: <Error> <Code>X</Code> </Error>")
            );
        }
    }

    #[test]
    fn range_and_empty_bodies() {
        let f = classify(416, "<Error>InvalidRange</Error>");
        assert_eq!(f.error.status(), Status::Range);
        assert_eq!(f.error.message(), format!("{URL}: HTTP 416"));
        assert!(!f.transient);
        let f = classify(500, " \n ");
        assert_eq!(f.error.message(), format!("{URL}: HTTP 500"));
    }

    #[test]
    fn s3_idle_timeout_is_transient() {
        let body = "<Error><Code>RequestTimeout</Code><Message>Your socket connection to the \
                    server was not read from or written to within the timeout period.</Message></Error>";
        let f = classify(400, body);
        assert!(f.transient);
        assert_eq!(f.error.status(), Status::Http);
        assert!(!classify(400, "<Code>BadDigest</Code>").transient);
        assert!(!classify(403, "RequestTimeout").transient);
        // Only the first 4 KiB are looked at.
        let late = format!("{}RequestTimeout", " ".repeat(4096));
        assert!(!classify(400, &late).transient);
    }

    #[test]
    fn precondition_with_and_without_own_pin() {
        let f = classify_error(URL, 412, &HeaderMap::new(), b"", true);
        assert!(f.version_changed && f.transient);
        assert_eq!(f.error.status(), Status::Http);
        assert_eq!(
            f.error.message(),
            format!("{URL}: the object changed while an interrupted read was being resumed")
        );
        let f = classify_error(URL, 412, &HeaderMap::new(), b"", false);
        assert!(!f.version_changed && !f.transient);
        assert_eq!(f.error.status(), Status::Precondition);
        assert_eq!(f.error.message(), format!("{URL}: HTTP 412"));
        // Karu's own pin changes nothing for other statuses.
        assert_eq!(
            classify_error(URL, 404, &HeaderMap::new(), b"", true)
                .error
                .status(),
            Status::NotFound
        );
    }

    #[test]
    fn retry_after_is_reported() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("3"));
        let f = classify_error(URL, 503, &h, b"slow down", false);
        assert!(f.throttled && f.transient);
        assert_eq!(f.retry_after, Some(Duration::from_secs(3)));
        h.insert(RETRY_AFTER, HeaderValue::from_static("600"));
        let f = classify_error(URL, 429, &h, b"", false);
        assert_eq!(f.retry_after, Some(Duration::from_secs(60)));
    }

    #[test]
    fn summary_is_bounded() {
        let f = classify(500, &"x".repeat(1000));
        assert_eq!(
            f.error.message(),
            format!("{URL}: HTTP 500: {}", "x".repeat(200))
        );
    }
}
