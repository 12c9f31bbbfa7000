//! Each step of the Azure chain against its loopback endpoint, and the token answer rules.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use karu_testkit::app_service_identity::AppServiceIdentity;
use karu_testkit::azure_imds::AzureImds;
use karu_testkit::microsoft_token::{
    JWT_BEARER as KIT_JWT_BEARER, MicrosoftTokenServer, Registration,
};

use super::*;
use crate::credentials::test_support::{settings, with_context};

const PATH: &str = "/vsiaz/ctr/key";

fn load_with(options: &[(&str, &str)]) -> Result<Option<Resolved>> {
    with_context(&settings(options), PATH, None, load)
}

fn bearer(r: Option<Resolved>) -> (String, SystemTime) {
    let c = r.expect("credentials").credentials;
    (c.bearer_token, c.expires_at.expect("an expiry"))
}

fn near(t: SystemTime, from_now: Duration) -> bool {
    let want = SystemTime::now() + from_now;
    let diff = match t.duration_since(want) {
        Ok(d) => d,
        Err(e) => e.duration(),
    };
    diff < Duration::from_secs(5)
}

#[test]
fn direct_values_are_returned_as_they_are() {
    let r = load_with(&[
        ("AZURE_STORAGE_ACCOUNT", "acc"),
        ("AZURE_STORAGE_SAS_TOKEN", "?sv=1"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(r.credentials.account_name, "acc");
    assert_eq!(r.credentials.sas_token, "?sv=1");
    assert_eq!(r.credentials.expires_at, None);
    for (name, field) in [
        ("AZURE_STORAGE_ACCESS_TOKEN", "tok"),
        ("AZURE_STORAGE_ACCESS_KEY", "a2V5"),
    ] {
        let c = load_with(&[(name, field)]).unwrap().unwrap().credentials;
        assert!(c.bearer_token == field || c.secret_access_key == field);
    }
    // A connection string alone: the (empty) direct values, merged later by the backend.
    let r = load_with(&[(
        "AZURE_STORAGE_CONNECTION_STRING",
        "AccountName=a;AccountKey=a2V5",
    )])
    .unwrap()
    .unwrap();
    assert_eq!(r.credentials, Credentials::default());
}

#[test]
fn nothing_configured_finds_nothing_without_discovery() {
    // An account alone is no credential, and a hermetic config never asks IMDS.
    assert_eq!(load_with(&[]).unwrap(), None);
    assert_eq!(
        load_with(&[("AZURE_STORAGE_ACCOUNT", "acc")]).unwrap(),
        None
    );
    // A tenant and client without a secret or token file go on to the next steps.
    assert_eq!(
        load_with(&[("AZURE_TENANT_ID", "t"), ("AZURE_CLIENT_ID", "c")]).unwrap(),
        None
    );
}

fn registration(secret: Option<&str>, assertion: Option<&str>) -> Registration {
    Registration {
        tenant: "tenant-1".into(),
        client_id: "client-1".into(),
        scope: "https://storage.azure.com/.default".into(),
        secret: secret.map(str::to_owned),
        assertion: assertion.map(str::to_owned),
    }
}

#[test]
fn client_secret_against_the_authority() {
    let server = MicrosoftTokenServer::start(registration(Some("s3cret"), None));
    let authority = format!("{}/", server.authority());
    let opts = [
        ("AZURE_TENANT_ID", "tenant-1"),
        ("AZURE_CLIENT_ID", "client-1"),
        ("AZURE_CLIENT_SECRET", "s3cret"),
        ("AZURE_AUTHORITY_HOST", authority.as_str()),
    ];
    let (token, expires) = bearer(load_with(&opts).unwrap());
    assert_eq!(token, "ms-token-1");
    assert!(near(expires, Duration::from_secs(3600)));
    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/tenant-1/oauth2/v2.0/token");
    assert_eq!(seen.field("grant_type"), Some("client_credentials"));
    assert_eq!(seen.field("client_secret"), Some("s3cret"));
    assert_eq!(seen.field("client_assertion"), None);
    // A short expires_in is raised to a minute.
    server.set_knobs(|k| k.lifetime = Duration::from_secs(5));
    let (token, expires) = bearer(load_with(&opts).unwrap());
    assert_eq!(token, "ms-token-2");
    assert!(near(expires, Duration::from_secs(60)));
    // The scope option is sent; the server refuses a scope it does not know.
    let mut scoped = opts.to_vec();
    scoped.push(("AZURE_STORAGE_SCOPE", "https://other/.default"));
    let e = load_with(&scoped).unwrap_err();
    assert_eq!(e.status(), Status::Credentials);
    assert_eq!(
        e.message(),
        format!("{PATH}: credential endpoint returned HTTP 400")
    );
    assert_eq!(
        server.requests()[2].field("scope"),
        Some("https://other/.default")
    );
    // A wrong secret.
    let mut wrong = opts.to_vec();
    wrong[2] = ("AZURE_CLIENT_SECRET", "nope");
    let e = load_with(&wrong).unwrap_err();
    assert_eq!(
        e.message(),
        format!("{PATH}: credential endpoint returned HTTP 401")
    );
    assert!(!e.message().contains("nope"));
    assert_eq!(server.issued(), 2);
}

#[test]
fn federated_token_file_is_sent_trimmed_as_a_client_assertion() {
    let server = MicrosoftTokenServer::start(registration(None, Some("header.payload.sig")));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "  header.payload.sig\n").unwrap();
    let authority = server.authority();
    let file_s = file.to_str().unwrap();
    let opts = [
        ("AZURE_TENANT_ID", "tenant-1"),
        ("AZURE_CLIENT_ID", "client-1"),
        ("AZURE_FEDERATED_TOKEN_FILE", file_s),
        ("AZURE_AUTHORITY_HOST", authority.as_str()),
    ];
    let (token, _) = bearer(load_with(&opts).unwrap());
    assert_eq!(token, "ms-token-1");
    let seen = &server.requests()[0];
    assert_eq!(seen.field("client_assertion_type"), Some(KIT_JWT_BEARER));
    assert_eq!(seen.field("client_assertion"), Some("header.payload.sig"));
    assert_eq!(seen.field("client_secret"), None);
    // A missing or empty file is a clear error, before any request.
    std::fs::write(&file, " \n").unwrap();
    let e = load_with(&opts).unwrap_err();
    assert_eq!(e.status(), Status::Credentials);
    assert!(e.message().ends_with("is empty"), "{}", e.message());
    let gone = dir.path().join("gone");
    let mut missing = opts.to_vec();
    missing[2] = ("AZURE_FEDERATED_TOKEN_FILE", gone.to_str().unwrap());
    let e = load_with(&missing).unwrap_err();
    assert!(
        e.message()
            .starts_with(&format!("{PATH}: cannot read AZURE_FEDERATED_TOKEN_FILE")),
        "{}",
        e.message()
    );
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn app_service_identity() {
    let server = AppServiceIdentity::start("id-header");
    let endpoint = server.endpoint();
    server.set_knobs(|k| k.lifetime = Duration::from_secs(600));
    let opts = [
        ("IDENTITY_ENDPOINT", endpoint.as_str()),
        ("IDENTITY_HEADER", "id-header"),
        ("AZURE_CLIENT_ID", "client-1"),
    ];
    let (token, expires) = bearer(load_with(&opts).unwrap());
    assert_eq!(token, "app-token-1");
    assert!(near(expires, Duration::from_secs(600)));
    let seen = &server.requests()[0];
    assert_eq!(seen.param("api-version"), Some("2019-08-01"));
    assert_eq!(seen.param("resource"), Some("https://storage.azure.com/"));
    // AZURE_CLIENT_ID stands in for the client id selector.
    assert_eq!(seen.param("client_id"), Some("client-1"));
    let e = load_with(&[
        ("IDENTITY_ENDPOINT", endpoint.as_str()),
        ("IDENTITY_HEADER", "wrong"),
    ])
    .unwrap_err();
    assert_eq!(
        e.message(),
        format!("{PATH}: credential endpoint returned HTTP 401")
    );
    let e = load_with(&[("IDENTITY_ENDPOINT", endpoint.as_str())]).unwrap_err();
    assert_eq!(
        e.message(),
        format!("{PATH}: IDENTITY_ENDPOINT is set but IDENTITY_HEADER is not")
    );
}

#[test]
fn imds_with_an_explicit_endpoint() {
    let imds = AzureImds::start();
    let endpoint = imds.endpoint();
    imds.set_knobs(|k| k.lifetime = Duration::from_secs(120));
    let opts = [
        ("IMDS_ENDPOINT", endpoint.as_str()),
        ("AZURE_IMDS_MSI_RES_ID", "/sub/x/rg/y"),
        ("AZURE_STORAGE_RESOURCE", "https://res.example/"),
    ];
    let (token, expires) = bearer(load_with(&opts).unwrap());
    assert_eq!(token, "imds-token-1");
    assert!(near(expires, Duration::from_secs(120)));
    let seen = &imds.requests()[0];
    assert_eq!(seen.header("metadata"), Some("true"));
    assert_eq!(seen.param("api-version"), Some("2018-02-01"));
    assert_eq!(seen.param("resource"), Some("https://res.example/"));
    assert_eq!(
        imds.selectors(),
        [Some(("msi_res_id".to_owned(), "/sub/x/rg/y".to_owned()))]
    );
    // Object id selector, and no selector at all.
    load_with(&[
        ("IMDS_ENDPOINT", endpoint.as_str()),
        ("AZURE_IMDS_OBJECT_ID", "obj"),
    ])
    .unwrap()
    .unwrap();
    load_with(&[("IMDS_ENDPOINT", endpoint.as_str())])
        .unwrap()
        .unwrap();
    assert_eq!(
        imds.selectors()[1..],
        [Some(("object_id".to_owned(), "obj".to_owned())), None]
    );
    // An explicit endpoint's failure surfaces.
    imds.set_knobs(|k| k.fail_with = Some(500));
    let e = load_with(&[("IMDS_ENDPOINT", endpoint.as_str())]).unwrap_err();
    assert_eq!(e.status(), Status::Credentials);
    assert_eq!(
        e.message(),
        format!("{PATH}: credential endpoint returned HTTP 500")
    );
}

#[test]
fn two_imds_selectors_are_a_config_error() {
    let imds = AzureImds::start();
    let endpoint = imds.endpoint();
    let e = load_with(&[
        ("IMDS_ENDPOINT", endpoint.as_str()),
        ("AZURE_IMDS_OBJECT_ID", "obj"),
        ("AZURE_IMDS_CLIENT_ID", "cli"),
    ])
    .unwrap_err();
    assert_eq!(e.status(), Status::Config);
    assert_eq!(
        e.message(),
        format!(
            "{PATH}: at most one of AZURE_IMDS_OBJECT_ID, AZURE_IMDS_CLIENT_ID and \
             AZURE_IMDS_MSI_RES_ID may be set"
        )
    );
    assert!(imds.requests().is_empty());
}

fn answer(status: u16, body: &str) -> Answer {
    Answer {
        status,
        body: Bytes::from(body.to_owned()),
    }
}

fn token_of(a: &Answer, expiry: Expiry) -> Result<Resolved> {
    with_context(&settings(&[]), PATH, None, |ctx| token(ctx, a, expiry))
}

#[test]
fn token_answer_rules() {
    let exp = |body: &str, e: Expiry| {
        token_of(&answer(200, body), e)
            .unwrap()
            .credentials
            .expires_at
            .unwrap()
    };
    let hour = Duration::from_secs(3600);
    assert!(near(
        exp(
            r#"{"access_token":"t","expires_in":600}"#,
            Expiry::ExpiresIn
        ),
        Duration::from_secs(600)
    ));
    assert!(near(
        exp(
            r#"{"access_token":"t","expires_in":"600"}"#,
            Expiry::ExpiresIn
        ),
        Duration::from_secs(600)
    ));
    assert!(near(
        exp(r#"{"access_token":"t"}"#, Expiry::ExpiresIn),
        hour
    ));
    assert!(near(
        exp(r#"{"access_token":"t","expires_in":1}"#, Expiry::ExpiresIn),
        Duration::from_secs(60)
    ));
    assert_eq!(
        exp(
            r#"{"access_token":"t","expires_on":"2000000000"}"#,
            Expiry::ExpiresOn
        ),
        UNIX_EPOCH + Duration::from_secs(2_000_000_000)
    );
    assert_eq!(
        exp(
            r#"{"access_token":"t","expires_on":2000000000}"#,
            Expiry::ExpiresOn
        ),
        UNIX_EPOCH + Duration::from_secs(2_000_000_000)
    );
    assert!(near(
        exp(r#"{"access_token":"t","expires_in":5}"#, Expiry::ExpiresOn),
        hour
    ));
    for body in [r#"{"access_token":""}"#, r#"{"token":"t"}"#, "not json"] {
        let e = token_of(&answer(200, body), Expiry::ExpiresIn).unwrap_err();
        assert_eq!(e.status(), Status::Credentials);
        assert_eq!(
            e.message(),
            format!("{PATH}: credential response has no access_token")
        );
    }
    let e = token_of(&answer(403, r#"{"access_token":"t"}"#), Expiry::ExpiresIn).unwrap_err();
    assert_eq!(
        e.message(),
        format!("{PATH}: credential endpoint returned HTTP 403")
    );
}
