//! Percent-encoding of cloud keys and redaction of URLs for messages.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything but `A-Z a-z 0-9 - _ . ~ /` is encoded: the RFC 3986 unreserved set, plus `/`
/// so that key segments stay path segments.
const KEY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// Percent-encodes a cloud key (or a Hugging Face revision or path) for a request URL.
///
/// Keys are stored verbatim, so a `%` in a key is data and is encoded too.
pub fn encode_key(key: &str) -> String {
    // Collected, not formatted: this runs for every request of the object stores.
    utf8_percent_encode(key, KEY).collect()
}

/// Hides the secrets a URL may carry, for messages and logs: user information becomes
/// `<redacted>@`, the whole query `?<redacted>` and the whole fragment `#<redacted>`.
///
/// An `@` after the authority is part of the path and is left alone. A string without
/// `://` is not a URL and is returned unchanged.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (head, after) = url.split_at(scheme_end);
    let authority_len = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(authority_len);

    let mut out = String::with_capacity(url.len() + 20);
    out.push_str(head);
    // The last `@` ends the user information: an unencoded `@` in a password stays hidden.
    match authority.rfind('@') {
        Some(at) => {
            out.push_str("<redacted>@");
            out.push_str(&authority[at + 1..]);
        }
        None => out.push_str(authority),
    }
    // The fragment starts at the first `#`; the query is whatever `?` precedes it.
    let (before_fragment, fragment) = match rest.find('#') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match before_fragment.find('?') {
        Some(q) => {
            out.push_str(&before_fragment[..q]);
            out.push_str("?<redacted>");
        }
        None => out.push_str(before_fragment),
    }
    if !fragment.is_empty() {
        out.push_str("#<redacted>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_encoded_with_percent_as_data() {
        assert_eq!(encode_key("dir/a b.bin"), "dir/a%20b.bin");
        assert_eq!(encode_key("a%20b"), "a%2520b");
        assert_eq!(encode_key("é"), "%C3%A9");
    }

    #[test]
    fn urls_lose_user_information_query_and_fragment() {
        assert_eq!(
            redact_url("https://user:pw@host/a@b?sig=x#f"),
            "https://<redacted>@host/a@b?<redacted>#<redacted>"
        );
        assert_eq!(redact_url("/tmp/a?b"), "/tmp/a?b");
    }
}
