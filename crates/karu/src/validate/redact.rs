//! Secrets out of messages (issue 12, defect 5).
//!
//! A server, proxy or misconfigured endpoint that echoes the request would put tokens,
//! signatures and passwords into error text, which ends up in logs and bug reports. Two layers
//! keep them out:
//! - [`scrub`] hides the value of every credential field that text from outside shows:
//!   `name=value` query parameters (also `%3D`-encoded ones inside another URL), `Name: value`
//!   header lines, `"name": "value"` JSON and `<Name>value<` XML. It needs no knowledge of
//!   the secrets in play, so the body summary applies it before cutting its text short.
//! - [`Redactor`] hides the exact values in play for one exchange (configured secret
//!   options, resolved credentials, credential headers as sent) in the forms an echo may show
//!   them, and the tail of a message that is the start of one (a summary cut mid-secret).

use std::cmp::Reverse;

use base64::Engine as _;
use percent_encoding::{NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use crate::error::Error;

/// What replaces a hidden value.
pub(crate) const REDACTED: &str = "<redacted>";

/// Values shorter than this are not searched for as substrings: a three-character
/// "secret" would hide every occurrence of those characters and leave messages unreadable,
/// while guarding next to nothing. Field rules ([`scrub`]) still hide them where named.
const MIN_SECRET: usize = 4;

/// Values that only may be secrets (a custom header's, a locator query parameter's) are
/// searched for alone from this length on: tokens, keys and signatures are longer, while
/// shorter values (`1000`, `ignore`, `text/plain`) are words a message needs.
const MIN_OPAQUE: usize = 16;

/// A message ending with at least this many leading characters of a secret is taken to be
/// cut inside it. Fewer guard next to nothing, and a shorter rule would eat ordinary words
/// that happen to start a configured value (`text` of an `Accept: text/plain` header).
const MIN_TAIL: usize = 8;

/// Field names (ASCII lower case) whose values are credentials. A name matches at a
/// non-alphanumeric boundary, so `token` also covers `x-amz-security-token`, `hf_token` and
/// `access_token`, `authorization` covers `proxy-authorization`, `signature` covers
/// `x-amz-signature`, and `secret` covers `client_secret`.
const CREDENTIAL_FIELDS: &[&str] = &[
    "authorization",
    "auth",
    "cookie",
    "api-key",
    "api_key",
    "apikey",
    "identity-header",
    "token",
    "sessiontoken",
    "securitytoken",
    "sig",
    "signature",
    "signatureprovided",
    "credential",
    "secret",
    "secret_access_key",
    "secretaccesskey",
    "password",
    "passwd",
    "assertion",
    "accountkey",
    "sharedaccesssignature",
    "private_key",
];

/// Bytes that may continue a field name: a match must not be followed by one.
fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether `name` (a header, query parameter or field name) carries credentials: it ends
/// with one of the credential field names at a boundary (`X-Amz-Security-Token`,
/// `Proxy-Authorization`, `sig`, `AccountKey`).
pub(crate) fn is_credential_field(name: &str) -> bool {
    let name = name.trim().as_bytes();
    CREDENTIAL_FIELDS.iter().any(|f| {
        let f = f.as_bytes();
        name.len() >= f.len()
            && name[name.len() - f.len()..].eq_ignore_ascii_case(f)
            && (name.len() == f.len() || !name[name.len() - f.len() - 1].is_ascii_alphanumeric())
    })
}

/// `text` with the value of every credential field replaced by `<redacted>`; see the
/// module docs for the forms recognised.
pub(crate) fn scrub(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        match field_value(b, i) {
            Some((start, end)) => {
                out.push_str(&text[copied..start]);
                out.push_str(REDACTED);
                copied = end;
                i = end;
            }
            None => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// How a field name is tied to its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Separator {
    /// `=` or `%3D`: a query parameter, form field or `key=value` list.
    Equals,
    /// `:`: a header line, or a JSON member when the name was quoted.
    Colon,
}

/// The first index at or after `from` whose byte satisfies `stop` (or the length).
fn find(b: &[u8], from: usize, stop: impl Fn(u8) -> bool) -> usize {
    b[from..]
        .iter()
        .position(|&c| stop(c))
        .map_or(b.len(), |p| from + p)
}

/// The index after spaces and tabs from `i`.
fn skip_blanks(b: &[u8], i: usize) -> usize {
    find(b, i, |c| c != b' ' && c != b'\t')
}

/// Where an unquoted `name=value` value ends: at a delimiter of URLs, lists or markup, or at
/// an encoded `&` (`%26`).
fn equals_value_end(b: &[u8], from: usize) -> usize {
    let mut i = from;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace()
            || matches!(
                c,
                b'&' | b'"' | b'\'' | b'<' | b'>' | b'#' | b',' | b';' | b')' | b']' | b'}' | b'\\'
            )
            || b[i..]
                .get(..3)
                .is_some_and(|s| s.eq_ignore_ascii_case(b"%26"))
        {
            return i;
        }
        i += 1;
    }
    b.len()
}

/// The byte span of the value of a credential field whose name starts at `i`, if one does.
/// Spans start and end at ASCII bytes, so they are character boundaries.
fn field_value(b: &[u8], i: usize) -> Option<(usize, usize)> {
    // A percent escape before the name (`%3Ftoken%3D` in a URL inside a URL) is a boundary.
    let escaped = i >= 3 && b[i - 3] == b'%';
    if !b[i].is_ascii_alphabetic() || (i > 0 && b[i - 1].is_ascii_alphanumeric() && !escaped) {
        return None;
    }
    let name = CREDENTIAL_FIELDS.iter().find(|f| {
        b[i..]
            .get(..f.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(f.as_bytes()))
            && b.get(i + f.len()).is_none_or(|&c| !name_byte(c))
    })?;
    let mut j = i + name.len();
    if i > 0 && b[i - 1] == b'<' && b.get(j) == Some(&b'>') {
        // <SessionToken>value</SessionToken>
        let start = j + 1;
        return non_empty(b, start, find(b, start, |c| c == b'<'));
    }
    // The closing quote of a quoted name (JSON, or JSON inside a JSON string).
    let mut quoted_name = false;
    if b.get(j) == Some(&b'\\') && b.get(j + 1) == Some(&b'"') {
        j += 2;
        quoted_name = true;
    } else if matches!(b.get(j), Some(b'"' | b'\'')) {
        j += 1;
        quoted_name = true;
    }
    j = skip_blanks(b, j);
    let separator = match b.get(j) {
        Some(b'=') => {
            j += 1;
            Separator::Equals
        }
        Some(b':') => {
            j += 1;
            Separator::Colon
        }
        _ if b[j..]
            .get(..3)
            .is_some_and(|s| s.eq_ignore_ascii_case(b"%3d")) =>
        {
            j += 3;
            Separator::Equals
        }
        _ => return None,
    };
    j = skip_blanks(b, j);
    let line_end = |c: u8| c == b'\n' || c == b'\r';
    let (start, end) = match b.get(j) {
        Some(b'\\') if b.get(j + 1) == Some(&b'"') => {
            (j + 2, find(b, j + 2, |c| c == b'\\' || c == b'"'))
        }
        Some(&q @ (b'"' | b'\'')) => (j + 1, find(b, j + 1, |c| c == q || line_end(c))),
        _ => match separator {
            Separator::Equals => (j, equals_value_end(b, j)),
            Separator::Colon if quoted_name => (
                j,
                find(b, j, |c| matches!(c, b',' | b'}' | b']') || line_end(c)),
            ),
            // A header line: the rest of the line (`Bearer x`, `Basic x`, SigV4 fields).
            Separator::Colon => (j, find(b, j, line_end)),
        },
    };
    non_empty(b, start, end)
}

/// `Some((start, end))` unless the span is empty or already redacted.
fn non_empty(b: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let value = b.get(start..end)?;
    let blank = value.iter().all(|c| c.is_ascii_whitespace());
    (!blank && !value.starts_with(REDACTED.as_bytes())).then_some((start, end))
}

/// The exact secret values in play for one exchange, hidden wherever they appear in a
/// message (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Redactor {
    values: Vec<String>,
}

