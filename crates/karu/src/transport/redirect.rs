//! Redirect rules (spec §5.3, §5.4): which statuses redirect, how `Location` resolves against
//! the current URL, and origin comparison with default ports filled in.

use http::Uri;

use super::{TransportError, TransportErrorKind};

/// Statuses that are followed when they carry a `Location`.
pub(crate) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// Scheme, lower-case host and port (the scheme's default when absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

/// The origin of an absolute URI.
pub(crate) fn origin(uri: &Uri) -> Origin {
    let scheme = uri.scheme_str().unwrap_or("").to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    Origin {
        host: uri.host().unwrap_or("").to_ascii_lowercase(),
        port: uri.port_u16().or(default),
        scheme,
    }
}

/// Resolves `location` against `current` and returns the URL to request next.
///
/// An absolute `http(s)://` location that hyper can carry is used exactly as written (like
/// the first URL: no path normalisation). Anything else is resolved with the `url` crate
/// (which normalises dot segments and percent-encodes what HTTP cannot carry, as a browser
/// would). Fragments are dropped: they are never sent.
pub(crate) fn resolve_location(current: &str, location: &str) -> Result<String, TransportError> {
    let location = location.trim();
    let invalid = |why: String| {
        TransportError::new(
            TransportErrorKind::InvalidUrl,
            format!(
                "invalid redirect Location {:?}: {why}",
                crate::locator::redact_url(location)
            ),
        )
    };
    let lower = location.get(..8).unwrap_or(location).to_ascii_lowercase();
    if (lower.starts_with("http://") || lower.starts_with("https://"))
        && !location.contains('#')
        && let Ok(uri) = location.parse::<Uri>()
        && uri.authority().is_some()
    {
        return Ok(location.to_owned());
    }
    let base = url::Url::parse(current).map_err(|e| invalid(e.to_string()))?;
    let mut next = base.join(location).map_err(|e| invalid(e.to_string()))?;
    if next.scheme() != "http" && next.scheme() != "https" {
        return Err(TransportError::new(
            TransportErrorKind::RedirectProtocol,
            format!("Protocol \"{}\" disabled", next.scheme()),
        ));
    }
    next.set_fragment(None);
    Ok(next.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        for s in [301, 302, 303, 307, 308] {
            assert!(is_redirect(s));
        }
        for s in [200, 206, 300, 304, 305, 306, 404] {
            assert!(!is_redirect(s));
        }
    }

    #[test]
    fn origins_fill_default_ports() {
        let o = |s: &str| origin(&s.parse::<Uri>().unwrap());
        assert_eq!(o("http://Example.COM/a"), o("http://example.com:80/b"));
        assert_eq!(o("https://h/"), o("https://h:443/"));
        assert_ne!(o("http://h/"), o("https://h/"));
        assert_ne!(o("http://h/"), o("http://h:8080/"));
        assert_ne!(o("http://h/"), o("http://g/"));
    }

    #[test]
    fn locations() {
        let cur = "http://h:8080/dir/file?q=1";
        assert_eq!(
            resolve_location(cur, "other").unwrap(),
            "http://h:8080/dir/other"
        );
        assert_eq!(resolve_location(cur, "/x/y").unwrap(), "http://h:8080/x/y");
        assert_eq!(resolve_location(cur, "//g/z").unwrap(), "http://g/z");
        assert_eq!(
            resolve_location(cur, "?p=2").unwrap(),
            "http://h:8080/dir/file?p=2"
        );
        assert_eq!(resolve_location(cur, "/a#frag").unwrap(), "http://h:8080/a");
        // Absolute locations stay as written.
        assert_eq!(
            resolve_location(cur, "https://G/a%20b/../c").unwrap(),
            "https://G/a%20b/../c"
        );
        let e = resolve_location(cur, "ftp://g/file").unwrap_err();
        assert_eq!(e.kind, TransportErrorKind::RedirectProtocol);
        assert_eq!(e.message, "Protocol \"ftp\" disabled");
        let e = resolve_location(cur, "http://[::1").unwrap_err();
        assert_eq!(e.kind, TransportErrorKind::InvalidUrl);
        // A presigned Location's query and user information stay out of the message.
        let e =
            resolve_location(cur, "http://u:pw-secret@[::1/o?X-Amz-Signature=s3cr3t").unwrap_err();
        assert_eq!(e.kind, TransportErrorKind::InvalidUrl);
        assert!(
            e.message
                .starts_with("invalid redirect Location \"http://<redacted>@[::1/o?<redacted>\""),
            "{}",
            e.message
        );
    }
}
