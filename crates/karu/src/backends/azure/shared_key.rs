//! Azure Shared Key signing of a ranged GET (spec §5.8) and decoding of the base64 account
//! key.

use aws_lc_rs::hmac;
use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};

/// The storage service version karu speaks (every request carries it).
pub(super) const VERSION: &str = "2023-11-03";

/// Standard base64 that accepts keys with or without their padding.
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes an account key, ignoring whitespace (keys pasted across lines); `None` when it is
/// not base64 or decodes to nothing.
pub(super) fn decode_key(key: &str) -> Option<Vec<u8>> {
    let compact: String = key.chars().filter(|c| !c.is_whitespace()).collect();
    LENIENT.decode(compact).ok().filter(|k| !k.is_empty())
}

/// What a Shared Key signature covers for one GET.
pub(super) struct ToSign<'a> {
    /// The storage account.
    pub(super) account: &'a str,
    /// The request URL's path, encoded as sent (`/container/a%20b`).
    pub(super) path: &'a str,
    /// The `Range` header value.
    pub(super) range: &'a str,
    /// The `If-Match` header value, if any.
    pub(super) if_match: Option<&'a str>,
    /// The `If-Unmodified-Since` header value, if any.
    pub(super) if_unmodified_since: Option<&'a str>,
    /// The `x-ms-date` header value.
    pub(super) date: &'a str,
}

impl ToSign<'_> {
    /// The string to sign: the verb, eleven standard headers (only If-Match,
    /// If-Unmodified-Since and Range are ever set), the canonical `x-ms-*` headers and the
    /// canonical resource.
    fn string(&self) -> String {
        let if_match = self.if_match.unwrap_or_default();
        let since = self.if_unmodified_since.unwrap_or_default();
        format!(
            "GET\n\n\n\n\n\n\n\n{if_match}\n\n{since}\n{range}\nx-ms-date:{date}\nx-ms-version:{VERSION}\n/{account}{path}",
            range = self.range,
            date = self.date,
            account = self.account,
            path = self.path,
        )
    }

    /// The `Authorization` value: `SharedKey <account>:<base64 HMAC-SHA256>`.
    pub(super) fn authorization(&self, key: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, key);
        let tag = hmac::sign(&key, self.string().as_bytes());
        format!(
            "SharedKey {}:{}",
            self.account,
            STANDARD.encode(tag.as_ref())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_with_whitespace_and_either_padding() {
        assert_eq!(decode_key("a2V5").unwrap(), b"key");
        // "ke" needs one '=' and "k" two; both decode padded or not.
        assert_eq!(decode_key("a2U=").unwrap(), b"ke");
        assert_eq!(decode_key("a2U").unwrap(), b"ke");
        assert_eq!(decode_key("aw==").unwrap(), b"k");
        assert_eq!(decode_key("aw").unwrap(), b"k");
        assert_eq!(decode_key(" a2\nV5\t").unwrap(), b"key");
        assert_eq!(decode_key("not base64!"), None);
        assert_eq!(decode_key("a"), None);
        assert_eq!(decode_key(" "), None);
        assert_eq!(STANDARD.encode(b"key"), "a2V5");
    }

    #[test]
    fn string_to_sign_has_the_spec_layout() {
        let s = ToSign {
            account: "acc",
            path: "/c/b",
            range: "bytes=0-9",
            if_match: None,
            if_unmodified_since: Some("S"),
            date: "D",
        };
        let text = s.string();
        let lines: Vec<&str> = text.split('\n').collect();
        assert_eq!(lines.len(), 15);
        assert_eq!(lines[0], "GET");
        assert!(lines[1..8].iter().all(|l| l.is_empty()));
        assert_eq!(lines[10], "S");
        assert_eq!(lines[11], "bytes=0-9");
        assert_eq!(
            lines[12..],
            ["x-ms-date:D", "x-ms-version:2023-11-03", "/acc/c/b"]
        );
    }
}
