//! Every URL, header and error expectation of spec §5.8 for Azure, plus the Shared Key vector.

use std::time::{Duration, SystemTime};

use super::super::test_support::{header, prepare, settings, signed};
use super::super::{ByteRange, Signing};
use super::*;
use crate::config::{Config, Credentials, Settings};
use crate::transport::MAX_REDIRECTS;

const VECTOR_TIME: u64 = 1_440_938_160;

fn at(auth: &Auth) -> Signing<'_> {
    Signing {
        auth,
        region: None,
        now: SystemTime::UNIX_EPOCH + Duration::from_secs(VECTOR_TIME),
    }
}

const RANGE: ByteRange = ByteRange::Span { first: 3, last: 9 };

fn build(options: &[(&str, &str)], uri: &str, auth: &Auth) -> Result<Prepared> {
    let locator = Locator::parse(uri).unwrap();
    prepare(&settings(options), &locator, RANGE, None, at(auth))
}

fn url(options: &[(&str, &str)], uri: &str, auth: &Auth) -> String {
    build(options, uri, auth).unwrap().request.uri.to_string()
}

fn error(options: &[(&str, &str)], uri: &str, auth: &Auth) -> Error {
    build(options, uri, auth).unwrap_err()
}

#[test]
fn shared_key_vector() {
    let auth = signed(Credentials {
        account_name: "account".into(),
        secret_access_key: "a2V5".into(),
        ..Credentials::default()
    });
    let locator = Locator::parse("az://container/a b").unwrap();
    let p = prepare(&settings(&[]), &locator, RANGE, Some("\"etag\""), at(&auth)).unwrap();
    assert_eq!(
        p.request.uri,
        "https://account.blob.core.windows.net/container/a%20b"
    );
    let names: Vec<&str> = p.request.headers.keys().map(|n| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "range",
            "if-match",
            "x-ms-date",
            "x-ms-version",
            "authorization"
        ]
    );
    assert_eq!(header(&p, "Range"), Some("bytes=3-9"));
    assert_eq!(
        header(&p, "x-ms-date"),
        Some("Sun, 30 Aug 2015 12:36:00 GMT")
    );
    assert_eq!(header(&p, "x-ms-version"), Some("2023-11-03"));
    assert_eq!(
        header(&p, "Authorization"),
        Some("SharedKey account:ATPHSo27zQ9aJ7DUXth+r77/Cii4diPaL3gbBGTR2JE=")
    );
    assert_eq!(p.redirect, RedirectPolicy::Never);
}

#[test]
fn path_style_endpoints_put_the_account_in_the_canonical_resource_twice() {
    // Azurite's root has the account as its path; the signature covers the whole URL path.
    let key = "a2V5";
    let opts = [
        ("AZURE_STORAGE_ENDPOINT", "http://127.0.0.1:10000/acc/"),
        ("AZURE_STORAGE_ACCOUNT", "acc"),
        ("AZURE_STORAGE_ACCESS_KEY", key),
    ];
    let auth = signed(Credentials::default());
    let p = build(&opts, "az://ctr/k", &auth).unwrap();
    assert_eq!(p.request.uri, "http://127.0.0.1:10000/acc/ctr/k");
    let expected = ToSign {
        account: "acc",
        path: "/acc/ctr/k",
        range: "bytes=3-9",
        if_match: None,
        if_unmodified_since: None,
        date: "Sun, 30 Aug 2015 12:36:00 GMT",
    }
    .authorization(b"key");
    assert_eq!(header(&p, "Authorization"), Some(expected.as_str()));
}

#[test]
fn default_urls_for_blob_and_data_lake() {
    let acc = [("AZURE_STORAGE_ACCOUNT", "account")];
    let cases = [
        (
            "az://container/a b",
            "https://account.blob.core.windows.net/container/a%20b",
        ),
        (
            "/vsiaz/container/a b",
            "https://account.blob.core.windows.net/container/a%20b",
        ),
        (
            "abfs://fs/dir/a b",
            "https://account.dfs.core.windows.net/fs/dir/a%20b",
        ),
        (
            "/vsiadls/fs/x//y",
            "https://account.dfs.core.windows.net/fs/x//y",
        ),
    ];
    for (uri, expected) in cases {
        assert_eq!(url(&acc, uri, &Auth::Anonymous), expected, "{uri}");
    }
}

