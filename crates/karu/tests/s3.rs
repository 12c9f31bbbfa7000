//! S3 and Source Cooperative reads through real emulators (started by `scripts/s3.sh`, which
//! `scripts/test.sh` runs): moto with signature checks, moto in its open mode for anonymous
//! reads, and s3s-fs (strict SigV4); both addressing styles; `read`, `stat`, `read_ends` and
//! merged batches with every byte checked; the errors a wrong secret, a missing object and an
//! If-Match mismatch give. The test kit's `S3Responder` shows what emulators cannot: region
//! correction and expired session tokens. Bad inputs fail only the reads they affect.
//!
//! Without `KARU_TEST_MOTO_URL` the emulator tests print a skip line and pass, except under
//! `CI`, where they fail: a missing server must not look like a green run.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{client, client_plus, fails_alone, read_all, read_each};
use karu::{
    BatchStats, Client, Config, Credentials, CredentialsKind, CredentialsProvider, Locator, Read,
    Status,
};
use karu_testkit::{ContainerServer, RegionHint, S3Responder, content};

/// One emulator: its path-style endpoint and its access key.
struct Server {
    url: String,
    key: String,
    secret: String,
}

impl Server {
    /// `http://localhost:PORT`: names under `.localhost` resolve to loopback in karu, so
    /// virtual-hosted `BUCKET.localhost:PORT` reaches the emulator.
    fn virtual_host_url(&self) -> String {
        self.url.replace("://127.0.0.1:", "://localhost:")
    }
}

/// What `scripts/s3.sh` started.
struct Emulators {
    moto: Server,
    /// moto without signature checks, for anonymous reads.
    moto_open: String,
    s3s: Server,
    bucket: String,
    dotted: String,
    /// Object keys and sizes (the same in every bucket and server).
    objects: Vec<(String, u64)>,
}

impl Emulators {
    fn size(&self, key: &str) -> u64 {
        self.objects
            .iter()
            .find(|(k, _)| k == key)
            .unwrap_or_else(|| panic!("{key} is not among KARU_TEST_S3_OBJECTS"))
            .1
    }
}

/// The running emulators, or `None` after a skip line (a panic under CI).
fn emulators() -> Option<Emulators> {
    let env = common::started("KARU_TEST_MOTO_URL", "s3")?;
    let objects = env
        .require("KARU_TEST_S3_OBJECTS")
        .split_whitespace()
        .map(|spec| {
            let (key, size) = spec.rsplit_once(':').expect("key:size");
            (key.replace("%20", " "), size.parse().expect("size"))
        })
        .collect();
    Some(Emulators {
        moto: Server {
            key: env.require("KARU_TEST_MOTO_ACCESS_KEY_ID"),
            secret: env.require("KARU_TEST_MOTO_SECRET_ACCESS_KEY"),
            url: env.url.clone(),
        },
        moto_open: env.require("KARU_TEST_MOTO_OPEN_URL"),
        s3s: Server {
            url: env.require("KARU_TEST_S3S_URL"),
            key: env.require("KARU_TEST_S3S_ACCESS_KEY_ID"),
            secret: env.require("KARU_TEST_S3S_SECRET_ACCESS_KEY"),
        },
        bucket: env.require("KARU_TEST_S3_BUCKET"),
        dotted: env.require("KARU_TEST_S3_DOTTED_BUCKET"),
        objects,
    })
}

/// A signed client for `server`, path-style or virtual-hosted.
fn signed_client(server: &Server, virtual_hosting: bool, extra: &[(&str, &str)]) -> Client {
    let endpoint = if virtual_hosting {
        server.virtual_host_url()
    } else {
        server.url.clone()
    };
    client_plus(
        &[
            ("AWS_S3_ENDPOINT", &endpoint),
            ("AWS_ACCESS_KEY_ID", &server.key),
            ("AWS_SECRET_ACCESS_KEY", &server.secret),
            (
                "AWS_VIRTUAL_HOSTING",
                if virtual_hosting { "YES" } else { "NO" },
            ),
        ],
        extra,
    )
}

fn s3(bucket: &str, key: &str) -> Locator {
    Locator::parse(&format!("s3://{bucket}/{key}")).unwrap()
}

