//! Credential file and helper formats, one target dispatching on the first input byte
//! (modulo 4): 0 an AWS profile INI file, 1 a `credential_process` JSON answer, 2 a Google
//! ADC JSON file (then a NUL byte and the subject token text its source would give), 3 an
//! Azure connection string. None panics; values come out trimmed; no refusal quotes a secret.
#![no_main]

use karu::fuzzing;
use libfuzzer_sys::fuzz_target;

/// Marks secret values in the seed corpus (private keys, client secrets, refresh tokens).
const SECRET_MARKER: &str = "KARU-SECRET";

/// Refusals of a `credential_process` answer: fixed texts, which cannot quote the output.
const PROCESS_REFUSALS: [&str; 3] = [
    "response is not valid JSON",
    "response is incomplete",
    "response has an invalid Expiration",
];

fn profile(text: &str) {
    for (name, values) in fuzzing::aws_profile(text) {
        assert_eq!(name.trim(), name, "section {name:?}");
        if let Some(rest) = name.strip_prefix("profile ") {
            assert_eq!(rest.trim(), rest, "section {name:?}");
        }
        for (key, value) in values {
            assert!(!key.is_empty());
            assert_eq!(key.trim(), key);
            assert_eq!(key.to_ascii_lowercase(), key);
            assert!(!key.contains(['=', ':']), "key {key:?}");
            assert_eq!(value.trim(), value);
        }
    }
}

fn process(output: &[u8]) {
    match fuzzing::credential_process(output) {
        Ok((id, secret, _)) => assert!(!id.is_empty() && !secret.is_empty()),
        Err(why) => assert!(PROCESS_REFUSALS.contains(&why), "{why:?}"),
    }
}

fn adc(data: &[u8]) {
    let (file, subject) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let (Ok(file), Ok(subject)) = (std::str::from_utf8(file), std::str::from_utf8(subject)) else {
        return;
    };
    let Err(why) = fuzzing::google_adc(file, subject) else {
        return;
    };
    // Secrets in the seed corpus carry this marker; a refusal may quote the file's type and
    // the subject token's field name (not secrets), nothing else of the file.
    let mut rest = why.clone();
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(file) {
        let format = &json["credential_source"]["format"];
        for quoted in [&json["type"], &format["subject_token_field_name"]] {
            if let Some(q) = quoted.as_str().filter(|q| !q.is_empty()) {
                rest = rest.replace(q, "");
            }
        }
    }
    assert!(!rest.contains(SECRET_MARKER), "{why:?} quotes a secret");
}

fn azure(text: &str) {
    match fuzzing::azure_connection_string(text) {
        Ok(values) => {
            for (key, value) in values {
                assert_eq!(value.trim(), value, "{key}");
            }
        }
        Err(why) => {
            // A refusal names a segment or a key, never a value (keys and SAS tokens).
            let names_a_segment = why.strip_prefix("segment ").is_some_and(|rest| {
                let (n, what) = rest.split_once(' ').unwrap_or_default();
                n.parse::<usize>().is_ok() && (what == "has no '='" || what == "has an empty key")
            });
            let names_a_key = why
                .strip_prefix("key '")
                .and_then(|rest| rest.strip_suffix("' appears more than once"))
                .is_some_and(|key| {
                    text.split(';')
                        .any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == key))
                });
            assert!(names_a_segment || names_a_key, "{why:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => {
            if let Ok(text) = std::str::from_utf8(rest) {
                profile(text);
            }
        }
        1 => process(rest),
        2 => adc(rest),
        _ => {
            if let Ok(text) = std::str::from_utf8(rest) {
                azure(text);
            }
        }
    }
});
