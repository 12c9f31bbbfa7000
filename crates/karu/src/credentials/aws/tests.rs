//! The AWS chain against temp files and the test kit's loopback STS, container and IMDS
//! endpoints. No test reaches the real metadata addresses: IMDS is either off or pointed at
//! loopback.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use karu_testkit::{ContainerServer, ImdsServer, StsServer};

use super::*;
use crate::config::{Config, Settings};
use crate::credentials::http::Call;
use crate::credentials::test_support::{http, settings, with_context};

const PATH: &str = "/vsis3/bucket/key";

fn run(options: &[(&str, &str)]) -> Result<Option<Resolved>> {
    with_context(&settings(options), PATH, None, load)
}

fn keys_of(r: &Resolved) -> (&str, &str, &str) {
    let c = &r.credentials;
    (
        c.access_key_id.as_str(),
        c.secret_access_key.as_str(),
        c.session_token.as_str(),
    )
}

fn failure(options: &[(&str, &str)]) -> (Status, String) {
    let e = run(options).unwrap_err();
    (e.status(), e.message().to_owned())
}

fn credentials_error(message: &str) -> (Status, String) {
    (Status::Credentials, format!("{PATH}: {message}"))
}

fn config_error(message: &str) -> (Status, String) {
    (Status::Config, format!("{PATH}: {message}"))
}

/// A directory of files written by tests.
struct Files(tempfile::TempDir);

impl Files {
    fn new() -> Files {
        Files(tempfile::tempdir().unwrap())
    }

    /// Writes `name` and returns its path.
    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn home(&self) -> &Path {
        self.0.path()
    }
}

// ---------------------------------------------------------------------------------------
// Step 1: explicit keys

