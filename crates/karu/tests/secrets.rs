//! No secret in messages (issue 12, defect 5): every backend reads from the test kit's
//! `EchoServer`, which answers 403 with the request (request line and headers, or the bare
//! header values) in its body, as a misconfigured endpoint or proxy may. The error must keep
//! its status and say what the server answered, without any piece of a configured secret,
//! a resolved credential or a credential header karu sent.

mod common;

use common::client;
use karu::{Client, Locator, Status};
use karu_testkit::{EchoFormat, EchoServer};

/// Headers whose values carry credentials, as the echo server logged them.
const CREDENTIAL_HEADERS: [&str; 3] = [
    "authorization",
    "proxy-authorization",
    "x-amz-security-token",
];

/// Reads 10 bytes of `uri`, which must fail with AUTH; returns the message.
fn failure(client: &Client, uri: &str) -> String {
    let e = client
        .read(&Locator::parse(uri).unwrap(), 0, 10)
        .unwrap_err();
    assert_eq!(e.status(), Status::Auth, "{e}");
    e.message().to_owned()
}

/// The credential part of a header value as sent: what follows its scheme, a SigV4
/// `Signature=` or a Shared Key `account:`.
fn credential_part(value: &str) -> &str {
    value
        .rsplit([' ', '=', ':', ','])
        .find(|p| p.len() >= 8)
        .unwrap_or(value)
}

/// Checks that no 8-character piece of any secret, and no credential header the server saw,
/// appears in `message`, and that the message still says what happened.
fn check(message: &str, echo: &EchoServer, secrets: &[&str], useful: &[&str]) {
    let log = echo.log();
    assert!(!log.is_empty());
    let sent: Vec<String> = log
        .iter()
        .flat_map(|a| CREDENTIAL_HEADERS.iter().filter_map(|h| a.header(h)))
        .map(|v| credential_part(v).to_owned())
        .collect();
    for secret in secrets
        .iter()
        .copied()
        .chain(sent.iter().map(String::as_str))
    {
        let chars: Vec<char> = secret.chars().collect();
        for piece in chars.windows(8.min(chars.len())) {
            let piece: String = piece.iter().collect();
            assert!(
                !message.contains(&piece),
                "{piece:?} of secret {secret:?} in {message:?}"
            );
        }
    }
    assert!(message.contains("HTTP 403: "), "{message}");
    for text in useful {
        assert!(message.contains(text), "{text:?} not in {message:?}");
    }
}

#[test]
fn http_bearer_basic_proxy_and_query_secrets() {
    for format in [EchoFormat::Lines, EchoFormat::Values] {
        let echo = EchoServer::start(403, format).only(&[
            "proxy-authorization",
            "authorization",
            "x-api-key",
            "range",
        ]);
        let proxy = format!("http://proxyuser:PrOxYpAsS-0001@{}", echo.addr());
        let c = client(&[
            ("KARU_HTTP_PROXY", &proxy),
            (
                "KARU_HTTP_HEADERS",
                "Authorization: Bearer BeArEr-HtTp-0001\nX-Api-Key: ApIkEy-HtTp-0001",
            ),
        ]);
        // The target is never dialled: the proxy answers.
        let uri = "http://127.0.0.1:9/data/o.bin?sig=SiGqUeRy-0001&X-Amz-Signature=QuErYsIg-0002";
        let message = failure(&c, uri);
        let useful = match format {
            EchoFormat::Lines => vec![
                "http://127.0.0.1:9/data/o.bin?<redacted>: ",
                "GET /data/o.bin?",
                "range: bytes=0-9",
            ],
            EchoFormat::Values => vec!["/data/o.bin?", "bytes=0-9"],
        };
        check(
            &message,
            &echo,
            &[
                "PrOxYpAsS-0001",
                "proxyuser:PrOxYpAsS-0001",
                "BeArEr-HtTp-0001",
                "ApIkEy-HtTp-0001",
                "SiGqUeRy-0001",
                "QuErYsIg-0002",
            ],
            &useful,
        );
        let asked = &echo.log()[0];
        assert!(asked.header("proxy-authorization").is_some(), "{asked:?}");
    }
    // Proxy credentials given apart from the URL.
    let echo = EchoServer::start(403, EchoFormat::Values).only(&["proxy-authorization", "range"]);
    let c = client(&[
        ("KARU_HTTP_PROXY", &echo.url()),
        ("KARU_HTTP_PROXY_CREDENTIALS", "someone:PrOxYcReDs-0003"),
    ]);
    let message = failure(&c, "http://127.0.0.1:9/o.bin");
    check(&message, &echo, &["PrOxYcReDs-0003"], &["bytes=0-9"]);
}