impl Redactor {
    /// Hides `value`, as given, percent-decoded, percent-encoded and with `/` JSON-escaped,
    /// each line of a multi-line value (a PEM key), and the credential fields of a
    /// `key=value` list in it (a SAS token's `sig`, a connection string's `AccountKey`).
    pub(crate) fn secret(&mut self, value: &str) {
        let value = value.trim();
        if value.chars().count() < MIN_SECRET {
            return;
        }
        self.push(value.to_owned());
        if let Ok(decoded) = percent_decode_str(value).decode_utf8() {
            self.push(decoded.into_owned());
        }
        self.push(utf8_percent_encode(value, NON_ALPHANUMERIC).to_string());
        if value.contains('/') {
            self.push(value.replace('/', "\\/"));
        }
        if value.contains('\n') {
            for line in value.lines() {
                self.secret(line);
            }
        }
        for pair in value.split(['&', ';', '?']) {
            if let Some((name, v)) = pair.split_once('=')
                && is_credential_field(name)
                && v.len() < value.len()
            {
                self.secret(v);
            }
        }
    }

    /// Hides a value that may be a secret without a name saying so (a custom header's, a
    /// locator query parameter's) when it is long enough to be one ([`MIN_OPAQUE`]).
    pub(crate) fn opaque(&mut self, value: &str) {
        if value.trim().chars().count() >= MIN_OPAQUE {
            self.secret(value);
        }
    }