#[test]
fn connection_string_suffix_and_protocol() {
    let anon = Auth::Anonymous;
    let cs = [(
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=dev;EndpointSuffix=example.test;DefaultEndpointsProtocol=http",
    )];
    assert_eq!(
        url(&cs, "az://c/a b", &anon),
        "http://dev.blob.example.test/c/a%20b"
    );
    assert_eq!(
        url(&cs, "abfs://c/k", &anon),
        "http://dev.dfs.example.test/c/k"
    );
    let bad = [(
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=dev;DefaultEndpointsProtocol=ftp",
    )];
    let e = error(&bad, "az://c/k", &anon);
    assert_eq!(e.status(), Status::Config);
    assert_eq!(
        e.message(),
        "/vsiaz/c/k: AZURE_STORAGE_CONNECTION_STRING DefaultEndpointsProtocol must be http or https"
    );
}

#[test]
fn endpoint_precedence_option_then_blob_or_dfs_endpoint_then_account() {
    let anon = Auth::Anonymous;
    let cs = (
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=dev;BlobEndpoint=http://127.0.0.1:1/dev;DfsEndpoint=http://127.0.0.1:2/dev/",
    );
    assert_eq!(url(&[cs], "az://c/k", &anon), "http://127.0.0.1:1/dev/c/k");
    assert_eq!(
        url(&[cs], "abfs://c/k", &anon),
        "http://127.0.0.1:2/dev/c/k"
    );
    // The option wins, and a bare host gets https.
    let opt = ("AZURE_STORAGE_ENDPOINT", "storage.example.test");
    assert_eq!(
        url(&[cs, opt], "az://c/k", &anon),
        "https://storage.example.test/c/k"
    );
    assert_eq!(
        url(&[cs, opt], "abfs://c/k", &anon),
        "https://storage.example.test/c/k"
    );
    // A Data Lake path with only a BlobEndpoint uses the account's dfs host.
    let blob_only = (
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=dev;BlobEndpoint=http://127.0.0.1:1/dev",
    );
    assert_eq!(
        url(&[blob_only], "abfs://c/k", &anon),
        "https://dev.dfs.core.windows.net/c/k"
    );
}

#[test]
fn no_endpoint_and_no_account_fails_every_read() {
    for auth in [
        Auth::Anonymous,
        Auth::Missing,
        signed(Credentials::default()),
    ] {
        let e = error(&[], "az://c/k", &auth);
        assert_eq!(e.status(), Status::Config);
        assert_eq!(
            e.message(),
            "/vsiaz/c/k: Azure needs AZURE_STORAGE_ACCOUNT or an explicit endpoint"
        );
    }
}

#[test]
fn bad_endpoints_are_config_errors_without_their_values() {
    let anon = Auth::Anonymous;
    let cases = [
        ("http://h/?sig=secret", "cannot contain a query"),
        ("http://h/#secret", "cannot contain a fragment"),
        ("http://user:secret@h/", "cannot contain user information"),
        ("ftp://h/", "must be an http or https URL"),
        ("http://", "has no host"),
    ];
    for (value, why) in cases {
        let e = error(&[("AZURE_STORAGE_ENDPOINT", value)], "az://c/k", &anon);
        assert_eq!(e.status(), Status::Config, "{value}");
        assert_eq!(
            e.message(),
            format!("/vsiaz/c/k: AZURE_STORAGE_ENDPOINT {why}"),
            "{value}"
        );
        assert!(!e.message().contains("secret"));
    }
    let cs = (
        "AZURE_STORAGE_CONNECTION_STRING",
        "BlobEndpoint=http://h/?sv=1",
    );
    assert_eq!(
        error(&[cs], "az://c/k", &anon).message(),
        "/vsiaz/c/k: AZURE_STORAGE_CONNECTION_STRING BlobEndpoint cannot contain a query"
    );
}

#[test]
fn malformed_connection_strings_fail_every_read() {
    for auth in [Auth::Anonymous, signed(Credentials::default())] {
        let e = error(
            &[(
                "AZURE_STORAGE_CONNECTION_STRING",
                "AccountName=a;AccountKey",
            )],
            "az://c/k",
            &auth,
        );
        assert_eq!(e.status(), Status::Config);
        assert_eq!(
            e.message(),
            "/vsiaz/c/k: AZURE_STORAGE_CONNECTION_STRING is malformed: segment 2 has no '='"
        );
    }
}

