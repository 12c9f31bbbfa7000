//! Value validation at freeze (spec 3.3), with the reference's exact messages.

use std::collections::BTreeMap;

use super::options::{Kind, OptId, def};
use crate::error::{Error, Result, Status};

/// Parses a whole unsigned decimal string: ASCII digits only (no sign, no whitespace, not
/// empty). Leading zeros are accepted. `None` on any other input or on overflow.
pub(crate) fn parse_decimal(value: &str) -> Option<u64> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Digits only, so `parse` fails only on overflow.
    value.parse::<u64>().ok()
}

/// Parses a boolean spelling: YES/NO, TRUE/FALSE, ON/OFF or 1/0, any case.
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    let v = value.to_ascii_lowercase();
    match v.as_str() {
        "yes" | "true" | "on" | "1" => Some(true),
        "no" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Truth per spec 3.3: "yes", "true" or "on" in any case, or exactly "1".
pub(crate) fn is_truthy(value: &str) -> bool {
    value == "1"
        || value.eq_ignore_ascii_case("yes")
        || value.eq_ignore_ascii_case("true")
        || value.eq_ignore_ascii_case("on")
}

/// Parses an unsigned option that is known to be valid or absent, with a fallback default.
pub(crate) fn uint_or(value: Option<&str>, default: u64) -> u64 {
    value.and_then(parse_decimal).unwrap_or(default)
}

fn config_error(message: String) -> Error {
    Error::new(Status::Config, message)
}

/// Validates one value of a canonical option.
pub(crate) fn check(id: OptId, value: &str) -> Result<()> {
    let d = def(id);
    match d.kind {
        Kind::Text => Ok(()),
        Kind::Bool => match parse_bool(value) {
            Some(_) => Ok(()),
            None => Err(config_error(format!(
                "{} must be YES/NO, TRUE/FALSE, ON/OFF, or 1/0",
                d.name
            ))),
        },
        Kind::Uint { min, max } => match parse_decimal(value) {
            Some(n) if (min..=max).contains(&n) => Ok(()),
            _ => Err(config_error(format!(
                "{} must be an integer in [{min}, {max}]",
                d.name
            ))),
        },
        Kind::RequestPayer => {
            if value.eq_ignore_ascii_case("requester") {
                Ok(())
            } else {
                Err(config_error(format!("{} must be 'requester'", d.name)))
            }
        }
        Kind::CoalesceMode => {
            if value.eq_ignore_ascii_case("cost") || value.eq_ignore_ascii_case("guards") {
                Ok(())
            } else {
                Err(config_error(format!("{} must be cost or guards", d.name)))
            }
        }
        Kind::HttpVersion => match super::settings::HttpVersion::parse(value) {
            Some(_) => Ok(()),
            None => Err(config_error(format!(
                "{} must be AUTO, 1.1, 2, 2TLS, or 2PRIOR_KNOWLEDGE",
                d.name
            ))),
        },
    }
}

/// Validates every value of a layer, in option-table order.
pub(crate) fn check_layer(values: &BTreeMap<OptId, String>) -> Result<()> {
    values.iter().try_for_each(|(id, v)| check(*id, v))
}

#[cfg(test)]
mod tests {
    use super::super::options::{OPTIONS, id_of};
    use super::*;
    use proptest::prelude::*;

    fn message(name: &str, value: &str) -> String {
        check(id_of(name), value).unwrap_err().message().to_string()
    }

    #[test]
    fn booleans() {
        for ok in [
            "YES", "no", "True", "false", "ON", "off", "1", "0", "yEs", "TRUE",
        ] {
            check(id_of("AWS_HTTPS"), ok).unwrap();
        }
        for name in [
            "AWS_NO_SIGN_REQUEST",
            "AWS_HTTPS",
            "AWS_VIRTUAL_HOSTING",
            "AWS_EC2_METADATA_DISABLED",
            "GCS_NO_SIGN_REQUEST",
            "GCS_METADATA_DISABLED",
            "AZURE_NO_SIGN_REQUEST",
            "SOURCE_NO_SIGN_REQUEST",
        ] {
            for bad in ["", "2", "y", "enabled", " yes", "01", "-1"] {
                let e = check(id_of(name), bad).unwrap_err();
                assert_eq!(e.status(), Status::Config);
                assert_eq!(
                    e.message(),
                    format!("{name} must be YES/NO, TRUE/FALSE, ON/OFF, or 1/0")
                );
            }
        }
        let bools = OPTIONS.iter().filter(|d| d.kind == Kind::Bool).count();
        assert_eq!(bools, 8);
    }

    #[test]
    fn coalesce_mode() {
        for ok in ["cost", "guards", "COST", "Guards"] {
            check(id_of("KARU_COALESCE_MODE"), ok).unwrap();
        }
        for bad in ["", "gaps", " cost", "0"] {
            assert_eq!(
                message("KARU_COALESCE_MODE", bad),
                "KARU_COALESCE_MODE must be cost or guards"
            );
        }
    }

    #[test]
    fn truth() {
        for t in ["yes", "YES", "True", "on", "ON", "1"] {
            assert!(is_truthy(t), "{t}");
        }
        for f in ["no", "0", "off", "", "01", "2", "y"] {
            assert!(!is_truthy(f), "{f}");
        }
    }

    #[test]
    fn numeric_ranges_and_messages() {
        let cases: &[(&str, &str)] = &[
            ("KARU_CONCURRENCY", "[1, 4096]"),
            ("KARU_IO_THREADS", "[1, 64]"),
            ("KARU_COALESCE_GAP", "[0, 18446744073709551615]"),
            ("KARU_COALESCE_LIMIT", "[1, 18446744073709551615]"),
            ("KARU_COALESCE_PARTS", "[1, 1048576]"),
            ("KARU_COALESCE_AMPLIFICATION", "[1, 1048576]"),
            ("KARU_RANGE_FALLBACK_LIMIT", "[0, 18446744073709551615]"),
            ("KARU_MAX_ATTEMPTS", "[1, 16]"),
            ("KARU_REQUEST_TIMEOUT", "[0, 86400]"),
            ("KARU_CONNECT_TIMEOUT", "[1, 3600]"),
            ("KARU_LOW_SPEED_TIME", "[0, 3600]"),
            ("KARU_LOW_SPEED_LIMIT", "[0, 9223372036854775807]"),
            ("AWS_METADATA_SERVICE_TIMEOUT", "[1, 60]"),
        ];
        for (name, range) in cases {
            let expected = format!("{name} must be an integer in {range}");
            for bad in [
                "",
                "+1",
                "-1",
                " 1",
                "1 ",
                "1.0",
                "0x10",
                "1e3",
                "abc",
                "99999999999999999999",
            ] {
                assert_eq!(message(name, bad), expected, "{name}={bad:?}");
            }
        }
        assert_eq!(
            message("KARU_CONCURRENCY", "0"),
            "KARU_CONCURRENCY must be an integer in [1, 4096]"
        );
        assert_eq!(
            message("KARU_CONCURRENCY", "4097"),
            "KARU_CONCURRENCY must be an integer in [1, 4096]"
        );
        check(id_of("KARU_CONCURRENCY"), "4096").unwrap();
        check(id_of("KARU_CONCURRENCY"), "0001").unwrap();
        check(id_of("KARU_COALESCE_GAP"), "0").unwrap();
        check(id_of("KARU_COALESCE_GAP"), "18446744073709551615").unwrap();
        assert!(check(id_of("KARU_COALESCE_LIMIT"), "0").is_err());
        assert!(check(id_of("KARU_LOW_SPEED_LIMIT"), "9223372036854775808").is_err());
        check(id_of("KARU_LOW_SPEED_LIMIT"), "9223372036854775807").unwrap();
        assert!(check(id_of("KARU_MAX_ATTEMPTS"), "17").is_err());
        assert!(check(id_of("AWS_METADATA_SERVICE_TIMEOUT"), "0").is_err());
        assert!(check(id_of("AWS_METADATA_SERVICE_TIMEOUT"), "61").is_err());
        check(id_of("AWS_METADATA_SERVICE_TIMEOUT"), "60").unwrap();
    }

    #[test]
    fn request_payer() {
        for ok in ["requester", "Requester", "REQUESTER"] {
            check(id_of("AWS_REQUEST_PAYER"), ok).unwrap();
        }
        for bad in ["", "owner", " requester", "requesters"] {
            assert_eq!(
                message("AWS_REQUEST_PAYER", bad),
                "AWS_REQUEST_PAYER must be 'requester'"
            );
        }
    }

    #[test]
    fn http_version() {
        for ok in [
            "AUTO",
            "auto",
            "1.1",
            "2",
            "2TLS",
            "2tls",
            "2PRIOR_KNOWLEDGE",
        ] {
            check(id_of("KARU_HTTP_VERSION"), ok).unwrap();
        }
        for bad in ["", "1", "1.0", "3", "2 ", "h2"] {
            assert_eq!(
                message("KARU_HTTP_VERSION", bad),
                "KARU_HTTP_VERSION must be AUTO, 1.1, 2, 2TLS, or 2PRIOR_KNOWLEDGE"
            );
        }
    }

    #[test]
    fn text_accepts_anything() {
        check(id_of("AWS_REGION"), "").unwrap();
        check(id_of("KARU_HTTP_HEADERS"), "no colon").unwrap();
    }

    proptest! {
        #[test]
        fn decimal_accepts_exactly_in_range_digit_strings(s in "[-+ ]?[0-9]{0,6}[ a]?") {
            let valid_syntax = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            let accepted = check(id_of("KARU_CONCURRENCY"), &s).is_ok();
            let in_range = valid_syntax && (1..=4096).contains(&s.parse::<u64>().unwrap());
            prop_assert_eq!(accepted, in_range);
        }

        #[test]
        fn every_u64_round_trips(n in any::<u64>()) {
            prop_assert_eq!(parse_decimal(&n.to_string()), Some(n));
            prop_assert!(check(id_of("KARU_COALESCE_GAP"), &n.to_string()).is_ok());
            prop_assert_eq!(
                check(id_of("KARU_MAX_ATTEMPTS"), &n.to_string()).is_ok(),
                (1..=16).contains(&n)
            );
        }
    }
}
