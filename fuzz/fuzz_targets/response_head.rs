//! `Content-Range` parsing and response-head validation: the parser accepts exactly the
//! strict forms (its values satisfy their invariants and print back to themselves), and no
//! status or header set makes the head check panic or keep bytes outside what was asked.
#![no_main]

use karu::Status;
use karu::fuzzing::{self, Expect, Head};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

const URL: &str = "https://example.com/object";

#[derive(Arbitrary, Debug)]
enum RangeHeader {
    Raw(String),
    Satisfied(u64, u64, Option<u64>),
    Unsatisfied(u64),
}

#[derive(Arbitrary, Debug)]
struct Input {
    start: u64,
    end: u64,
    original_start: u64,
    fallback_limit: u64,
    pin: Option<String>,
    pin_is_callers: bool,
    status: u16,
    range: Option<RangeHeader>,
    length: Option<u64>,
    etag: Option<String>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The parser's properties on one header value.
fn check_parse(value: &str) {
    if let Some((first, last, total)) = fuzzing::content_range(value) {
        assert!(first <= last, "{value:?}");
        assert!(last - first < u64::MAX, "{value:?}: length overflows");
        assert!(total.is_none_or(|t| t > last), "{value:?}");
        let printed = match total {
            Some(t) => format!("bytes {first}-{last}/{t}"),
            None => format!("bytes {first}-{last}/*"),
        };
        assert_eq!(fuzzing::content_range(&printed), Some((first, last, total)));
        assert_eq!(fuzzing::content_range_unsatisfied(value), None, "{value:?}");
    }
    if let Some(total) = fuzzing::content_range_unsatisfied(value) {
        assert_eq!(
            fuzzing::content_range_unsatisfied(&format!("bytes */{total}")),
            Some(total)
        );
    }
}

fuzz_target!(|input: Input| {
    let range = input.range.as_ref().map(|r| match r {
        RangeHeader::Raw(s) => s.clone(),
        RangeHeader::Satisfied(f, l, Some(t)) => format!("bytes {f}-{l}/{t}"),
        RangeHeader::Satisfied(f, l, None) => format!("bytes {f}-{l}/*"),
        RangeHeader::Unsatisfied(t) => format!("bytes */{t}"),
    });
    if let Some(r) = &range {
        check_parse(r);
    }
    // What the engine can ask: a non-empty range, possibly resumed past its original start.
    if !(input.original_start <= input.start && input.start <= input.end) {
        return;
    }
    let mut pairs: Vec<(&[u8], &[u8])> = input
        .headers
        .iter()
        .map(|(n, v)| (n.as_slice(), v.as_slice()))
        .collect();
    let length = input.length.map(|l| l.to_string());
    if let Some(r) = &range {
        pairs.push((b"content-range", r.as_bytes()));
    }
    if let Some(l) = &length {
        pairs.push((b"content-length", l.as_bytes()));
    }
    if let Some(e) = &input.etag {
        pairs.push((b"etag", e.as_bytes()));
    }
    let headers = fuzzing::headers(&pairs);
    for value in headers.get_all("content-range") {
        if let Ok(v) = value.to_str() {
            check_parse(v);
        }
    }
    let expect = Expect {
        url: URL,
        start: input.start,
        end: input.end,
        original_start: input.original_start,
        fallback_limit: input.fallback_limit,
        pin: input.pin.as_deref(),
        pin_is_callers: input.pin_is_callers,
    };
    let status = input.status;
    let head = fuzzing::check_head(&expect, status, &headers);
    let asked_end = u128::from(input.end) + 1; // exclusive
    match head {
        Head::Body {
            skip,
            first,
            len,
            total,
            restarted,
            ..
        } => {
            assert!((200..300).contains(&status), "{status} kept a body");
            let kept_end = u128::from(first) + u128::from(len);
            assert!(
                kept_end <= asked_end,
                "kept past the request: {first}+{len}"
            );
            if let Some(t) = total.filter(|_| len > 0) {
                assert!(
                    kept_end <= u128::from(t),
                    "kept past the object: {first}+{len}/{t}"
                );
            }
            if status == 206 {
                assert_eq!(first, input.start);
                assert!(len >= 1);
                assert_eq!((skip, restarted), (0, false));
            } else {
                assert_eq!(status, 200);
                assert_eq!(first, input.original_start);
                assert!(skip <= first && skip <= input.fallback_limit);
                assert_eq!(restarted, input.start != input.original_start);
            }
        }
        Head::ErrorBody(s) => {
            assert_eq!(s, status);
            assert!(!(200..300).contains(&status) && status != 416);
        }
        Head::Fail(e) | Head::Precondition(e) => {
            assert!(e.message().starts_with(&format!("{URL}: ")), "{e:?}");
            if status == 416 {
                assert_eq!(e.status(), Status::Range);
            }
        }
        Head::VersionChanged => {
            assert!(input.pin.is_some() && !input.pin_is_callers);
        }
    }
});