#[test]
fn sas_is_normalised_to_a_single_question_mark() {
    for token in [
        "sv=2023&sig=a%2Bb",
        "?sv=2023&sig=a%2Bb",
        "&sv=2023&sig=a%2Bb",
    ] {
        let auth = signed(Credentials {
            sas_token: token.into(),
            ..Credentials::default()
        });
        let p = build(&[("AZURE_STORAGE_ACCOUNT", "acc")], "az://c/a b", &auth).unwrap();
        assert_eq!(
            p.request.uri,
            "https://acc.blob.core.windows.net/c/a%20b?sv=2023&sig=a%2Bb"
        );
        assert_eq!(header(&p, "x-ms-version"), Some("2023-11-03"));
        assert_eq!(header(&p, "Authorization"), None);
        assert_eq!(p.redirect, RedirectPolicy::Never);
    }
    let bad = signed(Credentials {
        sas_token: "sv=1&sig=a secret".into(),
        ..Credentials::default()
    });
    let e = error(&[("AZURE_STORAGE_ACCOUNT", "acc")], "az://c/k", &bad);
    assert_eq!(e.status(), Status::Credentials);
    assert!(!e.message().contains("secret"), "{}", e.message());
}

#[test]
fn anonymous_requests_follow_redirects_and_carry_the_version() {
    let p = build(
        &[
            ("AZURE_STORAGE_ACCOUNT", "acc"),
            ("AZURE_STORAGE_SAS_TOKEN", "sv=1"),
        ],
        "az://c/k",
        &Auth::Anonymous,
    )
    .unwrap();
    // Anonymous means no SAS either.
    assert_eq!(p.request.uri, "https://acc.blob.core.windows.net/c/k");
    assert_eq!(header(&p, "x-ms-version"), Some("2023-11-03"));
    assert_eq!(header(&p, "Authorization"), None);
    assert_eq!(
        p.redirect,
        RedirectPolicy::Follow {
            max: MAX_REDIRECTS,
            same_origin_only: false
        }
    );
    let with_headers = build(
        &[
            ("AZURE_STORAGE_ACCOUNT", "acc"),
            ("KARU_HTTP_HEADERS", "X-Trace: 1"),
        ],
        "az://c/k",
        &Auth::Anonymous,
    )
    .unwrap();
    assert_eq!(header(&with_headers, "X-Trace"), Some("1"));
    assert_eq!(
        with_headers.redirect,
        RedirectPolicy::Follow {
            max: MAX_REDIRECTS,
            same_origin_only: true
        }
    );
}

#[test]
fn bearer_tokens() {
    let auth = signed(Credentials {
        bearer_token: "tok".into(),
        ..Credentials::default()
    });
    let p = build(&[("AZURE_STORAGE_ACCOUNT", "acc")], "az://c/k", &auth).unwrap();
    assert_eq!(header(&p, "Authorization"), Some("Bearer tok"));
    assert_eq!(header(&p, "x-ms-version"), Some("2023-11-03"));
    assert_eq!(header(&p, "x-ms-date"), None);
    assert_eq!(p.redirect, RedirectPolicy::Never);
}

#[test]
fn auth_order_is_sas_then_bearer_then_shared_key() {
    let all = Credentials {
        account_name: "acc".into(),
        secret_access_key: "a2V5".into(),
        sas_token: "sv=1".into(),
        bearer_token: "tok".into(),
        ..Credentials::default()
    };
    let p = build(&[], "az://c/k", &signed(all.clone())).unwrap();
    assert!(p.request.uri.to_string().ends_with("?sv=1"));
    assert_eq!(header(&p, "Authorization"), None);
    let no_sas = Credentials {
        sas_token: String::new(),
        ..all.clone()
    };
    let p = build(&[], "az://c/k", &signed(no_sas.clone())).unwrap();
    assert_eq!(header(&p, "Authorization"), Some("Bearer tok"));
    let key_only = Credentials {
        bearer_token: String::new(),
        ..no_sas
    };
    let p = build(&[], "az://c/k", &signed(key_only)).unwrap();
    assert!(
        header(&p, "Authorization")
            .unwrap()
            .starts_with("SharedKey acc:")
    );
}

