//! Reads through a real fake-gcs-server (started by `scripts/gcs.sh`, which `scripts/test.sh`
//! runs): ranges, batches, stat, read_ends and windows on `gs://` and `/vsigs/` paths, missing
//! objects, reads past the end, and a gzip-stored object, which `gs://` reads as stored while
//! a plain HTTP read (no `Accept-Encoding`) is transcoded and refused. Every byte is checked
//! against the deterministic content.
//!
//! The emulator checks no credentials, so signed requests and the credential chain are tested
//! end to end against the test kit instead: a token-checking store (`BearerStore`) and
//! `RangeServer` as `GCS_ENDPOINT`, Google's token endpoint and the metadata server — bearer
//! and GOOG1 headers, expiry and refresh, single flight, and one refresh after a 401.
//!
//! Without `KARU_TEST_GCS_URL` the emulator tests print a skip line and pass, except under
//! `CI`, where they fail. Tests of bad input and of credentials need no emulator.

mod common;

use std::io::Read as _;
use std::time::{Duration, SystemTime};

use aws_lc_rs::hmac;
use base64::Engine as _;
use common::{
    LARGE, MEDIUM, ONE, Rng, SMALL, client, client_plus, collect, fails_alone, random_spans,
    read_all, read_checked, read_each,
};
use karu::{Client, Locator, Read, Status};
use karu_testkit::{
    BearerStore, ExpiresIn, GoogleTokenServer, MetadataServer, RangeServer, content,
};

/// Objects `scripts/gcs.sh` seeds besides the common ones (name, size).
const SPACED: (&str, u64) = ("dir/a b.bin", 4096);
/// Stored with `Content-Encoding: gzip`; its plain bytes are the content of this name.
const GZIP: (&str, usize) = ("gzip/stored.bin", 100_000);

/// The running emulator.
struct Gcs {
    url: String,
    bucket: String,
}

impl Gcs {
    fn object(&self, name: &str) -> Locator {
        Locator::parse(&format!("gs://{}/{name}", self.bucket)).unwrap()
    }

    /// A client reading anonymously from the emulator, plus `options`.
    fn client(&self, options: &[(&str, &str)]) -> Client {
        client_plus(
            &[("GCS_ENDPOINT", &self.url), ("GCS_NO_SIGN_REQUEST", "YES")],
            options,
        )
    }
}

/// The running emulator, or `None` after a skip line (a panic under CI).
fn gcs() -> Option<Gcs> {
    let env = common::started("KARU_TEST_GCS_URL", "gcs")?;
    Some(Gcs {
        bucket: env.require("KARU_TEST_GCS_BUCKET"),
        url: env.url,
    })
}

#[test]
fn random_ranges_return_exact_bytes() {
    let Some(g) = gcs() else { return };
    let c = g.client(&[]);
    let mut rng = Rng(0x0067_6373);
    for (name, size) in [LARGE, MEDIUM, SMALL, SPACED] {
        let spans = random_spans(&mut rng, size, 200, 70_000);
        read_all(&c, &g.object(name), name, &spans);
    }
    for (name, size) in [SMALL, SPACED, ONE] {
        let spans = [(0, size), (size - 1, 1)];
        read_all(&c, &g.object(name), name, &spans);
    }
    // The VSI spelling names the same object; the blocking single read.
    let vsi = Locator::parse(&format!("/vsigs/{}/{}", g.bucket, LARGE.0)).unwrap();
    let got = c.read(&vsi, 12_345_678, 100_000).unwrap();
    content::check(LARGE.0, 12_345_678, &got).unwrap();
}

#[test]
fn merged_batches_return_exact_bytes() {
    let Some(g) = gcs() else { return };
    let c = g.client(&[("KARU_COALESCE_GAP", "65536")]);
    let (name, size) = LARGE;
    let mut rng = Rng(7);
    let mut spans = Vec::new();
    for cluster in 0..10u64 {
        let base = cluster * (size / 10);
        for _ in 0..20 {
            spans.push((base + rng.below(200_000), 1 + rng.below(4096)));
        }
        spans.push((base, 10));
        spans.push((base, 10));
    }
    let stats = read_all(&c, &g.object(name), name, &spans);
    assert!(
        stats.transfers <= 20,
        "{} reads in 10 clusters should merge into few transfers: {stats}",
        spans.len()
    );
    assert_eq!(stats.retries, 0, "{stats}");
}