#[test]
fn explicit_keys_with_and_without_token() {
    let r = run(&[
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "SECRET"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(keys_of(&r), ("AKID", "SECRET", ""));
    assert_eq!((r.credentials.expires_at, r.region), (None, None));

    let r = run(&[
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "SECRET"),
        ("AWS_SESSION_TOKEN", "TOKEN"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(keys_of(&r), ("AKID", "SECRET", "TOKEN"));
}

#[test]
fn half_a_key_pair_fails() {
    let together = credentials_error("AWS access key and secret must be set together");
    for half in [
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "SECRET"),
    ] {
        assert_eq!(failure(&[half]), together);
    }
    // Empty values count as unset.
    assert_eq!(
        failure(&[("AWS_ACCESS_KEY_ID", "AKID"), ("AWS_SECRET_ACCESS_KEY", "")]),
        together
    );
}

#[test]
fn nothing_configured_is_empty() {
    assert_eq!(run(&[]).unwrap(), None);
}

#[test]
fn explicit_keys_skip_the_profile() {
    let r = run(&[
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "SECRET"),
        ("AWS_PROFILE", "does-not-exist"),
        ("AWS_CONFIG_FILE", "/nonexistent/config"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(keys_of(&r), ("AKID", "SECRET", ""));
}

// ---------------------------------------------------------------------------------------
// Step 2 and 5: profiles

#[test]
fn profile_static_keys_with_region() {
    let files = Files::new();
    let config = files.write(
        "config",
        "[default]\nregion = eu-north-1\n[profile dev]\nregion = ap-south-2\n",
    );
    let credentials = files.write(
        "credentials",
        "[default]\naws_access_key_id = DEF\naws_secret_access_key = DEFS\n\
         [dev]\naws_access_key_id = DEV\naws_secret_access_key = DEVS\naws_session_token = DEVT\n",
    );
    let base = [
        ("AWS_CONFIG_FILE", config.as_str()),
        ("AWS_SHARED_CREDENTIALS_FILE", credentials.as_str()),
    ];
    let r = run(&base).unwrap().unwrap();
    assert_eq!(keys_of(&r), ("DEF", "DEFS", ""));
    assert_eq!(r.region.as_deref(), Some("eu-north-1"));
    assert_eq!(r.credentials.expires_at, None);

    let r = run(&[base[0], base[1], ("AWS_PROFILE", "dev")])
        .unwrap()
        .unwrap();
    assert_eq!(keys_of(&r), ("DEV", "DEVS", "DEVT"));
    assert_eq!(r.region.as_deref(), Some("ap-south-2"));

    assert_eq!(
        failure(&[base[0], base[1], ("AWS_PROFILE", "prod")]),
        credentials_error("AWS profile 'prod' was not found")
    );
}

#[test]
fn default_profile_from_the_home_directory_with_discovery() {
    let files = Files::new();
    files.write(
        ".aws/credentials",
        "[default]\naws_access_key_id = HOME\naws_secret_access_key = HOMES\n",
    );
    files.write(".aws/config", "[default]\nregion = sa-east-1\n");
    let home = files.home().display().to_string();
    let settings = Config::from_vars([
        ("HOME".to_owned(), home.clone()),
        ("AWS_EC2_METADATA_DISABLED".to_owned(), "true".to_owned()),
    ])
    .freeze()
    .unwrap();
    let r = with_context(&settings, PATH, None, load).unwrap().unwrap();
    assert_eq!(keys_of(&r), ("HOME", "HOMES", ""));
    assert_eq!(r.region.as_deref(), Some("sa-east-1"));

    // The hermetic builder does not look there.
    let mut config = Config::empty();
    config
        .set("AWS_EC2_METADATA_DISABLED", Some("true"))
        .unwrap();
    let settings = config.freeze().unwrap();
    assert_eq!(with_context(&settings, PATH, None, load).unwrap(), None);
}

#[test]
fn refused_profiles() {
    let files = Files::new();
    let config = files.write(
        "config",
        "[profile sso]\nsso_session = corp\n\
         [profile chained]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = base\n\
         [profile source-only]\nsource_profile = base\n\
         [profile half]\naws_access_key_id = ONLY\n",
    );
    let config = ("AWS_CONFIG_FILE", config.as_str());
    let cases = [
        (
            "sso",
            "AWS IAM Identity Center profiles require a custom credential provider",
        ),
        (
            "chained",
            "AWS chained AssumeRole profiles require a custom credential provider; \
             credential_process and web identity profiles are supported natively",
        ),
        (
            "source-only",
            "AWS AssumeRole profiles require a custom credential provider",
        ),
        (
            "half",
            "AWS profile access key and secret must be set together",
        ),
    ];
    for (profile, message) in cases {
        assert_eq!(
            failure(&[config, ("AWS_PROFILE", profile)]),
            credentials_error(message),
            "{profile}"
        );
    }
    // A role named by option without a token file is refused the same way.
    assert_eq!(
        failure(&[("AWS_ROLE_ARN", "arn:aws:iam::1:role/r")]),
        credentials_error(cases[1].1)
    );
}

#[test]
fn profile_credential_process() {
    let files = Files::new();
    let config = files.write(
        "config",
        "[profile helper]\nregion = us-west-1\ncredential_process = printf \
         '{\"AccessKeyId\":\"PROC\",\"SecretAccessKey\":\"PROCS\",\"SessionToken\":\"PROCT\",\
         \"Expiration\":\"2099-01-01T00:00:00Z\"}'\n\
         [profile failing]\ncredential_process = exit 5\n",
    );
    let config = ("AWS_CONFIG_FILE", config.as_str());
    let r = run(&[config, ("AWS_PROFILE", "helper")]).unwrap().unwrap();
    assert_eq!(keys_of(&r), ("PROC", "PROCS", "PROCT"));
    assert_eq!(r.region.as_deref(), Some("us-west-1"));
    assert_eq!(
        r.credentials.expires_at,
        Some(UNIX_EPOCH + Duration::from_secs(4_070_908_800))
    );
    assert_eq!(
        failure(&[config, ("AWS_PROFILE", "failing")]),
        credentials_error("AWS credential_process exited with status 5")
    );
}

// ---------------------------------------------------------------------------------------
// Step 3: web identity

/// The form field `name` of STS request `i`.
fn form_field(sts: &StsServer, i: usize, name: &str) -> String {
    sts.forms()[i]
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

#[test]
fn web_identity_from_options() {
    let sts = StsServer::start("the-jwt", 3600);
    let files = Files::new();
    let token = files.write("token", "  the-jwt\n");
    let before = SystemTime::now();
    let r = run(&[
        ("AWS_ROLE_ARN", "arn:aws:iam::123:role/reader"),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", &token),
        ("AWS_STS_ENDPOINT", &sts.url()),
    ])
    .unwrap()
    .unwrap();
    let issued = &sts.issued()[0];
    assert_eq!(keys_of(&r), ("STS-AKID-1", "sts-secret-1", "sts-token-1"));
    // STS writes whole seconds.
    let expires = r.credentials.expires_at.unwrap();
    assert!(expires <= issued.expires_at && expires + Duration::from_secs(1) > issued.expires_at);
    assert_eq!(r.region, None);

    assert_eq!(sts.requests(), 1);
    assert_eq!(form_field(&sts, 0, "Action"), "AssumeRoleWithWebIdentity");
    assert_eq!(form_field(&sts, 0, "Version"), "2011-06-15");
    assert_eq!(
        form_field(&sts, 0, "RoleArn"),
        "arn:aws:iam::123:role/reader"
    );
    assert_eq!(form_field(&sts, 0, "WebIdentityToken"), "the-jwt");
    // Default session name: karu-<unix time>.
    let name = &sts.session_names()[0];
    let secs: u64 = name.strip_prefix("karu-").unwrap().parse().unwrap();
    let at = UNIX_EPOCH + Duration::from_secs(secs);
    assert!(at + Duration::from_secs(1) >= before && at <= SystemTime::now());
}

#[test]
fn web_identity_from_a_profile_with_session_names_and_region() {
    let sts = StsServer::start("profile-jwt", 900);
    let files = Files::new();
    let token = files.write("token", "profile-jwt");
    let config = files.write(
        "config",
        &format!(
            "[profile wi]\nrole_arn = arn:aws:iam::9:role/w\nweb_identity_token_file = {token}\n\
             role_session_name = from-profile\nregion = ca-central-1\n\
             aws_access_key_id = NOT-USED\naws_secret_access_key = NOT-USED\n"
        ),
    );
    let url = sts.url();
    let base = vec![
        ("AWS_CONFIG_FILE", config.as_str()),
        ("AWS_PROFILE", "wi"),
        ("AWS_STS_ENDPOINT", url.as_str()),
    ];
    let r = run(&base).unwrap().unwrap();
    assert_eq!(keys_of(&r).0, "STS-AKID-1");
    assert_eq!(r.region.as_deref(), Some("ca-central-1"));

    let mut with_option = base.clone();
    with_option.push(("AWS_ROLE_SESSION_NAME", "from-option"));
    run(&with_option).unwrap().unwrap();
    assert_eq!(sts.session_names(), vec!["from-profile", "from-option"]);
    assert_eq!(form_field(&sts, 1, "RoleArn"), "arn:aws:iam::9:role/w");
}

#[test]
fn web_identity_failures() {
    let sts = StsServer::start("good-jwt", 3600);
    let files = Files::new();
    let good = files.write("good", "good-jwt");
    let bad = files.write("bad", "bad-jwt");
    let url = sts.url();
    let with = |token: &str, endpoint: &str| {
        failure(&[
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token),
            ("AWS_STS_ENDPOINT", endpoint),
        ])
    };
    assert_eq!(
        with(&bad, &url),
        credentials_error("AWS STS returned HTTP 400 (InvalidIdentityToken)")
    );
    let incomplete = credentials_error("AWS web identity response is incomplete");
    for omitted in [
        "AccessKeyId",
        "SecretAccessKey",
        "SessionToken",
        "Expiration",
    ] {
        sts.set_omit(Some(omitted));
        assert_eq!(with(&good, &url), incomplete, "{omitted}");
    }
    sts.set_omit(None);
    sts.set_lifetime(-10);
    assert_eq!(with(&good, &url), incomplete);

    let missing = files.home().join("missing").display().to_string();
    let (status, message) = with(&missing, &url);
    assert_eq!(status, Status::Credentials);
    assert!(
        message.starts_with(&format!(
            "{PATH}: cannot read AWS web identity token file '{missing}': "
        )),
        "{message}"
    );

    assert_eq!(
        with(&good, "ftp://127.0.0.1/"),
        config_error("AWS_STS_ENDPOINT must be an http or https URL with a host")
    );
    assert_eq!(
        with(&good, "http://user:pw@127.0.0.1/"),
        config_error("AWS_STS_ENDPOINT must not contain user information")
    );
    assert_eq!(
        with(&good, "http://[bad/"),
        config_error("AWS_STS_ENDPOINT is not a valid URL")
    );
    let requests = sts.requests();
    // Nothing listens on port 9 of loopback: a transport failure names the endpoint.
    let (status, message) = with(&good, "http://127.0.0.1:9/");
    assert_eq!(status, Status::Credentials);
    assert!(message.starts_with("http://127.0.0.1:9/: "), "{message}");
    assert_eq!(sts.requests(), requests);
}

// ---------------------------------------------------------------------------------------
// Step 6: container credentials

#[test]
fn container_credentials_with_token_or_token_file() {
    let server = ContainerServer::start(Some("Bearer ecs-token"), 600);
    let r = run(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &server.url()),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer ecs-token"),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(keys_of(&r), ("ECS-AKID-1", "ecs-secret-1", "ecs-token-1"));
    let expires = r.credentials.expires_at.unwrap();
    let issued = server.issued()[0].expires_at;
    assert!(expires <= issued && expires + Duration::from_secs(1) > issued);

    let files = Files::new();
    let token_file = files.write("token", "\nBearer ecs-token \n");
    let r = run(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &server.url()),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &token_file),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(keys_of(&r).0, "ECS-AKID-2");
    // The option wins over the file.
    let wrong_file = files.write("wrong", "wrong");
    run(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &server.url()),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "Bearer ecs-token"),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &wrong_file),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(
        server.authorizations(),
        vec![Some("Bearer ecs-token".to_owned()); 3]
    );
}

#[test]
fn container_credentials_failures() {
    let server = ContainerServer::start(Some("right"), 600);
    let url = server.url();
    let with = |token: &str| {
        failure(&[
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &url),
            ("AWS_CONTAINER_AUTHORIZATION_TOKEN", token),
        ])
    };
    assert_eq!(
        with("wrong"),
        credentials_error("AWS container credentials endpoint returned HTTP 401")
    );
    let incomplete = credentials_error("AWS container credentials are incomplete");
    for omitted in ["AccessKeyId", "SecretAccessKey", "Token", "Expiration"] {
        server.set_omit(Some(omitted));
        assert_eq!(with("right"), incomplete, "{omitted}");
    }
    server.set_omit(None);
    server.set_lifetime(-1);
    assert_eq!(with("right"), incomplete);

    let (status, message) = failure(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", &url),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            "/nonexistent/token",
        ),
    ]);
    assert_eq!(status, Status::Credentials);
    assert!(message.starts_with(&format!(
        "{PATH}: cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE '/nonexistent/token': "
    )));
}