#[test]
fn s3_session_credentials() {
    for format in [EchoFormat::Lines, EchoFormat::Values] {
        let echo = EchoServer::start(403, format).only(&[
            "x-amz-security-token",
            "authorization",
            "range",
        ]);
        let c = client(&[
            ("AWS_S3_ENDPOINT", &echo.url()),
            ("AWS_VIRTUAL_HOSTING", "NO"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "AKIAECHOKEYID0001"),
            ("AWS_SECRET_ACCESS_KEY", "EcHoSeCrEtAcCeSsKeY/0001+abc"),
            ("AWS_SESSION_TOKEN", "EcHoSeSsIoNtOkEn//0001+xyz="),
        ]);
        let message = failure(&c, "s3://bucket/dir/key.bin");
        check(
            &message,
            &echo,
            &[
                "AKIAECHOKEYID0001",
                "EcHoSeCrEtAcCeSsKeY/0001+abc",
                "EcHoSeSsIoNtOkEn//0001+xyz=",
            ],
            &["/vsis3/bucket/dir/key.bin: ", "/bucket/dir/key.bin"],
        );
    }
}

#[test]
fn source_session_credentials() {
    let echo = EchoServer::start(403, EchoFormat::Lines).only(&[
        "x-amz-security-token",
        "authorization",
        "range",
    ]);
    let c = client(&[
        ("SOURCE_ENDPOINT", &echo.url()),
        ("SOURCE_ACCESS_KEY_ID", "SOURCEKEYID0001"),
        ("SOURCE_SECRET_ACCESS_KEY", "SoUrCeSeCrEt-0001"),
        ("SOURCE_SESSION_TOKEN", "SoUrCeSeSsIoN-0001"),
    ]);
    let message = failure(&c, "source://acct/prod/k.bin");
    check(
        &message,
        &echo,
        &["SOURCEKEYID0001", "SoUrCeSeCrEt-0001", "SoUrCeSeSsIoN-0001"],
        &["GET /acct/prod/k.bin HTTP/1.1", "range: bytes=0-9"],
    );
}

#[test]
fn gcs_bearer_token() {
    for format in [EchoFormat::Lines, EchoFormat::Values] {
        let echo = EchoServer::start(403, format).only(&["authorization", "range"]);
        let c = client(&[
            ("GCS_ENDPOINT", &echo.url()),
            ("GCS_ACCESS_TOKEN", "ya29.GcSeChOtOkEn-0001"),
        ]);
        let message = failure(&c, "gs://bucket/o.bin");
        check(
            &message,
            &echo,
            &["ya29.GcSeChOtOkEn-0001"],
            &["/vsigs/bucket/o.bin: ", "bytes=0-9"],
        );
    }
}

#[test]
fn azure_sas_and_shared_key() {
    for format in [EchoFormat::Lines, EchoFormat::Values] {
        let echo = EchoServer::start(403, format).only(&["authorization", "range"]);
        let sas = "sv=2022-11-02&sp=r&se=2030-01-01&sig=AzSaSsIgNaTuRe%2B0001%3D";
        let c = client(&[
            ("AZURE_STORAGE_ENDPOINT", &format!("{}/acct", echo.url())),
            ("AZURE_STORAGE_ACCOUNT", "acct"),
            ("AZURE_STORAGE_SAS_TOKEN", sas),
        ]);
        let message = failure(&c, "az://container/blob.bin");
        check(
            &message,
            &echo,
            &["AzSaSsIgNaTuRe%2B0001%3D", "AzSaSsIgNaTuRe+0001="],
            &[
                "/vsiaz/container/blob.bin: ",
                "/acct/container/blob.bin?",
                "sv=2022-11-02",
            ],
        );

        let echo = EchoServer::start(403, format).only(&["authorization", "range"]);
        let key = "QXp1cmVTaGFyZWRLZXktMDAwMS1zZWNyZXQ=";
        let c = client(&[
            ("AZURE_STORAGE_ENDPOINT", &format!("{}/acct", echo.url())),
            ("AZURE_STORAGE_ACCOUNT", "acct"),
            ("AZURE_STORAGE_ACCESS_KEY", key),
        ]);
        let message = failure(&c, "az://container/blob.bin");
        let sent = echo.log()[0].header("authorization").unwrap().to_owned();
        assert!(sent.starts_with("SharedKey acct:"), "{sent}");
        check(&message, &echo, &[key], &["bytes=0-9"]);
    }
}

#[test]
fn hugging_face_tokens_from_the_option_and_a_file() {
    let echo = EchoServer::start(403, EchoFormat::Lines).only(&["authorization", "range"]);
    let c = client(&[
        ("HF_ENDPOINT", &echo.url()),
        ("HF_TOKEN", "hf_EcHoOpTiOnToKeN0001"),
    ]);
    let message = failure(&c, "hf://org/repo/f.bin");
    check(
        &message,
        &echo,
        &["hf_EcHoOpTiOnToKeN0001"],
        &["/vsihf/org/repo/f.bin: ", "range: bytes=0-9"],
    );

    // A token only the request shows (read from a file by the backend), echoed without its
    // header name: only the exact value sent can hide it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "hf_EcHoFiLeToKeN0002\n").unwrap();
    let echo = EchoServer::start(403, EchoFormat::Values).only(&["authorization", "range"]);
    let c = client(&[
        ("HF_ENDPOINT", &echo.url()),
        ("HF_TOKEN_PATH", file.to_str().unwrap()),
    ]);
    let message = failure(&c, "hf://org/repo/f.bin");
    check(&message, &echo, &["hf_EcHoFiLeToKeN0002"], &["bytes=0-9"]);
}