    /// A header as sent: for a credential header, its value, the credentials after the
    /// scheme (`Bearer x`), and for `Basic` the decoded `user:password` and password.
    pub(crate) fn header(&mut self, name: &str, value: &str) {
        if !is_credential_field(name) {
            return;
        }
        self.secret(value);
        if let Some((scheme, rest)) = value.trim().split_once(' ') {
            self.secret(rest);
            if scheme.eq_ignore_ascii_case("basic")
                && let Ok(raw) = base64::engine::general_purpose::STANDARD.decode(rest.trim())
                && let Ok(pair) = String::from_utf8(raw)
            {
                self.user_password(&pair);
            }
        }
    }

    /// `user:password` credentials: the pair, the password, and the base64 of the pair that
    /// a `Basic` header carries.
    pub(crate) fn user_password(&mut self, pair: &str) {
        self.secret(pair);
        if let Some((_, password)) = pair.split_once(':') {
            self.secret(password);
        }
        self.secret(&base64::engine::general_purpose::STANDARD.encode(pair.as_bytes()));
    }

    /// A URL's user information and query: what spec 1.11 redacts from URLs in messages is
    /// hidden in the rest of the message too. The query is hidden whole and pair by pair;
    /// alone, the values of credential parameters always, others when [`opaque`] would.
    ///
    /// [`opaque`]: Redactor::opaque
    pub(crate) fn url(&mut self, url: &str) {
        let Some((_, rest)) = url.split_once("://") else {
            return;
        };
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@') {
            let info = &authority[..at];
            self.secret(info);
            self.user_password(&percent_decode_str(info).decode_utf8_lossy());
        }
        let query = rest.split_once('?').map_or("", |(_, q)| q);
        let query = query.split('#').next().unwrap_or_default();
        self.secret(query);
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some((name, value)) if is_credential_field(name) => self.secret(value),
                Some((_, value)) => {
                    self.secret(pair);
                    self.opaque(value);
                }
                None => self.opaque(pair),
            }
        }
    }

    fn push(&mut self, value: String) {
        if value.chars().count() >= MIN_SECRET && !self.values.contains(&value) {
            self.values.push(value);
        }
    }

    /// `text` with every secret value hidden (longest first), a tail that starts one hidden
    /// too, then every credential field's value ([`scrub`]).
    pub(crate) fn text(&self, text: &str) -> String {
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_by_key(|v| Reverse(v.len()));
        let mut out = text.to_owned();
        for v in &values {
            if out.contains(v) {
                out = out.replace(v, REDACTED);
            }
        }
        // A summary stops after 200 characters, possibly inside a secret.
        if let Some(cut) = values.iter().filter_map(|v| tail_start(&out, v)).min() {
            out.truncate(cut);
            out.push_str(REDACTED);
        }
        scrub(&out)
    }

    /// `error` with its message passed through [`Redactor::text`].
    pub(crate) fn error(&self, error: Error) -> Error {
        error.redacted(|text| self.text(text))
    }
}