#[test]
fn stat_size_and_read_ends() {
    let Some(g) = gcs() else { return };
    let c = g.client(&[]);
    let (name, size) = MEDIUM;
    let object = g.object(name);
    let info = c.stat(&object).unwrap();
    assert_eq!(info.size, size);
    let etag = info.etag.expect("fake-gcs-server sends a strong ETag");
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
    assert_eq!(c.size(&object).unwrap(), size);

    let ends = c.read_ends(&object, 100, 300).unwrap();
    assert_eq!(ends.info.size, size);
    assert_eq!(ends.info.etag.as_deref(), Some(etag.as_str()));
    content::check(name, 0, &ends.head).unwrap();
    assert_eq!(ends.head.len(), 100);
    content::check(name, size - 300, &ends.tail).unwrap();
    assert_eq!(ends.tail.len(), 300);

    // Ends longer than a tiny object overlap.
    let ends = c.read_ends(&g.object(ONE.0), 10, 10).unwrap();
    assert_eq!(
        (ends.info.size, ends.head.len(), ends.tail.len()),
        (1, 1, 1)
    );
    content::check(ONE.0, 0, &ends.tail).unwrap();

    // A pinned read with the current ETag succeeds.
    let batch = c
        .submit(vec![Read::new(&object, 5, 5).if_match(&etag)])
        .unwrap();
    let done = batch.next().unwrap();
    assert!(done.result.is_ok(), "{:?}", done.result);
    content::check(name, 5, done.bytes()).unwrap();
}

#[test]
fn windows_apply_to_gcs_objects() {
    let Some(g) = gcs() else { return };
    let c = g.client(&[]);
    let (name, _) = MEDIUM;
    let windowed = Locator::parse(&format!(
        "/vsisubfile/1000_5000,gs://{}/{name}#bytes=100000-199999",
        g.bucket
    ))
    .unwrap();
    assert_eq!(c.stat(&windowed).unwrap().size, 5000);
    let got = c.read(&windowed, 10, 4990).unwrap();
    content::check(name, 101_010, &got).unwrap();
    let e = c.read(&windowed, 4990, 20).unwrap_err();
    assert_eq!(e.status(), Status::Range, "{e}");
}

#[test]
fn missing_objects_and_reads_past_the_end() {
    let Some(g) = gcs() else { return };
    let c = g.client(&[]);
    let (name, size) = SMALL;
    let object = g.object(name);
    let missing = g.object("no/such/object.bin");
    let no_bucket = Locator::parse("gs://no-such-bucket/x.bin").unwrap();
    let batch = c
        .submit(vec![
            Read::new(&object, size - 10, 20).tag(1),
            Read::new(&object, size + 100, 10).tag(2),
            Read::new(&missing, 0, 10).tag(3),
            Read::new(&no_bucket, 0, 10).tag(4),
            Read::new(&object, 0, 10).tag(5),
        ])
        .unwrap();
    let done = collect(&batch);
    assert_eq!(done[0].status(), Status::Range);
    assert_eq!(done[0].got, 10);
    content::check(name, size - 10, &done[0].bytes()[..10]).unwrap();
    assert_eq!(done[1].status(), Status::Range);
    assert_eq!(done[2].status(), Status::NotFound, "{:?}", done[2].result);
    assert_eq!(done[3].status(), Status::NotFound, "{:?}", done[3].result);
    assert!(done[4].result.is_ok());
    content::check(name, 0, done[4].bytes()).unwrap();
    let e = c.stat(&missing).unwrap_err();
    assert_eq!(e.status(), Status::NotFound);
    assert!(
        e.message()
            .starts_with("/vsigs/karu-test/no/such/object.bin: "),
        "{e}"
    );
}

/// The plain bytes of the gzip-stored object, decompressed from what was read.
fn gunzip(stored: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(stored)
        .read_to_end(&mut plain)
        .unwrap();
    plain
}

