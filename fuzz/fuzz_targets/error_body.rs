//! Error answers: the XML (or any) body of a non-2xx response and the STS XML reader. No
//! status, header set or body panics; the status maps as spec 5.6 says; the summary a message
//! quotes is short, printable and trimmed; a server's wait is capped at 60 s.
#![no_main]

use std::time::Duration;

use karu::{Status, fuzzing};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

const URL: &str = "https://example.com/object";
const STS_FIELDS: [&str; 5] = [
    "Code",
    "AccessKeyId",
    "SecretAccessKey",
    "SessionToken",
    "Expiration",
];

#[derive(Arbitrary, Debug)]
struct Input {
    status: u16,
    own_pin: bool,
    retry_after: Option<String>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let body = &input.body;
    let summary = fuzzing::summary(body);
    assert!(summary.chars().count() <= 200);
    assert_eq!(summary.trim(), summary);
    assert!(!summary.contains("  "));
    assert!(
        !summary
            .chars()
            .any(|c| c.is_control() || (c.is_whitespace() && c != ' ')),
        "{summary:?}"
    );

    for (name, value) in fuzzing::sts_fields(body) {
        assert!(STS_FIELDS.contains(&name.as_str()), "{name}");
        assert_eq!(value.trim(), value);
    }

    let mut pairs: Vec<(&[u8], &[u8])> = input
        .headers
        .iter()
        .map(|(n, v)| (n.as_slice(), v.as_slice()))
        .collect();
    if let Some(r) = &input.retry_after {
        pairs.push((b"retry-after", r.as_bytes()));
    }
    let headers = fuzzing::headers(&pairs);
    let status = input.status;
    let f = fuzzing::classify_error(URL, status, &headers, body, input.own_pin);
    let message = f.error.message();
    if status == 412 && input.own_pin {
        // A 412 to Karu's own resume tag: the object changed; a restart.
        assert!(f.version_changed && f.transient);
        assert_eq!(f.error.status(), Status::Http);
        assert!(message.starts_with(&format!("{URL}: the object changed")));
        return;
    }
    assert!(
        message.starts_with(&format!("{URL}: HTTP {status}")),
        "{message:?}"
    );
    assert!(f.retry_after.is_none_or(|d| d <= Duration::from_secs(60)));
    assert_eq!(f.throttled, matches!(status, 429 | 503));
    assert!(!f.version_changed);
    let want = match status {
        401 | 403 => Status::Auth,
        404 => Status::NotFound,
        412 => Status::Precondition,
        416 => Status::Range,
        _ => Status::Http,
    };
    assert_eq!(f.error.status(), want);
    if matches!(status, 408 | 425 | 429 | 500..=599) {
        assert!(f.transient);
    }
    if status == 416 || summary.is_empty() {
        assert_eq!(message, format!("{URL}: HTTP {status}"));
    } else {
        assert_eq!(message, format!("{URL}: HTTP {status}: {summary}"));
    }
});
