//! `KARU_HTTP_HEADERS` parsing and managed-header protection (spec 3.5).

use crate::error::{Error, Result, Status};

/// The message every read fails with when `KARU_HTTP_HEADERS` is malformed.
pub(crate) const MALFORMED: &str = "KARU_HTTP_HEADERS contains a malformed header";

/// Parses newline-separated `Name: value` lines. Lines are trimmed and empty ones skipped; a
/// line without a colon, or starting with one, makes the whole setting malformed (`None`).
pub(crate) fn parse_headers(text: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    for line in text.split('\n') {
        // Trimming also drops the '\r' of CRLF-separated input.
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (name, value) = line.split_once(':')?;
        if name.is_empty() {
            return None;
        }
        out.push((name.trim().to_string(), value.trim().to_string()));
    }
    Some(out)
}

/// Headers that only cloud (and Hugging Face) requests protect.
const CLOUD_MANAGED: &[&str] = &["authorization", "date", "if-match"];
const CLOUD_MANAGED_PREFIXES: &[&str] = &["x-amz-", "x-goog-", "x-ms-"];

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Checks user headers (from `KARU_HTTP_HEADERS`) against the headers karu manages for one
/// request. `Host`, `Range` and every name in `generated` are always protected; with `cloud`
/// (S3, GCS, Azure, Source, Hugging Face) so are `Authorization`, `Date`, `If-Match` and any
/// `x-amz-*`, `x-goog-*` or `x-ms-*` header. Names compare case-insensitively.
///
/// Fails with `Config` `"KARU_HTTP_HEADERS cannot override Karu-managed header '<Name>'"`,
/// naming the first offending header as the user wrote it.
pub fn check_managed_headers(
    headers: &[(String, String)],
    generated: &[&str],
    cloud: bool,
) -> Result<()> {
    for (name, _) in headers {
        let managed = name.eq_ignore_ascii_case("host")
            || name.eq_ignore_ascii_case("range")
            || generated.iter().any(|g| g.eq_ignore_ascii_case(name))
            || (cloud
                && (CLOUD_MANAGED.iter().any(|m| m.eq_ignore_ascii_case(name))
                    || CLOUD_MANAGED_PREFIXES
                        .iter()
                        .any(|p| starts_with_ignore_case(name, p))));
        if managed {
            return Err(Error::new(
                Status::Config,
                format!("KARU_HTTP_HEADERS cannot override Karu-managed header '{name}'"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn cloud_headers_are_managed_only_for_cloud_backends() {
        let user = pairs(&[("X-Trace", "1")]);
        assert!(check_managed_headers(&user, &["Accept-Encoding"], true).is_ok());
        let user = pairs(&[("x-amz-date", "now")]);
        let err = check_managed_headers(&user, &[], true).unwrap_err();
        assert_eq!(
            err.message(),
            "KARU_HTTP_HEADERS cannot override Karu-managed header 'x-amz-date'"
        );
        assert!(check_managed_headers(&user, &[], false).is_ok());
    }

    #[test]
    fn parses_trimmed_lines_and_skips_empty_ones() {
        let parsed = parse_headers("  X-A: 1 \n\n\r\nX-B:two:parts\r\nX-Empty:\n   \n").unwrap();
        assert_eq!(
            parsed,
            pairs(&[("X-A", "1"), ("X-B", "two:parts"), ("X-Empty", "")])
        );
        assert_eq!(parse_headers("").unwrap(), vec![]);
        assert_eq!(parse_headers("\n \n").unwrap(), vec![]);
    }

    #[test]
    fn malformed_lines_poison_the_whole_setting() {
        assert_eq!(parse_headers("X-A: 1\nno colon here"), None);
        assert_eq!(parse_headers(": value"), None);
        assert_eq!(parse_headers("X-A: 1\n  :leading colon after trim"), None);
    }

    #[test]
    fn always_managed() {
        for name in ["Host", "host", "RANGE", "Range"] {
            let err = check_managed_headers(&pairs(&[(name, "x")]), &[], false).unwrap_err();
            assert_eq!(err.status(), Status::Config);
            assert_eq!(
                err.message(),
                format!("KARU_HTTP_HEADERS cannot override Karu-managed header '{name}'")
            );
        }
        let generated = ["If-Match", "User-Agent"];
        assert!(check_managed_headers(&pairs(&[("user-agent", "x")]), &generated, false).is_err());
        assert!(check_managed_headers(&pairs(&[("if-match", "x")]), &generated, false).is_err());
        assert!(check_managed_headers(&pairs(&[("Accept", "x")]), &generated, false).is_ok());
    }

    #[test]
    fn cloud_managed() {
        for name in [
            "Authorization",
            "DATE",
            "If-Match",
            "x-amz-date",
            "X-Amz-Security-Token",
            "x-goog-user-project",
            "X-MS-VERSION",
        ] {
            let user = pairs(&[("X-Ok", "1"), (name, "x")]);
            let err = check_managed_headers(&user, &[], true).unwrap_err();
            assert_eq!(
                err.message(),
                format!("KARU_HTTP_HEADERS cannot override Karu-managed header '{name}'")
            );
            assert!(check_managed_headers(&user, &[], false).is_ok(), "{name}");
        }
        // A name that only shares letters with a managed prefix is fine.
        assert!(check_managed_headers(&pairs(&[("x-amzfoo", "1")]), &[], true).is_ok());
        assert!(check_managed_headers(&pairs(&[("x-ms", "1")]), &[], true).is_ok());
    }
}