#[test]
fn gzip_stored_objects_are_read_as_stored() {
    let Some(g) = gcs() else { return };
    let c = g.client(&[]);
    let (name, plain_len) = GZIP;
    let object = g.object(name);
    let size = c.stat(&object).unwrap().size;
    // The size is the stored one: gzip framing around content that does not compress.
    assert_ne!(size, plain_len as u64);
    let stored = c.read(&object, 0, size).unwrap();
    assert_eq!(&stored[..2], &[0x1f, 0x8b], "a gzip member");
    let plain = gunzip(&stored);
    assert_eq!(plain.len(), plain_len);
    content::check(name, 0, &plain).unwrap();
    // Ranges address the stored bytes.
    let mut rng = Rng(3);
    let spans = random_spans(&mut rng, size, 50, size / 3);
    read_checked(&c, &object, &spans, |off, bytes| {
        let off = off as usize;
        if bytes == &stored[off..off + bytes.len()] {
            Ok(())
        } else {
            Err("wrong bytes".to_owned())
        }
    });
    let ends = c.read_ends(&object, 64, 64).unwrap();
    assert_eq!(ends.head, &stored[..64]);
    assert_eq!(ends.tail, &stored[stored.len() - 64..]);
}

#[test]
fn transcoded_responses_are_refused() {
    let Some(g) = gcs() else { return };
    // A plain HTTP read sends no Accept-Encoding: the emulator decodes the stored gzip, as
    // GCS does, and says so in X-Goog-Stored-Content-Encoding.
    let url = format!("{}/{}/{}", g.url, g.bucket, GZIP.0);
    let c = client(&[]);
    let e = c.read(&Locator::parse(&url).unwrap(), 0, 100).unwrap_err();
    assert_eq!(e.status(), Status::Http, "{e}");
    assert!(e.message().starts_with(&url), "{e}");
    assert!(e.message().contains("GCS decompressive transcoding"), "{e}");
    assert!(e.message().contains("gs://"), "{e}");
    assert!(e.message().contains("Accept-Encoding: gzip"), "{e}");
    let e = c.stat(&Locator::parse(&url).unwrap()).unwrap_err();
    assert_eq!(e.status(), Status::Http, "{e}");
    // Asking for the stored encoding through KARU_HTTP_HEADERS reads the stored bytes.
    let c = client(&[("KARU_HTTP_HEADERS", "Accept-Encoding: gzip")]);
    let stored = c.read(&Locator::parse(&url).unwrap(), 0, 2).unwrap();
    assert_eq!(stored, [0x1f, 0x8b]);
}

#[test]
fn malformed_endpoints_fail_only_their_reads() {
    let server = RangeServer::start();
    let good = Locator::parse(&server.url("ok/plain.bin?size=100")).unwrap();
    let gs = Locator::parse("gs://bucket/key.bin").unwrap();
    for (endpoint, why) in [
        ("http://127.0.0.1:9/?x=1", "cannot contain a query"),
        ("ftp://127.0.0.1:9", "must be an http or https URL"),
        (
            "http://user:pw@127.0.0.1:9",
            "cannot contain user information",
        ),
    ] {
        let c = client(&[("GCS_ENDPOINT", endpoint), ("GCS_NO_SIGN_REQUEST", "YES")]);
        let e = fails_alone(&c, &gs, &good, "plain.bin");
        assert_eq!(e.status(), Status::Config, "{e}");
        assert_eq!(
            e.message(),
            format!("/vsigs/bucket/key.bin: GCS_ENDPOINT {why}")
        );
        assert!(!e.message().contains("pw"), "{e}");
        assert_eq!(c.stat(&gs).unwrap_err().status(), Status::Config);
    }
}

/// A refresh-token chain against `tokens`, reading from `store`.
fn refresh_client(
    store: &BearerStore,
    tokens: &GoogleTokenServer,
    extra: &[(&str, &str)],
) -> Client {
    client_plus(
        &[
            ("GCS_ENDPOINT", &store.url()),
            ("GCS_OAUTH_TOKEN_URI", &tokens.token_url()),
            ("GCS_REFRESH_TOKEN", "rt"),
            ("GCS_CLIENT_ID", "id"),
            ("GCS_CLIENT_SECRET", "secret"),
        ],
        extra,
    )
}

