//! Service roots given as options (`AWS_S3_ENDPOINT`, `SOURCE_ENDPOINT`, `GCS_ENDPOINT`,
//! `HF_ENDPOINT`, Azure's endpoints): checked once per profile, and a bad endpoint fails
//! each read that uses it with CONFIG (spec §3.3).

use std::str::FromStr;

use http::uri::Authority;

use crate::error::{Error, Status};

/// A checked service root: `http` or `https`, an authority without user information, and a
/// path prefix without a trailing slash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Endpoint {
    /// `http` or `https`.
    pub(super) scheme: &'static str,
    /// `host[:port]` as written (IPv6 literals keep their brackets).
    pub(super) authority: String,
    /// Empty or `/segment...`, never ending in `/`.
    pub(super) path: String,
}

impl Endpoint {
    /// Checks the value of option `name`. A value without `scheme://` gets `default_scheme`.
    /// The problem names the option but never repeats the value, which may carry secrets;
    /// [`Endpoint::invalid`] makes it the error of a read.
    pub(super) fn check(
        name: &str,
        value: &str,
        default_scheme: &'static str,
    ) -> std::result::Result<Endpoint, String> {
        let fail = |problem: &str| format!("{name} {problem}");
        let value = value.trim();
        if value.contains('?') {
            return Err(fail("cannot contain a query"));
        }
        if value.contains('#') {
            return Err(fail("cannot contain a fragment"));
        }
        let (scheme, rest) = match value.split_once("://") {
            Some((s, rest)) if s.eq_ignore_ascii_case("https") => ("https", rest),
            Some((s, rest)) if s.eq_ignore_ascii_case("http") => ("http", rest),
            Some(_) => return Err(fail("must be an http or https URL")),
            None => (default_scheme, value),
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.is_empty() {
            return Err(fail("has no host"));
        }
        if authority.contains('@') {
            return Err(fail("cannot contain user information"));
        }
        let (host, port) = match authority.strip_prefix('[') {
            // An IPv6 literal: `[addr]` then an optional `:port`.
            Some(inner) => match inner.split_once(']') {
                Some((addr, "")) => (addr, None),
                Some((addr, rest)) => (addr, Some(rest.strip_prefix(':').unwrap_or(rest))),
                None => ("", None),
            },
            None => match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            },
        };
        if host.is_empty() || Authority::from_str(authority).is_err() {
            return Err(fail("has an invalid host"));
        }
        if port.is_some_and(|p| !p.bytes().all(|b| b.is_ascii_digit()) || p.parse::<u16>().is_err())
        {
            return Err(fail("has an invalid port"));
        }
        let path = path.trim_end_matches('/');
        // The path is sent as written: it must already be a valid URL path.
        if !path.is_empty() && http::uri::PathAndQuery::from_str(path).is_err() {
            return Err(fail("has an invalid path"));
        }
        Ok(Endpoint {
            scheme,
            authority: authority.to_owned(),
            path: path.to_owned(),
        })
    }

    /// The CONFIG error of a read of `what` (the object's path) through an endpoint with
    /// `problem`.
    pub(super) fn invalid(what: &str, problem: &str) -> Error {
        Error::new(Status::Config, format!("{what}: {problem}"))
    }

    /// `scheme://authority/path` with no trailing slash.
    pub(super) fn root(&self) -> String {
        format!("{}://{}{}", self.scheme, self.authority, self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;

    fn parse(value: &str) -> Result<Endpoint> {
        Endpoint::check("AWS_S3_ENDPOINT", value, "https")
            .map_err(|problem| Endpoint::invalid("/vsis3/b/k", &problem))
    }

    #[test]
    fn roots_keep_scheme_authority_and_path_without_trailing_slashes() {
        let cases = [
            ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
            ("http://127.0.0.1:9000/", "http://127.0.0.1:9000"),
            ("HTTPS://minio.example/s3//", "https://minio.example/s3"),
            ("minio.example:9000", "https://minio.example:9000"),
            ("  http://[::1]:9000/  ", "http://[::1]:9000"),
        ];
        for (value, root) in cases {
            assert_eq!(parse(value).unwrap().root(), root, "{value}");
        }
        let host_only = Endpoint::check("AWS_S3_ENDPOINT", "h:1", "http").unwrap();
        assert_eq!(host_only.root(), "http://h:1");
    }

    #[test]
    fn malformed_endpoints_are_config_errors_naming_the_option_not_the_value() {
        let cases = [
            ("http://h/?x=1", "AWS_S3_ENDPOINT cannot contain a query"),
            ("http://h?secret", "AWS_S3_ENDPOINT cannot contain a query"),
            ("http://h/#f", "AWS_S3_ENDPOINT cannot contain a fragment"),
            ("ftp://h", "AWS_S3_ENDPOINT must be an http or https URL"),
            ("http://", "AWS_S3_ENDPOINT has no host"),
            ("http:///bucket", "AWS_S3_ENDPOINT has no host"),
            (
                "http://user:secret@h",
                "AWS_S3_ENDPOINT cannot contain user information",
            ),
            ("http://h:port", "AWS_S3_ENDPOINT has an invalid port"),
            ("http://h:99999", "AWS_S3_ENDPOINT has an invalid port"),
            ("http://h:", "AWS_S3_ENDPOINT has an invalid port"),
            ("http://h:+1", "AWS_S3_ENDPOINT has an invalid port"),
            ("http://[::1", "AWS_S3_ENDPOINT has an invalid host"),
            ("http://[::1]x", "AWS_S3_ENDPOINT has an invalid port"),
            ("http://:9000", "AWS_S3_ENDPOINT has an invalid host"),
            ("http://a b", "AWS_S3_ENDPOINT has an invalid host"),
            ("http://h/a b", "AWS_S3_ENDPOINT has an invalid path"),
        ];
        for (value, message) in cases {
            let e = parse(value).unwrap_err();
            assert_eq!(e.status(), Status::Config, "{value}");
            assert_eq!(e.message(), format!("/vsis3/b/k: {message}"), "{value}");
            assert!(!e.message().contains("secret"));
        }
    }
}