/// `read`, `stat`, `read_ends` and a merged batch of every object of `bucket`, every byte
/// checked.
fn exercise(e: &Emulators, client: &Client, bucket: &str) {
    for (key, size) in &e.objects {
        let object = s3(bucket, key);
        let what = format!("s3://{bucket}/{key}");
        let whole = client
            .read(&object, 0, *size)
            .unwrap_or_else(|err| panic!("{what}: {err}"));
        assert_eq!(whole.len() as u64, *size, "{what}");
        content::check(key, 0, &whole).unwrap();

        let info = client.stat(&object).unwrap();
        assert_eq!(info.size, *size, "{what}");
        let etag = info.etag.expect("S3 answers with a strong ETag");
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

        let ends = client.read_ends(&object, 100, 64).unwrap();
        assert_eq!(ends.info.size, *size);
        content::check(key, 0, &ends.head).unwrap();
        content::check(key, size - 64, &ends.tail).unwrap();
        assert_eq!((ends.head.len(), ends.tail.len()), (100, 64));

        // Nearby reads merge; duplicates and overlaps each get their own bytes.
        let spans: Vec<(u64, u64)> = (0..40)
            .map(|i| ((i * 97) % (size - 50), 1 + (i * 13) % 50))
            .chain([(0, 10), (0, 10), (5, 10), (size - 1, 1)])
            .collect();
        let stats = read_all(client, &object, key, &spans);
        assert!(
            stats.transfers < spans.len() as u64,
            "{what}: nearby reads should merge: {stats}"
        );
        assert_eq!(stats.retries, 0, "{what}: {stats}");
    }
}

#[test]
fn moto_serves_both_addressing_styles() {
    let Some(e) = emulators() else { return };
    exercise(&e, &signed_client(&e.moto, false, &[]), &e.bucket);
    exercise(&e, &signed_client(&e.moto, true, &[]), &e.bucket);
    // A dotted bucket on a custom endpoint is path-style by default. (moto takes the first
    // label of a virtual host as the bucket, so it cannot serve dotted virtual hosts.)
    let default_style = client(&[
        ("AWS_S3_ENDPOINT", &e.moto.url),
        ("AWS_ACCESS_KEY_ID", &e.moto.key),
        ("AWS_SECRET_ACCESS_KEY", &e.moto.secret),
    ]);
    exercise(&e, &default_style, &e.dotted);
}

#[test]
fn s3s_fs_serves_both_addressing_styles_with_dotted_buckets() {
    let Some(e) = emulators() else { return };
    for virtual_hosting in [false, true] {
        let client = signed_client(&e.s3s, virtual_hosting, &[]);
        exercise(&e, &client, &e.bucket);
        exercise(&e, &client, &e.dotted);
    }
}

#[test]
fn large_batches_merge_into_few_transfers() {
    let Some(e) = emulators() else { return };
    let key = "medium.bin";
    let size = e.size(key);
    for server in [&e.moto, &e.s3s] {
        let client = signed_client(server, false, &[("KARU_COALESCE_GAP", "65536")]);
        let object = s3(&e.bucket, key);
        let spans: Vec<(u64, u64)> = (0..300u64)
            .map(|i| ((i * 3_491) % (size - 4096), 1 + (i * 7) % 4096))
            .collect();
        let stats = read_all(&client, &object, key, &spans);
        assert!(stats.transfers * 10 <= spans.len() as u64, "{stats}");
        assert_eq!(stats.retries, 0, "{stats}");
    }
}

#[test]
fn a_wrong_secret_is_auth_and_a_missing_object_is_not_found() {
    let Some(e) = emulators() else { return };
    for server in [&e.moto, &e.s3s] {
        let wrong = Server {
            url: server.url.clone(),
            key: server.key.clone(),
            secret: format!("{}-wrong", server.secret),
        };
        let client = signed_client(&wrong, false, &[]);
        let err = client.read(&s3(&e.bucket, "small.bin"), 0, 10).unwrap_err();
        assert_eq!(err.status(), Status::Auth, "{}: {err}", server.url);
        assert!(!err.message().contains(&wrong.secret), "{err}");

        let client = signed_client(server, false, &[]);
        let err = client
            .read(&s3(&e.bucket, "no/such.bin"), 0, 10)
            .unwrap_err();
        assert_eq!(err.status(), Status::NotFound, "{}: {err}", server.url);
        assert!(
            err.message()
                .starts_with(&format!("/vsis3/{}/no/such.bin", e.bucket))
        );
    }
}