#[test]
fn container_host_rule() {
    let url_of = |options: &[(&str, &str)]| {
        with_context(&settings(options), PATH, None, |ctx| {
            container::url(ctx).map(|u| u.map(|u| u.to_string()))
        })
    };
    let full = |u: &str| url_of(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", u)]);
    for allowed in [
        "http://127.0.0.1:8080/creds",
        "http://localhost/creds",
        "http://LOCALHOST/creds",
        "http://[::1]:80/creds",
        "http://169.254.170.2/v2/credentials",
        "https://credentials.example.com/creds",
    ] {
        assert!(full(allowed).unwrap().is_some(), "{allowed}");
    }
    let refused =
        config_error("AWS_CONTAINER_CREDENTIALS_FULL_URI must use HTTPS or a loopback/ECS host");
    for bad in [
        "http://example.com/creds",
        "http://127.0.0.2/creds",
        "http://169.254.170.23/creds",
        "http://user@127.0.0.1/creds",
        "https://user:pw@example.com/creds",
        "ftp://127.0.0.1/creds",
        "file:///creds",
    ] {
        let e = full(bad).unwrap_err();
        assert_eq!((e.status(), e.message().to_owned()), refused, "{bad}");
    }
    let e = full("not a url").unwrap_err();
    assert_eq!(
        (e.status(), e.message().to_owned()),
        config_error("AWS_CONTAINER_CREDENTIALS_FULL_URI is not a valid URL")
    );

    // The relative URI is joined to the ECS agent (never contacted by these tests); the
    // full URI wins when both are set.
    let relative = |u: &str| url_of(&[("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", u)]);
    assert_eq!(
        relative("/v2/credentials/abc").unwrap().as_deref(),
        Some("http://169.254.170.2/v2/credentials/abc")
    );
    assert_eq!(
        relative("v2/x").unwrap().as_deref(),
        Some("http://169.254.170.2/v2/x")
    );
    assert_eq!(
        url_of(&[
            ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/rel"),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "http://127.0.0.1:1/full"
            ),
        ])
        .unwrap()
        .as_deref(),
        Some("http://127.0.0.1:1/full")
    );
    assert_eq!(url_of(&[]).unwrap(), None);
}