/// Where `text` starts to end with a proper prefix of `value` at least [`MIN_TAIL`]
/// characters long (the longest such prefix).
fn tail_start(text: &str, value: &str) -> Option<usize> {
    (1..value.len())
        .rev()
        .filter(|&k| value.is_char_boundary(k) && text.ends_with(&value[..k]))
        .find(|&k| value[..k].chars().count() >= MIN_TAIL)
        .map(|k| text.len() - k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn scrubs_query_parameters() {
        assert_eq!(
            scrub("GET /c/b?sv=2020-08-04&se=2030&sig=AbC%2Bd%3D&sp=r HTTP/1.1"),
            "GET /c/b?sv=2020-08-04&se=2030&sig=<redacted>&sp=r HTTP/1.1"
        );
        assert_eq!(
            scrub("https://h/o?X-Amz-Credential=AKID%2F2024&X-Amz-Signature=abc123&x-id=Get"),
            "https://h/o?X-Amz-Credential=<redacted>&X-Amz-Signature=<redacted>&x-id=Get"
        );
        assert_eq!(
            scrub("next=https%3A%2F%2Fh%2Fo%3Ftoken%3Dsecret1%26a%3D1"),
            "next=https%3A%2F%2Fh%2Fo%3Ftoken%3D<redacted>%26a%3D1"
        );
        assert_eq!(scrub("access_token=t0k&x=1"), "access_token=<redacted>&x=1");
        // Not a credential field: other names, a longer name, a name without separator.
        for kept in [
            "signed=yes",
            "tokens=3",
            "token_type=bearer",
            "mytoken=1",
            "the signature we calculated does not match",
            "sig",
        ] {
            assert_eq!(scrub(kept), kept);
        }
    }

    #[test]
    fn scrubs_header_lines_json_and_xml() {
        assert_eq!(
            scrub("GET / HTTP/1.1\r\nAuthorization: Bearer abc.def\r\nHost: h\r\n"),
            "GET / HTTP/1.1\r\nAuthorization: <redacted>\r\nHost: h\r\n"
        );
        assert_eq!(
            scrub("proxy-authorization:Basic dXNlcjpwYXNz\nx-amz-security-token: FQo//x\n"),
            "proxy-authorization:<redacted>\nx-amz-security-token: <redacted>\n"
        );
        assert_eq!(
            scrub(r#"{"headers": {"Authorization": "SharedKey acct:c2ln", "Host": "h"}}"#),
            r#"{"headers": {"Authorization": "<redacted>", "Host": "h"}}"#
        );
        assert_eq!(
            scrub(r#"{"token":null,"n":1}"#),
            r#"{"token":<redacted>,"n":1}"#
        );
        assert_eq!(
            scrub(r#"{"body":"{\"client_secret\":\"s3cr3t\"}"}"#),
            r#"{"body":"{\"client_secret\":\"<redacted>\"}"}"#
        );
        assert_eq!(
            scrub("<Code>SignatureDoesNotMatch</Code><SignatureProvided>abc</SignatureProvided>"),
            "<Code>SignatureDoesNotMatch</Code><SignatureProvided><redacted></SignatureProvided>"
        );
        assert_eq!(
            scrub("DefaultEndpointsProtocol=http;AccountName=a;AccountKey=Zm9v+/==;X=1"),
            "DefaultEndpointsProtocol=http;AccountName=a;AccountKey=<redacted>;X=1"
        );
    }

    #[test]
    fn scrubbing_twice_changes_nothing() {
        let once = scrub("authorization: Bearer x\nsig=y host: z");
        assert_eq!(once, "authorization: <redacted>\nsig=<redacted> host: z");
        assert_eq!(scrub(&once), once);
        // A collapsed summary: the header rule does not eat past a value already hidden.
        assert_eq!(
            scrub("authorization: <redacted> host: z"),
            "authorization: <redacted> host: z"
        );
    }

    #[test]
    fn credential_field_names() {
        for name in [
            "Authorization",
            "Proxy-Authorization",
            "x-amz-security-token",
            "X-Amz-Signature",
            "sig",
            "AccountKey",
            "SharedAccessSignature",
            "x-identity-header",
            "Cookie",
        ] {
            assert!(is_credential_field(name), "{name}");
        }
        for name in [
            "Host",
            "Range",
            "If-Match",
            "x-amz-date",
            "se",
            "sv",
            "mysig",
        ] {
            assert!(!is_credential_field(name), "{name}");
        }
    }

    #[test]
    fn hides_values_in_their_echoed_forms() {
        let mut r = Redactor::default();
        r.secret("a/b+c=d");
        r.secret("xyz"); // too short to search for
        let t = |s: &str| r.text(s);
        assert_eq!(t("k a/b+c=d k"), "k <redacted> k");
        assert_eq!(t("k a%2Fb%2Bc%3Dd k"), "k <redacted> k");
        assert_eq!(t(r#"k "a\/b+c=d" k"#), r#"k "<redacted>" k"#);
        assert_eq!(t("xyz"), "xyz");
        // Cut at the end of a summary.
        r.secret("0123456789abcdef");
        assert_eq!(
            r.text("HTTP 403: echo 01234567"),
            "HTTP 403: echo <redacted>"
        );
        assert_eq!(r.text("HTTP 403: echo 0123456"), "HTTP 403: echo 0123456");
    }

    #[test]
    fn sas_tokens_connection_strings_and_keys() {
        let mut r = Redactor::default();
        r.secret("?sv=2022-11-02&ss=b&sig=Q2hhbmdlTWU%3D");
        r.secret("AccountName=devstoreaccount1;AccountKey=S2V5S2V5S2V5;BlobEndpoint=http://h");
        r.secret(
            "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END PRIVATE KEY-----",
        );
        assert_eq!(r.text("signed Q2hhbmdlTWU= !"), "signed <redacted> !");
        assert_eq!(r.text("key S2V5S2V5S2V5 !"), "key <redacted> !");
        assert_eq!(r.text("a MIIEvQIBADANBgkqhkiG9w0B b"), "a <redacted> b");
        // Non-secret fields of the lists stay readable.
        assert_eq!(
            r.text("account devstoreaccount1"),
            "account devstoreaccount1"
        );
    }

    #[test]
    fn headers_and_user_information() {
        let mut r = Redactor::default();
        r.header("Authorization", "Bearer tok-123456");
        r.header("Range", "bytes=0-99");
        r.header("Proxy-Authorization", "Basic dXNlcjpwYXNzd29yZA==");
        r.url("http://bob:p%40ssw0rd@proxy:3128/?token=querysecret&x=1");
        assert_eq!(r.text("t tok-123456"), "t <redacted>");
        assert_eq!(r.text("bytes=0-99"), "bytes=0-99");
        assert_eq!(r.text("u user:password"), "u <redacted>");
        assert_eq!(r.text("p password!"), "p <redacted>!");
        assert_eq!(r.text("p p@ssw0rd!"), "p <redacted>!");
        assert_eq!(r.text("p p%40ssw0rd!"), "p <redacted>!");
        assert_eq!(r.text("b Ym9iOnBAc3N3MHJk!"), "b <redacted>!");
        assert_eq!(r.text("q querysecret!"), "q <redacted>!");
        // Values without a credential name: hidden whole, as pairs, alone when long.
        let mut r = Redactor::default();
        r.url("https://h/o?size=1000&mode=ignore&k=0123456789abcdefgh");
        assert_eq!(
            r.text("server ignored size 1000: ?size=1000&mode=ignore&k=0123456789abcdefgh"),
            "server ignored size 1000: ?<redacted>"
        );
        assert_eq!(
            r.text("mode=ignore 0123456789abcdefgh"),
            "<redacted> <redacted>"
        );
    }

    #[test]
    fn errors_keep_their_status() {
        let mut r = Redactor::default();
        r.secret("hf_abcdefgh");
        let e = r.error(Error::new(
            crate::Status::Auth,
            "https://h/o: HTTP 401: you sent hf_abcdefgh",
        ));
        assert_eq!(e.status(), crate::Status::Auth);
        assert_eq!(e.message(), "https://h/o: HTTP 401: you sent <redacted>");
    }

    proptest! {
        /// Whatever surrounds it, and wherever a message is cut, no 8-character piece of a
        /// secret's start survives at the end, and the whole secret never survives.
        #[test]
        fn no_secret_survives(
            before in "[ -~]{0,40}",
            after in "[ -~]{0,40}",
            secret in "[A-Za-z0-9+/=_.-]{8,40}",
            cut in 0usize..200,
        ) {
            let mut r = Redactor::default();
            r.secret(&secret);
            let text = format!("{before}{secret}{after}");
            let text = &text[..cut.min(text.len())];
            let out = r.text(text);
            prop_assert!(!out.contains(&secret));
            if text.len() > before.len() + 7 && text.len() < before.len() + secret.len() {
                prop_assert!(out.ends_with(REDACTED), "{out}");
            }
        }

        #[test]
        fn scrub_never_panics(text in "\\PC{0,300}") {
            let _ = scrub(&text);
        }

        /// Names, separators, quotes and escapes in any order: no panic, and scrubbing is
        /// idempotent.
        #[test]
        fn scrub_is_stable_on_field_soup(
            text in "(sig|Token|authorization|<|>|=|:|%3D|%26|\"|'|\\\\|&|\n| |é|x|<redacted>){0,60}"
        ) {
            let once = scrub(&text);
            prop_assert_eq!(scrub(&once), once.clone());
        }
    }
}