#[test]
fn an_if_match_mismatch_is_a_precondition_failure_on_moto() {
    let Some(e) = emulators() else { return };
    let client = signed_client(&e.moto, false, &[]);
    let object = s3(&e.bucket, "small.bin");
    let etag = client.stat(&object).unwrap().etag.unwrap();
    let batch = client
        .submit(vec![
            Read::new(&object, 0, 100).if_match(&etag).tag(1),
            Read::new(&object, 0, 100).if_match("\"0000\"").tag(2),
        ])
        .unwrap();
    for done in &batch {
        match done.tag {
            1 => content::check("small.bin", 0, done.bytes()).unwrap(),
            _ => assert_eq!(done.status(), Status::Precondition, "{:?}", done.result),
        }
    }
}

#[test]
fn anonymous_reads_follow_the_same_urls() {
    let Some(e) = emulators() else { return };
    let anonymous = client(&[
        ("AWS_S3_ENDPOINT", &e.moto_open),
        ("AWS_NO_SIGN_REQUEST", "YES"),
    ]);
    exercise(&e, &anonymous, &e.bucket);
    // The signing moto refuses anonymous requests.
    let anonymous = client(&[
        ("AWS_S3_ENDPOINT", &e.moto.url),
        ("AWS_NO_SIGN_REQUEST", "YES"),
    ]);
    let err = anonymous
        .read(&s3(&e.bucket, "small.bin"), 0, 10)
        .unwrap_err();
    assert_eq!(err.status(), Status::Auth, "{err}");
}

#[test]
fn source_cooperative_reads_anonymous_and_signed() {
    let Some(e) = emulators() else { return };
    let key = "dir/nested.bin";
    let size = e.size(key);
    // `source://account/product/key` is `<endpoint>/account/product/key`: the bucket stands
    // in for the account.
    let object = Locator::parse(&format!("source://{}/{key}", e.bucket)).unwrap();
    let anonymous = client(&[("SOURCE_ENDPOINT", &e.moto_open)]);
    read_all(
        &anonymous,
        &object,
        key,
        &[(0, size), (size - 100, 100), (17, 1)],
    );
    let ends = anonymous.read_ends(&object, 10, 10).unwrap();
    content::check(key, size - 10, &ends.tail).unwrap();

    let signed = client(&[
        ("SOURCE_PROXY_URL", &e.moto.url),
        ("SOURCE_ACCESS_KEY_ID", &e.moto.key),
        ("SOURCE_SECRET_ACCESS_KEY", &e.moto.secret),
    ]);
    read_all(&signed, &object, key, &[(0, size), (1000, 3000)]);
    assert_eq!(signed.stat(&object).unwrap().size, size);
    // Unsigned against the signing moto: refused.
    let unsigned = client(&[("SOURCE_ENDPOINT", &e.moto.url)]);
    assert_eq!(
        unsigned.read(&object, 0, 1).unwrap_err().status(),
        Status::Auth
    );
    // AWS credentials are never used for Source.
    let aws_only = client(&[
        ("SOURCE_ENDPOINT", &e.moto.url),
        ("SOURCE_NO_SIGN_REQUEST", "NO"),
        ("AWS_ACCESS_KEY_ID", &e.moto.key),
        ("AWS_SECRET_ACCESS_KEY", &e.moto.secret),
    ]);
    let err = aws_only.read(&object, 0, 1).unwrap_err();
    assert_eq!(err.status(), Status::Credentials, "{err}");
}

/// Reads two far-apart ranges of one object, one transfer after the other.
fn two_transfers(client: &Client, object: &Locator, key: &str) -> BatchStats {
    let stats = read_all(client, object, key, &[(0, 100), (50_000, 100)]);
    assert_eq!(stats.transfers, 2, "{stats}");
    stats
}

#[test]
fn a_wrong_region_is_corrected_once_and_remembered_for_the_batch() {
    for hint in [RegionHint::Redirect301, RegionHint::Malformed400] {
        let server = S3Responder::start();
        server.put("bkt", "obj.bin", 100_000);
        server.set_home_region("eu-west-1", hint);
        let client = client(&[
            ("AWS_S3_ENDPOINT", &server.endpoint()),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
            ("KARU_COALESCE_GAP", "0"),
            ("KARU_CONCURRENCY", "1"),
        ]);
        let stats = two_transfers(&client, &s3("bkt", "obj.bin"), "obj.bin");
        assert_eq!(
            stats.retries, 0,
            "{hint:?}: a correction is not a retry: {stats}"
        );
        let seen: Vec<(Option<String>, u16)> = server
            .requests()
            .into_iter()
            .map(|r| (r.region, r.status))
            .collect();
        let status = if hint == RegionHint::Redirect301 {
            301
        } else {
            400
        };
        let eu = || Some("eu-west-1".to_owned());
        // One rejected attempt, its re-signed twin, and the second transfer signed for the
        // learnt region at once.
        assert_eq!(
            seen,
            [
                (Some("us-east-1".to_owned()), status),
                (eu(), 206),
                (eu(), 206)
            ],
            "{hint:?}"
        );
    }
}