// ---------------------------------------------------------------------------------------
// Step 7: IMDSv2

/// Hermetic settings with IMDS opted in at `server`, plus `extra`.
fn imds_settings(endpoint: &str, extra: &[(&str, &str)]) -> Settings {
    let mut options = vec![
        ("AWS_EC2_METADATA_DISABLED", "NO"),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", endpoint),
    ];
    options.extend_from_slice(extra);
    settings(&options)
}

#[test]
fn imds_token_role_and_credentials() {
    let server = ImdsServer::start("instance-role", 21_600);
    let r = with_context(&imds_settings(&server.url(), &[]), PATH, None, load)
        .unwrap()
        .unwrap();
    assert_eq!(
        keys_of(&r),
        ("IMDS-AKID-1", "imds-secret-1", "imds-token-1")
    );
    assert!(r.credentials.expires_at.unwrap() > SystemTime::now() + Duration::from_secs(21_000));
    assert_eq!(server.requests(), 3);
    assert_eq!(server.tokens_issued(), 1);
    assert_eq!(server.ttl_headers(), vec!["21600"]);
    assert_eq!(server.rejected(), 0);

    // A trailing slash on the endpoint changes nothing.
    let with_slash = format!("{}/", server.url());
    let r = with_context(&imds_settings(&with_slash, &[]), PATH, None, load)
        .unwrap()
        .unwrap();
    assert_eq!(keys_of(&r).0, "IMDS-AKID-2");
}