#[test]
fn stage_fields_win_and_empty_ones_fall_back_to_options_then_the_connection_string() {
    let cs = (
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=fromstring;AccountKey=c3RyaW5n;SharedAccessSignature=sv=string",
    );
    let settings = settings(&[cs, ("AZURE_STORAGE_ACCOUNT", "fromoption")]);
    let locator = Locator::parse("az://c/k").unwrap();
    let profiles = super::super::Profiles::default();
    let attempt = |auth| Attempt {
        settings: &settings,
        locator: &locator,
        range: RANGE,
        pin: None,
        signing: at(auth),
        signers: &profiles.signers,
    };
    let profile = profiles.get(&settings, &locator);
    let super::super::Profile::Azure(options) = &*profile else {
        panic!("an Azure profile: {profile:?}")
    };
    let conn = connection_string(&attempt(&Auth::Anonymous), options).unwrap();
    let given = signed(Credentials {
        bearer_token: "tok".into(),
        sas_token: String::new(),
        ..Credentials::default()
    });
    assert_eq!(
        merge(&attempt(&given), options, conn),
        Merged {
            account: "fromoption",
            key: "c3RyaW5n",
            sas: "sv=string",
            token: "tok",
        }
    );
    let callback = signed(Credentials {
        account_name: "fromcallback".into(),
        sas_token: "sv=callback".into(),
        ..Credentials::default()
    });
    let m = merge(&attempt(&callback), options, conn);
    assert_eq!((m.account, m.sas), ("fromcallback", "sv=callback"));
    // A key from the connection string signs when nothing else is set.
    let keyed = settings_with_key_only();
    let p = prepare(
        &keyed,
        &Locator::parse("az://c/k").unwrap(),
        RANGE,
        None,
        at(&Auth::Missing),
    )
    .unwrap();
    assert!(
        header(&p, "Authorization")
            .unwrap()
            .starts_with("SharedKey dev:")
    );
}

fn settings_with_key_only() -> Settings {
    settings(&[(
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=dev;AccountKey=a2V5",
    )])
}

#[test]
fn missing_credentials_and_bad_keys() {
    let acc = [("AZURE_STORAGE_ACCOUNT", "acc")];
    let e = error(&acc, "az://c/k", &Auth::Missing);
    assert_eq!(e.status(), Status::Credentials);
    assert_eq!(
        e.message(),
        "/vsiaz/c/k: no Azure credentials; configure a SAS, access token or account key, \
         install a custom provider, or set AZURE_NO_SIGN_REQUEST=YES"
    );
    // A key without an account cannot sign either.
    let key_only = signed(Credentials {
        secret_access_key: "a2V5".into(),
        ..Credentials::default()
    });
    let e = error(
        &[("AZURE_STORAGE_ENDPOINT", "http://127.0.0.1:1")],
        "az://c/k",
        &key_only,
    );
    assert_eq!(e.status(), Status::Credentials);
    let bad_key = signed(Credentials {
        secret_access_key: "not*base64".into(),
        ..Credentials::default()
    });
    let e = error(&acc, "az://c/k", &bad_key);
    assert_eq!(e.status(), Status::Credentials);
    assert_eq!(
        e.message(),
        "/vsiaz/c/k: AZURE_STORAGE_ACCESS_KEY is not base64"
    );
    // Whitespace inside a key is ignored.
    let spaced = signed(Credentials {
        secret_access_key: "a2\nV5 ".into(),
        ..Credentials::default()
    });
    let p = build(&acc, "az://c/a b", &spaced).unwrap();
    let plain = signed(Credentials {
        secret_access_key: "a2V5".into(),
        ..Credentials::default()
    });
    let q = build(&acc, "az://c/a b", &plain).unwrap();
    assert_eq!(header(&p, "Authorization"), header(&q, "Authorization"));
}

#[test]
fn configured_headers_cannot_touch_auth_or_x_ms_headers() {
    for (line, name) in [
        ("x-ms-version: 2009-09-19", "x-ms-version"),
        ("Authorization: Bearer x", "Authorization"),
        ("X-MS-Foo: 1", "X-MS-Foo"),
        ("Date: now", "Date"),
    ] {
        let e = error(
            &[
                ("AZURE_STORAGE_ACCOUNT", "acc"),
                ("KARU_HTTP_HEADERS", line),
            ],
            "az://c/k",
            &Auth::Anonymous,
        );
        assert_eq!(e.status(), Status::Config);
        assert_eq!(
            e.message(),
            format!("KARU_HTTP_HEADERS cannot override Karu-managed header '{name}'")
        );
    }
}

#[test]
fn path_rules_choose_accounts_per_container() {
    let mut config = Config::empty();
    config.set("AZURE_STORAGE_ACCOUNT", Some("main")).unwrap();
    config
        .set_path("az://special", "AZURE_STORAGE_ACCOUNT", Some("other"))
        .unwrap();
    let s = config.freeze().unwrap();
    let anon = Auth::Anonymous;
    let get = |uri: &str| {
        prepare(&s, &Locator::parse(uri).unwrap(), RANGE, None, at(&anon))
            .unwrap()
            .request
            .uri
            .to_string()
    };
    assert_eq!(
        get("az://special/k"),
        "https://other.blob.core.windows.net/special/k"
    );
    assert_eq!(
        get("az://plain/k"),
        "https://main.blob.core.windows.net/plain/k"
    );
}
