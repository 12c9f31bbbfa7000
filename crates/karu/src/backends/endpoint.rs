//! Service roots from endpoint options (spec §3.3): checked when a request is built, so a bad
//! endpoint fails every read of that backend with CONFIG.

use crate::error::{Error, Result, Status};
use crate::locator::Locator;

/// The service root named by endpoint option `option` (value `value`) for a read of
/// `locator`: `https://` is added to a bare host, trailing slashes are trimmed, and the URL
/// must be http or https with a host, without user information, query or fragment.
pub(super) fn service_root(locator: &Locator, option: &str, value: &str) -> Result<String> {
    let fail = |why: &str| {
        Error::new(
            Status::Config,
            format!("{}: {option} {why}", locator.display()),
        )
    };
    let value = value.trim();
    let with_scheme = match value.find("://") {
        Some(i) => {
            let scheme = &value[..i];
            if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
                return Err(fail("must be an http or https URL"));
            }
            value.to_owned()
        }
        None => format!("https://{value}"),
    };
    if with_scheme.contains('?') {
        return Err(fail("cannot contain a query"));
    }
    if with_scheme.contains('#') {
        return Err(fail("cannot contain a fragment"));
    }
    let after_scheme = &with_scheme[with_scheme.find("://").map_or(0, |i| i + 3)..];
    let authority = after_scheme.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err(fail("cannot contain user information"));
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err(fail("has no host"));
    }
    Ok(with_scheme.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(value: &str) -> Result<String> {
        let l = Locator::parse("gs://bucket/key").unwrap();
        service_root(&l, "GCS_ENDPOINT", value)
    }

    #[test]
    fn roots() {
        assert_eq!(root("http://127.0.0.1:9/").unwrap(), "http://127.0.0.1:9");
        assert_eq!(root("example.com").unwrap(), "https://example.com");
        assert_eq!(root("HTTPS://h/p//").unwrap(), "HTTPS://h/p");
        assert_eq!(root(" https://h:443 ").unwrap(), "https://h:443");
    }

    #[test]
    fn rejections_name_the_option() {
        for (value, why) in [
            ("ftp://h", "must be an http or https URL"),
            ("https://h/?a=1", "cannot contain a query"),
            ("h?x", "cannot contain a query"),
            ("https://h/#f", "cannot contain a fragment"),
            ("https://u:p@h/", "cannot contain user information"),
            ("https://", "has no host"),
            ("https:///x", "has no host"),
            ("http://:80", "has no host"),
        ] {
            let e = root(value).unwrap_err();
            assert_eq!(e.status(), Status::Config, "{value}");
            assert_eq!(
                e.message(),
                format!("/vsigs/bucket/key: GCS_ENDPOINT {why}"),
                "{value}"
            );
        }
    }
}