#[test]
fn imds_tokens_expire_and_each_load_gets_a_new_one() {
    let server = ImdsServer::start("role", 3600);
    server.set_token_lifetime_cap(Some(Duration::from_millis(300)));
    let settings = imds_settings(&server.url(), &[]);
    assert!(with_context(&settings, PATH, None, load).unwrap().is_some());

    // The session token of that load has expired; a GET with it is refused.
    std::thread::sleep(Duration::from_millis(400));
    let answer = http()
        .send(
            Call::new(
                http::Method::GET,
                format!(
                    "{}/latest/meta-data/iam/security-credentials/",
                    server.url()
                ),
            )
            .header("X-aws-ec2-metadata-token", "imds-session-1"),
            Duration::from_secs(2),
            None,
        )
        .unwrap();
    assert_eq!(answer.status, 401);
    assert_eq!(server.rejected(), 1);
    // Without a token at all, too.
    let answer = http()
        .send(
            Call::new(
                http::Method::GET,
                format!(
                    "{}/latest/meta-data/iam/security-credentials/role",
                    server.url()
                ),
            ),
            Duration::from_secs(2),
            None,
        )
        .unwrap();
    assert_eq!(answer.status, 401);

    let r = with_context(&settings, PATH, None, load).unwrap().unwrap();
    assert_eq!(keys_of(&r).0, "IMDS-AKID-2");
    assert_eq!(server.tokens_issued(), 2);
}