#[test]
fn bearer_tokens_from_the_chain_and_one_refresh_after_a_401() {
    let store = BearerStore::start();
    let tokens = GoogleTokenServer::start();
    tokens.expect_refresh("id", "secret", "rt");
    store.add("bkt/dir/obj.bin", 5000);
    let c = refresh_client(&store, &tokens, &[("GCS_USER_PROJECT", "billing")]);
    let object = Locator::parse("gs://bkt/dir/obj.bin").unwrap();

    let got = c.read(&object, 100, 900).unwrap();
    content::check("bkt/dir/obj.bin", 100, &got).unwrap();
    let first = &store.log()[0];
    assert_eq!(first.path, "/bkt/dir/obj.bin");
    assert_eq!(first.header("authorization"), Some("Bearer refreshed-1"));
    assert_eq!(first.header("accept-encoding"), Some("gzip"));
    assert_eq!(first.header("x-goog-user-project"), Some("billing"));
    assert_eq!(first.header("range"), Some("bytes=100-999"));

    // The server stops taking the cached token: one refresh, then the read succeeds.
    store.refuse("refreshed-1");
    let batch = c.submit(vec![Read::new(&object, 0, 5000)]).unwrap();
    let done = batch.next().unwrap();
    assert!(done.result.is_ok(), "{:?}", done.result);
    content::check("bkt/dir/obj.bin", 0, done.bytes()).unwrap();
    let stats = batch.stats();
    assert_eq!(stats.credential_refreshes, 1, "{stats}");
    assert_eq!(stats.retries, 0, "{stats}");
    assert_eq!(
        store.authorizations(),
        [
            "Bearer refreshed-1",
            "Bearer refreshed-1",
            "Bearer refreshed-2"
        ]
    );
    assert_eq!(tokens.token_requests(), 2);

    // When the refreshed token is refused too: one refresh only, then AUTH.
    for t in ["refreshed-2", "refreshed-3", "refreshed-4"] {
        store.refuse(t);
    }
    let batch = c.submit(vec![Read::new(&object, 0, 10)]).unwrap();
    let done = batch.next().unwrap();
    assert_eq!(done.status(), Status::Auth, "{:?}", done.result);
    assert_eq!(batch.stats().credential_refreshes, 1);
    let e = c.stat(&object).unwrap_err();
    assert_eq!(e.status(), Status::Auth, "{e}");
    assert!(e.message().contains("HTTP 401"), "{e}");
    assert_eq!(tokens.token_requests(), 4);
    assert_eq!(
        store.authorizations()[3..],
        [
            "Bearer refreshed-2",
            "Bearer refreshed-3",
            "Bearer refreshed-3",
            "Bearer refreshed-4"
        ]
    );
}

#[test]
fn concurrent_reads_share_one_token_request() {
    let store = BearerStore::start();
    let tokens = GoogleTokenServer::start();
    // A slow token endpoint: every transfer's lookup starts before the first one ends.
    tokens.set_delay(Duration::from_millis(300));
    let names: Vec<String> = (0..12).map(|i| format!("bkt/o{i}.bin")).collect();
    for n in &names {
        store.add(n, 1000);
    }
    let c = refresh_client(&store, &tokens, &[]);
    let objects: Vec<(Locator, String)> = names
        .iter()
        .map(|n| (Locator::parse(&format!("gs://{n}")).unwrap(), n.clone()))
        .collect();
    assert_eq!(read_each(&c, &objects, 10, 100).transfers, 12);
    assert_eq!(tokens.token_requests(), 1);
    assert!(
        store
            .authorizations()
            .iter()
            .all(|a| a == "Bearer refreshed-1")
    );
}

