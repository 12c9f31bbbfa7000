//! The short body summary that HTTP failure messages carry (spec 1.11).

use super::redact;

/// Bytes of an error body that are kept and looked at.
pub(crate) const CAPTURE: usize = 4096;

/// Longest summary, in characters.
const MAX_CHARS: usize = 200;

/// At most 200 characters of the first 4 KiB of `body`, with every run of whitespace collapsed
/// to one space and none at either end, and the value of every credential field hidden
/// ([`redact::scrub`]) before the text is cut, so that no cut leaves part of one.
///
/// Invalid UTF-8 becomes U+FFFD, except a character cut in two by the 4 KiB limit, which is
/// dropped. Control characters count as whitespace so that a hostile body cannot put terminal
/// escapes into a message.
pub(crate) fn summary(body: &[u8]) -> String {
    collapse(&redact::scrub(&decode(body)))
}

/// The first 4 KiB of `body` as text (see [`summary`] for invalid UTF-8).
fn decode(body: &[u8]) -> String {
    // The engine keeps exactly 4 KiB of a longer body, so a full capture may end mid-character.
    let cut = body.len() >= CAPTURE;
    let body = &body[..body.len().min(CAPTURE)];
    let mut text = String::with_capacity(body.len());
    let mut chunks = body.utf8_chunks().peekable();
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let invalid = chunk.invalid();
        // The tail of a body cut at 4 KiB may be the start of a valid character: not an error.
        let split_at_cut = last && cut && invalid.len() < 4;
        text.push_str(chunk.valid());
        if !invalid.is_empty() && !split_at_cut {
            text.push('\u{FFFD}');
        }
    }
    text
}

/// At most 200 characters of `text`, whitespace and control runs collapsed to one space,
/// none at either end.
fn collapse(text: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() || c.is_control() {
            pending_space = chars > 0;
            continue;
        }
        let needed = if pending_space { 2 } else { 1 };
        if chars + needed > MAX_CHARS {
            return out;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(c);
        chars += needed;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn collapses_and_trims_whitespace() {
        assert_eq!(summary(b""), "");
        assert_eq!(summary(b"  \n\t "), "");
        assert_eq!(
            summary(b"<Error>\n  <Code>NoSuchKey</Code>\r\n\t<Message>x  y</Message>\n</Error>\n"),
            "<Error> <Code>NoSuchKey</Code> <Message>x y</Message> </Error>"
        );
        assert_eq!(summary(b"a\x1b[31mb"), "a [31mb");
        assert_eq!(summary("caf\u{e9} \u{a0}ok".as_bytes()), "caf\u{e9} ok");
        assert_eq!(summary(b"a\xffb"), "a\u{FFFD}b");
    }

    #[test]
    fn keeps_at_most_200_characters() {
        let s = summary("é".repeat(300).as_bytes());
        assert_eq!(s.chars().count(), 200);
        let words = "word ".repeat(100);
        let s = summary(words.as_bytes());
        assert_eq!(s.chars().count(), 199, "no trailing space is kept");
        assert!(s.ends_with("word"));
    }

    #[test]
    fn looks_only_at_the_first_4_kib() {
        let mut body = vec![b' '; CAPTURE - 1];
        body.extend_from_slice(b"abc");
        assert_eq!(summary(&body), "a");
        // "é" is 2 bytes; cut after its first byte, it is dropped rather than shown as U+FFFD.
        let mut body = vec![b' '; CAPTURE - 1];
        body.extend_from_slice("é".as_bytes());
        assert_eq!(summary(&body), "");
    }

    #[test]
    fn hides_credentials_before_cutting() {
        let echo = format!(
            "GET /o?sig=SIGSECRET HTTP/1.1\r\nauthorization: Bearer TOKSECRET\r\nhost: h\r\n{}",
            "x".repeat(300)
        );
        let s = summary(echo.as_bytes());
        assert!(
            s.starts_with("GET /o?sig=<redacted> HTTP/1.1 authorization: <redacted> host: h xxx")
        );
        // A credential cut by the 200-character limit: nothing of it shows.
        let long = format!("{} token={}", "y".repeat(180), "Z".repeat(40));
        assert_eq!(
            summary(long.as_bytes()),
            format!("{} token=<redacted>", "y".repeat(180))
        );
    }

    proptest! {
        #[test]
        fn bounded_and_never_panics(body in prop::collection::vec(any::<u8>(), 0..6000)) {
            let s = summary(&body);
            prop_assert!(s.chars().count() <= MAX_CHARS);
            prop_assert!(!s.starts_with(' ') && !s.ends_with(' '));
            prop_assert!(!s.contains("  "));
        }
    }
}