#[test]
fn a_403_naming_the_region_used_is_auth_and_a_correction_happens_once() {
    let server = S3Responder::start();
    server.put("bkt", "obj.bin", 1000);
    server.set_home_region("eu-west-1", RegionHint::Redirect301);
    server.forbid("bkt");
    let object = s3("bkt", "obj.bin");
    for (configured, requests) in [("eu-west-1", 1), ("us-east-1", 2)] {
        let client = client(&[
            ("AWS_S3_ENDPOINT", &server.endpoint()),
            ("AWS_REGION", configured),
            ("AWS_ACCESS_KEY_ID", "AKID"),
            ("AWS_SECRET_ACCESS_KEY", "SECRET"),
        ]);
        let before = server.requests().len();
        let batch = client.submit(vec![Read::new(&object, 0, 10)]).unwrap();
        let done = batch.next().unwrap();
        assert_eq!(
            done.status(),
            Status::Auth,
            "{configured}: {:?}",
            done.result
        );
        assert_eq!(batch.stats().retries, 0);
        // Signed for the named region: no correction. Signed for another: one correction,
        // then the same answer names the region now used, which is final.
        let regions: Vec<Option<String>> = server.requests()[before..]
            .iter()
            .map(|r| r.region.clone())
            .collect();
        assert_eq!(regions.len(), requests, "{configured}: {regions:?}");
        assert_eq!(regions.last().unwrap().as_deref(), Some("eu-west-1"));
    }
}

/// Hands out `token-1`, `token-2`, … one per call, and counts the calls.
struct Rotating(AtomicU64);

impl CredentialsProvider for Rotating {
    fn credentials(&self, _kind: CredentialsKind, _path: &str) -> karu::Result<Credentials> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(Credentials {
            access_key_id: "AKID".into(),
            secret_access_key: "SECRET".into(),
            session_token: format!("token-{n}"),
            ..Credentials::default()
        })
    }
}

fn rotating_client(server: &S3Responder, kind: CredentialsKind) -> (Client, Arc<Rotating>) {
    let provider = Arc::new(Rotating(AtomicU64::new(0)));
    let mut config = Config::empty();
    config
        .set("AWS_S3_ENDPOINT", Some(&server.endpoint()))
        .unwrap()
        .set("SOURCE_ENDPOINT", Some(&server.endpoint()))
        .unwrap()
        .set_credentials_provider(kind, Some(provider.clone()));
    (Client::new(&config).unwrap(), provider)
}

#[test]
fn an_expired_token_is_refreshed_once_without_a_retry() {
    for (kind, uri) in [
        (CredentialsKind::Aws, "s3://bkt/obj.bin"),
        (CredentialsKind::Source, "source://bkt/obj.bin"),
    ] {
        let server = S3Responder::start();
        server.put("bkt", "obj.bin", 5000);
        server.expire_token("token-1");
        let (client, provider) = rotating_client(&server, kind);
        let object = Locator::parse(uri).unwrap();
        let stats = read_all(&client, &object, "obj.bin", &[(100, 4000)]);
        assert_eq!(stats.credential_refreshes, 1, "{uri}: {stats}");
        assert_eq!(stats.retries, 0, "{uri}: {stats}");
        let tokens: Vec<Option<String>> = server
            .requests()
            .into_iter()
            .map(|r| r.session_token)
            .collect();
        assert_eq!(
            tokens,
            [Some("token-1".to_owned()), Some("token-2".to_owned())],
            "{uri}"
        );
        assert_eq!(provider.0.load(Ordering::SeqCst), 2, "{uri}");
    }
}

