//! Reads through a real fake-gcs-server (started by `scripts/gcs.sh`, which `scripts/test.sh`
//! runs): ranges, batches, stat, read_ends and windows on `gs://` and `/vsigs/` paths, missing
//! objects, reads past the end, and a gzip-stored object, which `gs://` reads as stored while
//! a plain HTTP read (no `Accept-Encoding`) is transcoded and refused. Every byte is checked
//! against the deterministic content.
//!
//! Without `KARU_TEST_GCS_URL` the emulator tests print a skip line and pass, except under
//! `CI`, where they fail. Tests of bad input need no emulator.

use std::collections::BTreeSet;
use std::io::Read as _;

use karu::{Client, Config, Locator, Read, Status};
use karu_testkit::{RangeServer, content};

/// Objects `scripts/gcs.sh` seeds (name, size).
const ONE: (&str, u64) = ("one.bin", 1);
const SMALL: (&str, u64) = ("small.bin", 1000);
const MEDIUM: (&str, u64) = ("medium.bin", 1_048_583);
const LARGE: (&str, u64) = ("large.bin", 16_777_219);
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
        let mut all = vec![
            ("GCS_ENDPOINT", self.url.as_str()),
            ("GCS_NO_SIGN_REQUEST", "YES"),
        ];
        all.extend_from_slice(options);
        client_with(&all)
    }
}

/// The one place that reads the environment: `None` (after a skip line) when no emulator runs
/// outside CI; a panic when none runs under CI.
fn gcs() -> Option<Gcs> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let Some(url) = var("KARU_TEST_GCS_URL") else {
        if var("CI").is_some() {
            panic!(
                "KARU_TEST_GCS_URL is not set but CI is: the GCS tests must run in CI. Run \
                 them through `bash scripts/test.sh`, or start the emulator with \
                 `scripts/gcs.sh start ENV_FILE` and source ENV_FILE."
            );
        }
        eprintln!("skipped: KARU_TEST_GCS_URL is not set (run `bash scripts/test.sh`)");
        return None;
    };
    Some(Gcs {
        url: url.trim_end_matches('/').to_owned(),
        bucket: var("KARU_TEST_GCS_BUCKET")
            .unwrap_or_else(|| panic!("KARU_TEST_GCS_URL is set but KARU_TEST_GCS_BUCKET is not")),
    })
}

fn client_with(options: &[(&str, &str)]) -> Client {
    let mut config = Config::empty();
    for (name, value) in options {
        config.set(name, Some(value)).unwrap();
    }
    Client::new(&config).unwrap()
}

/// A small deterministic generator (no seeding from time: failures must reproduce).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 16) % n
    }
}

fn random_spans(rng: &mut Rng, size: u64, n: usize, max_len: u64) -> Vec<(u64, u64)> {
    (0..n)
        .map(|_| {
            let len = 1 + rng.below(max_len.min(size));
            (rng.below(size - len + 1), len)
        })
        .collect()
}

/// Submits `(offset, length)` reads of one object and checks every completion's bytes
/// against `expected(offset, length)`; returns the batch's stats.
fn read_checked(
    client: &Client,
    object: &Locator,
    spans: &[(u64, u64)],
    expected: impl Fn(u64, u64) -> Vec<u8>,
) -> karu::BatchStats {
    let reads = spans
        .iter()
        .enumerate()
        .map(|(i, &(off, len))| Read::new(object, off, len).tag(i as u64))
        .collect();
    let batch = client.submit(reads).unwrap();
    let mut seen = BTreeSet::new();
    for done in &batch {
        let (off, len) = spans[done.tag as usize];
        let what = format!("{} [{off}, +{len})", object.identity());
        assert!(done.result.is_ok(), "{what}: {:?}", done.result);
        assert_eq!(done.got, len, "{what}");
        assert!(
            done.bytes() == expected(off, len).as_slice(),
            "{what}: wrong bytes"
        );
        assert!(seen.insert(done.tag), "tag {} completed twice", done.tag);
    }
    assert_eq!(seen.len(), spans.len(), "every read completes once");
    let stats = batch.stats();
    assert_eq!(stats.transfers, stats.transfers_finished);
    stats
}

fn content_of(name: &str) -> impl Fn(u64, u64) -> Vec<u8> + '_ {
    move |off, len| content::bytes(name, off, len as usize)
}

#[test]
fn random_ranges_return_exact_bytes() {
    let Some(g) = gcs() else { return };
    let c = g.client(&[]);
    let mut rng = Rng(0x0067_6373);
    for (name, size) in [LARGE, MEDIUM, SMALL, SPACED] {
        let spans = random_spans(&mut rng, size, 200, 70_000);
        read_checked(&c, &g.object(name), &spans, content_of(name));
    }
    for (name, size) in [SMALL, SPACED, ONE] {
        let spans = [(0, size), (size - 1, 1)];
        read_checked(&c, &g.object(name), &spans, content_of(name));
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
    let stats = read_checked(&c, &g.object(name), &spans, content_of(name));
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
    let mut done: Vec<_> = (&batch).into_iter().collect();
    done.sort_by_key(|d| d.tag);
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
    read_checked(&c, &object, &spans, |off, len| {
        stored[off as usize..(off + len) as usize].to_vec()
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
    let c = client_with(&[]);
    let e = c.read(&Locator::parse(&url).unwrap(), 0, 100).unwrap_err();
    assert_eq!(e.status(), Status::Http, "{e}");
    assert!(e.message().starts_with(&url), "{e}");
    assert!(e.message().contains("GCS decompressive transcoding"), "{e}");
    assert!(e.message().contains("gs://"), "{e}");
    assert!(e.message().contains("Accept-Encoding: gzip"), "{e}");
    let e = c.stat(&Locator::parse(&url).unwrap()).unwrap_err();
    assert_eq!(e.status(), Status::Http, "{e}");
    // Asking for the stored encoding through KARU_HTTP_HEADERS reads the stored bytes.
    let c = client_with(&[("KARU_HTTP_HEADERS", "Accept-Encoding: gzip")]);
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
        let c = client_with(&[("GCS_ENDPOINT", endpoint), ("GCS_NO_SIGN_REQUEST", "YES")]);
        let batch = c
            .submit(vec![
                Read::new(&gs, 0, 10).tag(1),
                Read::new(&good, 0, 10).tag(2),
            ])
            .unwrap();
        let mut done: Vec<_> = (&batch).into_iter().collect();
        done.sort_by_key(|d| d.tag);
        let e = done[0].result.as_ref().unwrap_err();
        assert_eq!(e.status(), Status::Config, "{e}");
        assert_eq!(
            e.message(),
            format!("/vsigs/bucket/key.bin: GCS_ENDPOINT {why}")
        );
        assert!(!e.message().contains("pw"), "{e}");
        assert!(done[1].result.is_ok(), "{:?}", done[1].result);
        content::check("plain.bin", 0, done[1].bytes()).unwrap();
        assert_eq!(c.stat(&gs).unwrap_err().status(), Status::Config);
    }
}
