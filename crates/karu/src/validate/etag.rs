//! Strong entity tags: the only ones Karu keeps, because only a strong tag promises
//! byte-identical content, which resuming and `If-Match` pinning rely on.

use http::HeaderMap;
use http::header::ETAG;

/// Longest tag kept, quotes included.
const MAX_LEN: usize = 255;

/// Whether `tag` is one strong entity tag: `"…"`, at most 255 bytes with the quotes, no `W/`
/// prefix, every byte inside the quotes at least 0x21 and neither `"` nor 0x7F.
///
/// A list (`"a", "b"`) fails because its inner part holds a `"`.
pub(crate) fn is_strong(tag: &[u8]) -> bool {
    tag.len() >= 2
        && tag.len() <= MAX_LEN
        && tag[0] == b'"'
        && tag[tag.len() - 1] == b'"'
        && tag[1..tag.len() - 1]
            .iter()
            .all(|&b| b >= 0x21 && b != b'"' && b != 0x7F)
}

/// The response's strong ETag, if it has exactly one `ETag` field holding a strong tag.
///
/// Tags that are not UTF-8 are dropped too: they cannot be carried as a `String`, and losing
/// one only costs a restart instead of a resume.
pub(crate) fn strong(headers: &HeaderMap) -> Option<String> {
    let mut values = headers.get_all(ETAG).iter();
    let value = values.next()?;
    if values.next().is_some() {
        // Two ETag fields name no single version.
        return None;
    }
    let tag = value.as_bytes().trim_ascii();
    if !is_strong(tag) {
        return None;
    }
    std::str::from_utf8(tag).ok().map(str::to_owned)
}

/// Whether an `If-Match` value is a single strong tag, the only kind of pin a response ETag
/// can be checked against and a resume can reuse (not `*`, not a list, not weak).
pub(crate) fn is_single_strong(if_match: &str) -> bool {
    is_strong(if_match.as_bytes().trim_ascii())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_etag(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(ETAG, HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn keeps_only_strong_tags() {
        assert_eq!(strong(&with_etag(&[b"\"abc\""])), Some("\"abc\"".into()));
        assert_eq!(strong(&with_etag(&[b"\"\""])), Some("\"\"".into()));
        assert_eq!(
            strong(&with_etag(&[b"\"d41d8cd98f00b204e9800998ecf8427e-3\""])),
            Some("\"d41d8cd98f00b204e9800998ecf8427e-3\"".into())
        );
        assert_eq!(
            strong(&with_etag(&["\"é\"".as_bytes()])),
            Some("\"é\"".into())
        );
        assert_eq!(strong(&HeaderMap::new()), None);
        for bad in [
            &b"W/\"abc\""[..],
            b"abc",
            b"\"abc",
            b"abc\"",
            b"\"",
            b"\"a b\"",
            b"\"a\tb\"",
            b"\"a\"b\"",
            b"\"a\", \"b\"",
            b"*",
            b"\"\xff\"",
        ] {
            assert_eq!(strong(&with_etag(&[bad])), None, "{bad:?}");
        }
        assert_eq!(strong(&with_etag(&[b"\"a\"", b"\"a\""])), None);
        // HeaderValue cannot hold 0x7F, but a tag string from elsewhere can.
        assert!(!is_strong(b"\"a\x7fb\""));
        assert!(is_strong(b"\"a\x80b\""));
    }

    #[test]
    fn length_limit_counts_the_quotes() {
        let ok = format!("\"{}\"", "x".repeat(253));
        let long = format!("\"{}\"", "x".repeat(254));
        assert_eq!(strong(&with_etag(&[ok.as_bytes()])), Some(ok));
        assert_eq!(strong(&with_etag(&[long.as_bytes()])), None);
    }

    #[test]
    fn single_strong_pins() {
        assert!(is_single_strong("\"v1\""));
        assert!(is_single_strong(" \"v1\" "));
        assert!(is_single_strong("\"a,b\""));
        assert!(!is_single_strong("*"));
        assert!(!is_single_strong("\"a\", \"b\""));
        assert!(!is_single_strong("\"a\",\"b\""));
        assert!(!is_single_strong("W/\"a\""));
        assert!(!is_single_strong(""));
        assert!(!is_single_strong("v1"));
    }
}