#[test]
fn a_second_rejection_after_a_refresh_is_final() {
    let server = S3Responder::start();
    server.put("bkt", "obj.bin", 5000);
    server.expire_token("token-1");
    server.expire_token("token-2");
    let (client, _provider) = rotating_client(&server, CredentialsKind::Aws);
    let object = s3("bkt", "obj.bin");
    let batch = client.submit(vec![Read::new(&object, 0, 10)]).unwrap();
    let done = batch.next().unwrap();
    assert_eq!(done.status(), Status::Auth, "{:?}", done.result);
    let stats = batch.stats();
    assert_eq!(
        (stats.credential_refreshes, stats.retries),
        (1, 0),
        "{stats}"
    );
    assert_eq!(server.requests().len(), 2);
}

/// Bad inputs fail only the reads they affect: the rest of the batch completes.
#[test]
fn malformed_endpoints_fail_only_their_reads() {
    let server = S3Responder::start();
    server.put("good", "obj.bin", 1000);
    let good = s3("good", "obj.bin");
    for (bad_endpoint, message) in [
        (
            "http://127.0.0.1:9/?x=1",
            "AWS_S3_ENDPOINT cannot contain a query",
        ),
        (
            "ftp://127.0.0.1:9",
            "AWS_S3_ENDPOINT must be an http or https URL",
        ),
        (
            "http://user:pw@127.0.0.1:9",
            "cannot contain user information",
        ),
        (
            "http://127.0.0.1:port",
            "AWS_S3_ENDPOINT has an invalid port",
        ),
        ("http://", "AWS_S3_ENDPOINT has no host"),
    ] {
        let mut config = Config::empty();
        config
            .set("AWS_S3_ENDPOINT", Some(&server.endpoint()))
            .unwrap()
            .set("AWS_NO_SIGN_REQUEST", Some("YES"))
            .unwrap()
            .set_path("s3://bad", "AWS_S3_ENDPOINT", Some(bad_endpoint))
            .unwrap();
        let client = Client::new(&config).unwrap();
        let err = fails_alone(&client, &s3("bad", "obj.bin"), &good, "obj.bin");
        assert_eq!(err.status(), Status::Config, "{bad_endpoint}: {err}");
        assert!(err.message().contains(message), "{bad_endpoint}: {err}");
        assert!(!err.message().contains("pw@"), "{err}");
    }
}

#[test]
fn partial_keys_and_unknown_profiles_are_credentials_errors() {
    let server = S3Responder::start();
    server.put("good", "obj.bin", 1000);
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("config");
    std::fs::write(&config_file, "[profile present]\naws_access_key_id = A\n").unwrap();
    let config_file = config_file.to_str().unwrap();
    for (rule, options, message) in [
        (
            "s3://half",
            &[("AWS_ACCESS_KEY_ID", "AKID")][..],
            "AWS access key and secret must be set together",
        ),
        (
            "s3://half",
            &[("AWS_SECRET_ACCESS_KEY", "SECRET")][..],
            "AWS access key and secret must be set together",
        ),
        (
            "s3://half",
            &[("AWS_CONFIG_FILE", config_file), ("AWS_PROFILE", "absent")][..],
            "AWS profile 'absent' was not found",
        ),
    ] {
        let mut config = Config::empty();
        config
            .set("AWS_S3_ENDPOINT", Some(&server.endpoint()))
            .unwrap()
            .set("AWS_ACCESS_KEY_ID", Some("AKID"))
            .unwrap()
            .set("AWS_SECRET_ACCESS_KEY", Some("SECRET"))
            .unwrap();
        // Path rules override the good global pair for s3://half only.
        config
            .set_path(rule, "AWS_ACCESS_KEY_ID", Some(""))
            .unwrap();
        config
            .set_path(rule, "AWS_SECRET_ACCESS_KEY", Some(""))
            .unwrap();
        for (name, value) in options {
            config.set_path(rule, name, Some(value)).unwrap();
        }
        let client = Client::new(&config).unwrap();
        let good = s3("good", "obj.bin");
        let err = fails_alone(&client, &s3("half", "obj.bin"), &good, "obj.bin");
        assert_eq!(err.status(), Status::Credentials, "{options:?}: {err}");
        assert!(err.message().contains(message), "{options:?}: {err}");
        assert!(!err.message().contains("SECRET"), "{err}");
    }
}