#[test]
fn tokens_are_refreshed_before_they_expire() {
    let store = BearerStore::start();
    let tokens = GoogleTokenServer::start();
    store.add("bkt/obj.bin", 100);
    // Workload identity with impersonation: the impersonated token's expireTime is taken as
    // given (OAuth lifetimes are at least 60 s). It lives 3 to 4 s (whole seconds), and is
    // reused until 1 s (the shortest margin) before that.
    tokens.set_expires_in(ExpiresIn::Number(4));
    let dir = tempfile::tempdir().unwrap();
    let subject = dir.path().join("subject");
    std::fs::write(&subject, "oidc").unwrap();
    let adc = serde_json::json!({
        "type": "external_account",
        "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        "token_url": tokens.sts_url(),
        "credential_source": {"file": subject.to_str().unwrap()},
        "service_account_impersonation_url": tokens.impersonation_url("sa@p.iam"),
    });
    let adc_file = dir.path().join("adc.json");
    std::fs::write(&adc_file, adc.to_string()).unwrap();
    let c = client(&[
        ("GCS_ENDPOINT", &store.url()),
        ("GOOGLE_APPLICATION_CREDENTIALS", adc_file.to_str().unwrap()),
    ]);
    let object = Locator::parse("gs://bkt/obj.bin").unwrap();
    for _ in 0..2 {
        content::check("bkt/obj.bin", 0, &c.read(&object, 0, 100).unwrap()).unwrap();
    }
    assert_eq!(
        store.authorizations(),
        ["Bearer impersonated-2", "Bearer impersonated-2"]
    );
    std::thread::sleep(Duration::from_millis(3200));
    content::check("bkt/obj.bin", 0, &c.read(&object, 0, 100).unwrap()).unwrap();
    assert_eq!(store.authorizations()[2], "Bearer impersonated-4");
    assert_eq!(
        tokens.token_requests(),
        4,
        "two exchanges, two impersonations"
    );
}

#[test]
fn service_account_keys_sign_a_jwt_the_endpoint_verifies() {
    let store = BearerStore::start();
    let tokens = GoogleTokenServer::start();
    store.add("bkt/obj.bin", 100);
    let c = client(&[
        ("GCS_ENDPOINT", &store.url()),
        ("GCS_OAUTH_TOKEN_URI", &tokens.token_url()),
        ("GCS_PRIVATE_KEY", tokens.private_key_pem()),
        ("GCS_CLIENT_EMAIL", "reader@project.iam.gserviceaccount.com"),
    ]);
    let got = c
        .read(&Locator::parse("gs://bkt/obj.bin").unwrap(), 0, 100)
        .unwrap();
    content::check("bkt/obj.bin", 0, &got).unwrap();
    assert_eq!(store.authorizations(), ["Bearer jwt-1"]);
    let claims = tokens.verified_claims();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["iss"], "reader@project.iam.gserviceaccount.com");
    assert_eq!(
        claims[0]["scope"],
        "https://www.googleapis.com/auth/devstorage.read_only"
    );
}

#[test]
fn metadata_tokens_reach_the_store() {
    let store = BearerStore::start();
    let meta = MetadataServer::start();
    store.add("bkt/obj.bin", 100);
    let c = client(&[
        ("GCS_ENDPOINT", &store.url()),
        ("GCS_METADATA_ENDPOINT", &meta.token_url()),
    ]);
    let object = Locator::parse("gs://bkt/obj.bin").unwrap();
    assert_eq!(c.stat(&object).unwrap().size, 100);
    assert_eq!(store.authorizations(), ["Bearer metadata-1"]);
    // An explicit endpoint that fails is the read's error.
    meta.set_status(Some(500));
    let c = client(&[
        ("GCS_ENDPOINT", &store.url()),
        ("GCS_METADATA_ENDPOINT", &meta.token_url()),
    ]);
    let e = c.read(&object, 0, 1).unwrap_err();
    assert_eq!(e.status(), Status::Credentials, "{e}");
    assert_eq!(
        e.message(),
        "/vsigs/bkt/obj.bin: credential endpoint returned HTTP 500"
    );
}