#[test]
fn imds_is_gated() {
    let server = ImdsServer::start("role", 3600);
    let url = server.url();
    // Hermetic without the opt-in, or disabled: never asked.
    for options in [
        vec![("AWS_EC2_METADATA_SERVICE_ENDPOINT", url.as_str())],
        vec![
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", url.as_str()),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ],
    ] {
        assert_eq!(run(&options).unwrap(), None);
    }
    let settings = Config::from_vars([
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT".to_owned(), url.clone()),
        ("AWS_EC2_METADATA_DISABLED".to_owned(), "1".to_owned()),
    ])
    .freeze()
    .unwrap();
    assert_eq!(with_context(&settings, PATH, None, load).unwrap(), None);
    assert_eq!(server.requests(), 0);

    // Discovery turns it on.
    let settings =
        Config::from_vars([("AWS_EC2_METADATA_SERVICE_ENDPOINT".to_owned(), url.clone())])
            .freeze()
            .unwrap();
    let r = with_context(&settings, PATH, None, load).unwrap().unwrap();
    assert_eq!(keys_of(&r).0, "IMDS-AKID-1");
}

#[test]
fn imds_failures_are_silent() {
    let server = ImdsServer::start("role", 3600);
    let settings = imds_settings(&server.url(), &[]);
    let empty = || with_context(&settings, PATH, None, load).unwrap();
    for omitted in ["AccessKeyId", "SecretAccessKey", "Token", "Expiration"] {
        server.set_omit(Some(omitted));
        assert_eq!(empty(), None, "{omitted}");
    }
    server.set_omit(Some("Code"));
    assert!(empty().is_some(), "Code is optional");
    server.set_omit(None);
    server.set_lifetime(-60);
    assert_eq!(empty(), None);

    // Nothing listening, or a server that is not IMDS.
    let closed = imds_settings("http://127.0.0.1:9", &[]);
    assert_eq!(with_context(&closed, PATH, None, load).unwrap(), None);
    let other = ContainerServer::start(None, 600);
    let wrong = imds_settings(&other.url(), &[]);
    assert_eq!(with_context(&wrong, PATH, None, load).unwrap(), None);

    // A malformed endpoint option is a configuration error, not silence.
    let e = with_context(&imds_settings("imds.local", &[]), PATH, None, load).unwrap_err();
    assert_eq!(
        (e.status(), e.message().to_owned()),
        config_error("AWS_EC2_METADATA_SERVICE_ENDPOINT is not a valid URL")
    );
}

#[test]
fn imds_steps_are_bounded_by_the_metadata_timeout() {
    // A listener that accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let settings = imds_settings(&url, &[("AWS_METADATA_SERVICE_TIMEOUT", "1")]);
    let started = Instant::now();
    assert_eq!(with_context(&settings, PATH, None, load).unwrap(), None);
    let took = started.elapsed();
    assert!(took >= Duration::from_secs(1), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
}

// ---------------------------------------------------------------------------------------
// The order of the chain

#[test]
fn chain_order() {
    let sts = StsServer::start("jwt", 3600);
    let container = ContainerServer::start(None, 3600);
    let imds = ImdsServer::start("role", 3600);
    let files = Files::new();
    let token = files.write("token", "jwt");
    let config = files.write(
        "config",
        "[default]\nregion = eu-south-1\naws_access_key_id = PROFILE\n\
         aws_secret_access_key = PROFILES\n[profile empty]\nregion = me-south-1\n",
    );
    let urls = [container.url(), imds.url(), sts.url()];
    let everything = |extra: &[(&str, &str)]| {
        let mut options = vec![
            ("AWS_CONFIG_FILE", config.as_str()),
            ("AWS_CONTAINER_CREDENTIALS_FULL_URI", urls[0].as_str()),
            ("AWS_EC2_METADATA_DISABLED", "no"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", urls[1].as_str()),
            ("AWS_STS_ENDPOINT", urls[2].as_str()),
        ];
        options.extend_from_slice(extra);
        run(&options).unwrap().unwrap()
    };
    let web_identity = [
        ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token.as_str()),
    ];
    // Web identity beats the profile's static keys and keeps its region.
    let r = everything(&web_identity);
    assert_eq!(
        (keys_of(&r).0, r.region.as_deref()),
        ("STS-AKID-1", Some("eu-south-1"))
    );
    // The profile's keys beat container credentials.
    let r = everything(&[]);
    assert_eq!(keys_of(&r).0, "PROFILE");
    // Container credentials beat IMDS; the profile's region rides along.
    let r = everything(&[("AWS_PROFILE", "empty")]);
    assert_eq!(
        (keys_of(&r).0, r.region.as_deref()),
        ("ECS-AKID-1", Some("me-south-1"))
    );
    assert_eq!(imds.requests(), 0);
    // Explicit keys beat everything.
    let r = everything(&[
        web_identity[0],
        web_identity[1],
        ("AWS_ACCESS_KEY_ID", "EXPLICIT"),
        ("AWS_SECRET_ACCESS_KEY", "EXPLICITS"),
    ]);
    assert_eq!((keys_of(&r).0, r.region.as_deref()), ("EXPLICIT", None));
    assert_eq!((sts.requests(), container.requests()), (1, 1));
}

#[test]
fn imds_is_last() {
    let imds = ImdsServer::start("role", 3600);
    let files = Files::new();
    let config = files.write("config", "[profile p]\nregion = af-south-1\n");
    let r = with_context(
        &imds_settings(
            &imds.url(),
            &[("AWS_CONFIG_FILE", config.as_str()), ("AWS_PROFILE", "p")],
        ),
        PATH,
        None,
        load,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        (keys_of(&r).0, r.region.as_deref()),
        ("IMDS-AKID-1", Some("af-south-1"))
    );
}

// ---------------------------------------------------------------------------------------
// Through the credential cache

#[test]
fn container_credentials_through_the_cache_single_flight_and_refresh_before_expiry() {
    use crate::credentials::{Auth, CredentialCache};
    use crate::locator::Locator;

    let server = ContainerServer::start(None, 5);
    // Slow answers make concurrent cold lookups overlap.
    server.set_delay(Duration::from_millis(300));
    let url = server.url();
    let settings = settings(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", url.as_str())]);
    let cache = CredentialCache::new(http());
    let locator = Locator::parse("s3://bucket/key").unwrap();
    let resolve = || match cache.resolve(&settings, &locator, None).unwrap() {
        Auth::Signed(r) => r,
        other => panic!("not signed: {other:?}"),
    };

    let first: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|_| s.spawn(resolve)).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(server.requests(), 1, "one call for eight cold lookups");
    assert!(first.iter().all(|r| keys_of(r).0 == "ECS-AKID-1"));
    assert_eq!(keys_of(&resolve()).0, "ECS-AKID-1");
    assert_eq!(server.requests(), 1);

    // A lifetime of about 5 s: the cache renews in the last second, before the keys expire.
    let expires = first[0].credentials.expires_at.unwrap();
    let renew_at = expires - Duration::from_millis(800);
    std::thread::sleep(
        renew_at
            .duration_since(SystemTime::now())
            .unwrap_or_default(),
    );
    let renewed = resolve();
    assert!(
        SystemTime::now() < expires,
        "renewed before the old keys expired"
    );
    assert_eq!(keys_of(&renewed).0, "ECS-AKID-2");
    assert_eq!(server.requests(), 2);
}