#[test]
fn bad_booleans_and_payer_values_fail_at_client_creation() {
    for (name, value, message) in [
        (
            "AWS_VIRTUAL_HOSTING",
            "maybe",
            "AWS_VIRTUAL_HOSTING must be YES/NO, TRUE/FALSE, ON/OFF, or 1/0",
        ),
        (
            "AWS_NO_SIGN_REQUEST",
            "2",
            "AWS_NO_SIGN_REQUEST must be YES/NO, TRUE/FALSE, ON/OFF, or 1/0",
        ),
        (
            "AWS_REQUEST_PAYER",
            "owner",
            "AWS_REQUEST_PAYER must be 'requester'",
        ),
    ] {
        let mut config = Config::empty();
        config.set(name, Some(value)).unwrap();
        let err = Client::new(&config).unwrap_err();
        assert_eq!(err.status(), Status::Config, "{name}");
        assert!(err.message().contains(message), "{err}");
        // Inside a path rule the message names the rule.
        let mut config = Config::empty();
        config.set_path("s3://lab", name, Some(value)).unwrap();
        let err = Client::new(&config).unwrap_err();
        assert_eq!(err.status(), Status::Config, "{name}");
        assert!(err.message().starts_with("/vsis3/lab: "), "{err}");
    }
}

#[test]
fn signing_without_credentials_names_the_fixes() {
    let server = S3Responder::start();
    server.put("bkt", "obj.bin", 10);
    let client = client(&[("AWS_S3_ENDPOINT", &server.endpoint())]);
    let err = client.read(&s3("bkt", "obj.bin"), 0, 1).unwrap_err();
    assert_eq!(err.status(), Status::Credentials);
    assert_eq!(
        err.message(),
        "/vsis3/bkt/obj.bin: no AWS credentials; set AWS_ACCESS_KEY_ID and \
         AWS_SECRET_ACCESS_KEY, install a custom provider, or set AWS_NO_SIGN_REQUEST=YES for a \
         public object"
    );
    assert!(
        server.requests().is_empty(),
        "nothing is sent without credentials"
    );
}

/// Native container credentials through the cache: concurrent transfers share one credential
/// call, an `ExpiredToken` rejection of many transfers at once makes one reload (counted in
/// `credential_refreshes`, not as a retry), and values are reloaded in the last part of their
/// lifetime.
#[test]
fn container_credentials_are_shared_refreshed_once_and_reloaded_before_expiry() {
    let server = S3Responder::start();
    for i in 0..16 {
        server.put("bkt", &format!("obj-{i}.bin"), 5000);
    }
    let ecs = ContainerServer::start(None, 3600);
    ecs.set_delay(std::time::Duration::from_millis(300));
    let mut config = Config::empty();
    config
        .set("AWS_S3_ENDPOINT", Some(&server.endpoint()))
        .unwrap()
        .set("AWS_CONTAINER_CREDENTIALS_FULL_URI", Some(&ecs.url()))
        .unwrap();
    let client = Client::new(&config).unwrap();
    let read = |count: usize| {
        let objects: Vec<(Locator, String)> = (0..count)
            .map(|i| {
                let name = format!("obj-{i}.bin");
                (s3("bkt", &name), name)
            })
            .collect();
        read_each(&client, &objects, 100, 50)
    };
    let last_token = || server.requests().last().unwrap().session_token.clone();
    // Sixteen transfers, four credential workers, one cold scope: one call.
    read(16);
    assert_eq!(ecs.requests(), 1);
    let first = ecs.issued()[0].session_token.clone();
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.session_token.as_deref() == Some(&first))
    );
    // The server rejects the token for all sixteen: one reload serves them all.
    server.expire_token(&first);
    let stats = read(16);
    assert_eq!(ecs.requests(), 2, "one reload after the rejection");
    assert_eq!(stats.retries, 0, "{stats}");
    assert!(stats.credential_refreshes >= 1, "{stats}");
    assert_eq!(last_token(), Some(ecs.issued()[1].session_token.clone()));
    // Three-second keys (expiries have whole seconds, so 2–3 s away) are reused until their
    // last second, then reloaded.
    ecs.set_lifetime(3);
    server.expire_token(&ecs.issued()[1].session_token);
    read(1);
    assert_eq!(ecs.requests(), 3);
    read(1);
    assert_eq!(ecs.requests(), 3, "reused inside the lifetime");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    read(1);
    assert_eq!(ecs.requests(), 4, "reloaded in the last second");
    assert_eq!(last_token(), Some(ecs.issued()[3].session_token.clone()));
}