#[test]
fn hmac_keys_sign_goog1_requests() {
    let server = RangeServer::start();
    server.register("dir/a b.bin", 3000);
    let c = client(&[
        ("GCS_ENDPOINT", &format!("http://{}", server.addr())),
        ("GCS_HMAC_ACCESS_KEY_ID", "GOOG1EXAMPLE"),
        ("GCS_HMAC_SECRET_ACCESS_KEY", "hmac-secret"),
        ("GCS_USER_PROJECT", "payer"),
    ]);
    // The bucket is the server's route, the key its object name.
    let object = Locator::parse("gs://ok/dir/a b.bin").unwrap();
    let got = c.read(&object, 1000, 2000).unwrap();
    content::check("dir/a b.bin", 1000, &got).unwrap();
    let logged = &server.log()[0];
    assert_eq!(logged.target, "/ok/dir/a%20b.bin");
    let date = logged.header("date").expect("a Date header");
    let when = httpdate::parse_http_date(date).unwrap();
    let skew = SystemTime::now().duration_since(when).unwrap_or_default();
    assert!(skew < Duration::from_secs(60), "{date}");
    let to_sign = format!("GET\n\n\n{date}\nx-goog-user-project:payer\n/ok/dir/a%20b.bin");
    let key = hmac::Key::new(hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, b"hmac-secret");
    let signature =
        base64::engine::general_purpose::STANDARD.encode(hmac::sign(&key, to_sign.as_bytes()));
    assert_eq!(
        logged.header("authorization"),
        Some(format!("GOOG1 GOOG1EXAMPLE:{signature}").as_str())
    );
    assert_eq!(logged.header("x-goog-user-project"), Some("payer"));
    assert_eq!(logged.header("accept-encoding"), Some("gzip"));
}

#[test]
fn signed_requests_do_not_follow_redirects_anonymous_ones_do() {
    let server = RangeServer::start();
    server.register("f.bin", 100);
    let endpoint = format!("http://{}", server.addr());
    let object = Locator::parse("gs://redirect/f.bin").unwrap();
    let signed = client(&[("GCS_ENDPOINT", &endpoint), ("GCS_ACCESS_TOKEN", "tok")]);
    let e = signed.read(&object, 0, 10).unwrap_err();
    assert_eq!(e.status(), Status::Http, "{e}");
    assert!(e.message().contains("302"), "{e}");
    let anonymous = client(&[("GCS_ENDPOINT", &endpoint), ("GCS_NO_SIGN_REQUEST", "YES")]);
    let got = anonymous.read(&object, 0, 10).unwrap();
    content::check("f.bin", 0, &got).unwrap();
    let log = server.log();
    assert_eq!(log[0].header("authorization"), Some("Bearer tok"));
    assert!(log[1..].iter().all(|l| l.header("authorization").is_none()));
}

#[test]
fn no_credentials_is_a_credentials_error() {
    let c = client(&[("GCS_ENDPOINT", "http://127.0.0.1:9")]);
    let e = c
        .read(&Locator::parse("gs://bkt/obj.bin").unwrap(), 0, 1)
        .unwrap_err();
    assert_eq!(e.status(), Status::Credentials);
    assert_eq!(
        e.message(),
        "/vsigs/bkt/obj.bin: no GCS credentials; set GCS_ACCESS_TOKEN, configure \
         GCS_HMAC_ACCESS_KEY_ID/GCS_HMAC_SECRET_ACCESS_KEY, install a custom provider, or set \
         GCS_NO_SIGN_REQUEST=YES"
    );
    // Both private-key options: CONFIG for the read, whatever else is configured after it.
    let c = client(&[
        ("GCS_PRIVATE_KEY", "pem"),
        ("GCS_PRIVATE_KEY_FILE", "/k.pem"),
        ("GCS_CLIENT_EMAIL", "sa@p.iam"),
    ]);
    let e = c
        .read(&Locator::parse("gs://bkt/obj.bin").unwrap(), 0, 1)
        .unwrap_err();
    assert_eq!(e.status(), Status::Config, "{e}");
    assert_eq!(
        e.message(),
        "/vsigs/bkt/obj.bin: set GCS_PRIVATE_KEY or GCS_PRIVATE_KEY_FILE, not both"
    );
}
