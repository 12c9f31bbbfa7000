//! Reads through a real nginx (started by `scripts/nginx.sh`, which `scripts/test.sh` runs):
//! ranges, merged transfers, the end of the object, ETags and `If-Match`, `read_ends`, servers
//! with `max_ranges 1` and `max_ranges 0`, keep-alive reuse and missing files. Every byte is
//! checked against the deterministic content.
//!
//! Without `KARU_TEST_NGINX_URL` the tests print a skip line and pass, except under `CI`, where
//! they fail: a missing server must not look like a green run.

mod common;

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::path::PathBuf;

use common::{LARGE, MEDIUM, ONE, Rng, SMALL, client, random_spans, read_all};
use karu::{Client, Locator, Read, Status};
use karu_testkit::content;

/// The files `scripts/nginx.sh` generates by default besides the common ones (name, size).
const NESTED: (&str, u64) = ("dir/nested.bin", 4096);
const EMPTY: (&str, u64) = ("empty.bin", 0);

/// The endpoints of the running nginx.
struct Nginx {
    /// Default server: single ranges give 206.
    url: String,
    /// `max_ranges 1`.
    single_range: String,
    /// `max_ranges 0`: every Range ignored, 200 with the whole file.
    no_range: String,
    /// The server's temp dir (`www/` holds the files, `access.log` the requests).
    dir: Option<PathBuf>,
}

impl Nginx {
    fn at(base: &str, name: &str) -> Locator {
        Locator::parse(&format!("{base}/{name}")).unwrap()
    }

    fn file(&self, name: &str) -> Locator {
        Nginx::at(&self.url, name)
    }
}

/// The running nginx, or `None` after a skip line (a panic under CI).
fn nginx() -> Option<Nginx> {
    let env = common::started("KARU_TEST_NGINX_URL", "nginx")?;
    Some(Nginx {
        single_range: env.require("KARU_TEST_NGINX_SINGLE_RANGE_URL"),
        no_range: env.require("KARU_TEST_NGINX_NO_RANGE_URL"),
        dir: env.optional("KARU_TEST_NGINX_DIR").map(PathBuf::from),
        url: env.url,
    })
}

#[test]
fn random_ranges_return_exact_bytes() {
    let Some(n) = nginx() else { return };
    let c = client(&[]);
    let mut rng = Rng(0x006e_6769_6e78);
    for (name, size) in [LARGE, MEDIUM, SMALL, NESTED] {
        let spans = random_spans(&mut rng, size, 300, 70_000);
        read_all(&c, &n.file(name), name, &spans);
    }
    // The whole of the small files, and the last byte of each.
    for (name, size) in [SMALL, NESTED, ONE] {
        read_all(&c, &n.file(name), name, &[(0, size), (size - 1, 1)]);
    }
    // The blocking single read.
    let got = c.read(&n.file(LARGE.0), 12_345_678, 100_000).unwrap();
    content::check(LARGE.0, 12_345_678, &got).unwrap();
}

#[test]
fn merged_batches_return_exact_bytes() {
    let Some(n) = nginx() else { return };
    let c = client(&[("KARU_COALESCE_GAP", "65536")]);
    let (name, size) = LARGE;
    let object = n.file(name);
    // Clusters of overlapping, adjacent, duplicate and nearby reads: they merge into few
    // transfers, each read still gets exactly its own bytes.
    let mut rng = Rng(42);
    let mut spans = Vec::new();
    for cluster in 0..20u64 {
        let base = cluster * (size / 20);
        for _ in 0..25 {
            spans.push((base + rng.below(200_000), 1 + rng.below(4096)));
        }
        spans.push((base, 10));
        spans.push((base, 10));
        spans.push((base + 10, 10));
    }
    let stats = read_all(&c, &object, name, &spans);
    assert!(
        stats.transfers <= 40,
        "{} reads in 20 clusters should merge into few transfers: {stats}",
        spans.len()
    );
    assert_eq!(stats.retries, 0, "{stats}");
}

#[test]
fn read_passing_the_end_gives_range_with_the_valid_prefix() {
    let Some(n) = nginx() else { return };
    let c = client(&[]);
    let (name, size) = SMALL;
    let object = n.file(name);
    let batch = c
        .submit(vec![
            Read::new(&object, size - 10, 20).tag(1), // passes the end: prefix of 10
            Read::new(&object, size, 1).tag(2),       // starts at the end: 416
            Read::new(&object, size + 500, 10).tag(3), // past the end: 416
            Read::new(&object, 0, size).tag(4),       // exactly the whole file
        ])
        .unwrap();
    let mut seen = 0;
    for done in &batch {
        seen += 1;
        match done.tag {
            1 => {
                assert_eq!(done.status(), Status::Range, "{:?}", done.result);
                assert_eq!(done.got, 10);
                content::check(name, size - 10, done.bytes()).unwrap();
            }
            2 | 3 => {
                assert_eq!(done.status(), Status::Range, "{:?}", done.result);
                assert_eq!(done.got, 0);
            }
            _ => {
                assert!(done.result.is_ok(), "{:?}", done.result);
                content::check(name, 0, done.bytes()).unwrap();
            }
        }
    }
    assert_eq!(seen, 4);
    let err = c.read(&object, size + 1, 1).unwrap_err();
    assert_eq!(err.status(), Status::Range, "{err}");
}

#[test]
fn read_of_an_empty_file_gives_range() {
    let Some(n) = nginx() else { return };
    // nginx answers a Range on a zero-length file with 200 and an empty body.
    let err = client(&[]).read(&n.file(EMPTY.0), 0, 1).unwrap_err();
    assert_eq!(err.status(), Status::Range, "{err}");
}

/// nginx's ETag for a file: `"<mtime hex>-<size hex>"`.
fn expected_etag(n: &Nginx, name: &str) -> Option<String> {
    let meta = std::fs::metadata(n.dir.as_ref()?.join("www").join(name)).ok()?;
    let mtime = meta
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    Some(format!("\"{mtime:x}-{:x}\"", meta.len()))
}

#[test]
fn stat_gives_size_and_nginx_etag() {
    let Some(n) = nginx() else { return };
    let c = client(&[]);
    for (name, size) in [LARGE, MEDIUM, SMALL, NESTED, ONE, EMPTY] {
        let info = c.stat(&n.file(name)).unwrap();
        assert_eq!(info.size, size, "{name}");
        let etag = info.etag.unwrap_or_else(|| panic!("{name}: no ETag"));
        // Strong, quoted, "<hex>-<hex size>".
        let inner = etag
            .strip_prefix('"')
            .and_then(|e| e.strip_suffix('"'))
            .unwrap_or_else(|| panic!("{name}: ETag {etag} is not a quoted strong tag"));
        let (mtime, hex_size) = inner.split_once('-').unwrap();
        assert!(u64::from_str_radix(mtime, 16).is_ok(), "{etag}");
        assert_eq!(u64::from_str_radix(hex_size, 16).unwrap(), size, "{etag}");
        if let Some(expect) = expected_etag(&n, name) {
            assert_eq!(etag, expect, "{name}");
        }
        assert_eq!(c.size(&n.file(name)).unwrap(), size, "{name}");
    }
}

#[test]
fn if_match_with_the_right_etag_reads_and_with_a_wrong_one_fails() {
    let Some(n) = nginx() else { return };
    let c = client(&[]);
    let (name, size) = MEDIUM;
    let object = n.file(name);
    let etag = c.stat(&object).unwrap().etag.unwrap();
    let wrong = "\"1-2\"";
    let batch = c
        .submit(vec![
            Read::new(&object, 1000, 5000).tag(1).if_match(&etag),
            Read::new(&object, size - 100, 100).tag(2).if_match(&etag),
            Read::new(&object, 1000, 5000).tag(3).if_match(wrong),
            Read::new(&object, 500_000, 10).tag(4).if_match(wrong),
        ])
        .unwrap();
    let mut seen = 0;
    for done in &batch {
        seen += 1;
        match done.tag {
            1 | 2 => {
                assert!(done.result.is_ok(), "{:?}", done.result);
                let off = if done.tag == 1 { 1000 } else { size - 100 };
                content::check(name, off, done.bytes()).unwrap();
            }
            _ => {
                assert_eq!(done.status(), Status::Precondition, "{:?}", done.result);
                assert_eq!(done.got, 0);
            }
        }
    }
    assert_eq!(seen, 4);
}

#[test]
fn read_ends_gives_head_and_tail() {
    let Some(n) = nginx() else { return };
    let c = client(&[]);
    let cases = [
        (LARGE, 64 << 10, 1 << 20),
        (MEDIUM, 1, 1),
        (MEDIUM, 4096, 0),
        (MEDIUM, 0, 4096),
        (SMALL, 600, 700),   // shorter than head + tail: the two overlap
        (SMALL, 5000, 5000), // shorter than either: both are the whole file
        (NESTED, 4096, 4096),
        (ONE, 16, 16),
    ];
    for ((name, size), head, tail) in cases {
        let ends = c
            .read_ends(&n.file(name), head, tail)
            .unwrap_or_else(|e| panic!("{name} {head}/{tail}: {e}"));
        assert_eq!(ends.info.size, size, "{name}");
        assert_eq!(ends.info.etag, c.stat(&n.file(name)).unwrap().etag);
        assert_eq!(ends.head.len() as u64, head.min(size), "{name} head");
        assert_eq!(ends.tail.len() as u64, tail.min(size), "{name} tail");
        content::check(name, 0, &ends.head).unwrap();
        content::check(name, size - tail.min(size), &ends.tail).unwrap();
    }
    let ends = c.read_ends(&n.file(EMPTY.0), 10, 10).unwrap();
    assert_eq!(
        (ends.info.size, ends.head.len(), ends.tail.len()),
        (0, 0, 0)
    );
}

/// A path for `name` with a query string no other test or run uses, so the access log lines of
/// one test can be told apart (nginx ignores the query for static files).
fn unique(name: &str, test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{name}?test={test}&run={}-{nanos}", std::process::id())
}

/// The requests the access log shows for `path` (a unique query string keeps concurrent
/// tests apart): (range header, connection number).
fn logged(n: &Nginx, path: &str) -> Option<Vec<(String, u64)>> {
    let log = std::fs::read_to_string(n.dir.as_ref()?.join("access.log")).ok()?;
    let needle = format!("GET /{path} ");
    Some(
        log.lines()
            .filter(|l| l.contains(&needle))
            .map(|l| {
                let range = l
                    .split("range=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap();
                let conn = l.split(" conn=").nth(1).unwrap().split('/').next().unwrap();
                (range.to_owned(), conn.parse().unwrap())
            })
            .collect(),
    )
}

#[test]
fn read_ends_requests_head_and_suffix_together() {
    let Some(n) = nginx() else { return };
    let path = unique(LARGE.0, "read_ends_plan");
    let (name, size) = LARGE;
    let ends = client(&[]).read_ends(&n.file(&path), 1000, 2000).unwrap();
    content::check(name, 0, &ends.head).unwrap();
    content::check(name, size - 2000, &ends.tail).unwrap();
    let Some(requests) = logged(&n, &path) else {
        return;
    };
    let ranges: BTreeSet<_> = requests.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(ranges, BTreeSet::from(["bytes=-2000", "bytes=0-999"]));
}

#[test]
fn single_range_server_serves_every_read() {
    let Some(n) = nginx() else { return };
    let c = client(&[("KARU_COALESCE_GAP", "65536")]);
    let (name, size) = MEDIUM;
    let object = Nginx::at(&n.single_range, name);
    let mut rng = Rng(7);
    let spans = random_spans(&mut rng, size, 200, 20_000);
    read_all(&c, &object, name, &spans);
    let info = c.stat(&object).unwrap();
    assert_eq!(info.size, size);
    let ends = c.read_ends(&object, 100, 100).unwrap();
    content::check(name, 0, &ends.head).unwrap();
    content::check(name, size - 100, &ends.tail).unwrap();
    let err = c.read(&object, size, 1).unwrap_err();
    assert_eq!(err.status(), Status::Range, "{err}");
}

#[test]
fn no_range_server_falls_back_to_skipping_the_prefix() {
    let Some(n) = nginx() else { return };
    let c = client(&[]);
    // Small offsets: nginx sends the whole file with 200, karu discards the prefix.
    let (name, size) = MEDIUM;
    let object = Nginx::at(&n.no_range, name);
    read_all(
        &c,
        &object,
        name,
        &[(0, 10), (1000, 5000), (size - 100, 100), (500_000, 1)],
    );
    let (small, small_size) = SMALL;
    let small_object = Nginx::at(&n.no_range, small);
    let batch = c
        .submit(vec![Read::new(&small_object, small_size - 5, 10)])
        .unwrap();
    let done = batch.next().unwrap();
    assert_eq!(done.status(), Status::Range, "{:?}", done.result);
    assert_eq!(done.got, 5);
    content::check(small, small_size - 5, done.bytes()).unwrap();
    assert_eq!(c.stat(&small_object).unwrap().size, small_size);

    // Beyond KARU_RANGE_FALLBACK_LIMIT (8 MiB by default): refused, not downloaded.
    let (large, _) = LARGE;
    let err = c
        .read(&Nginx::at(&n.no_range, large), 9 << 20, 100)
        .unwrap_err();
    assert_eq!(err.status(), Status::Http, "{err}");
    assert!(err.message().contains("server ignored Range"), "{err}");

    // The limit is an option.
    let strict = client(&[("KARU_RANGE_FALLBACK_LIMIT", "100")]);
    let got = strict.read(&small_object, 100, 10).unwrap();
    content::check(small, 100, &got).unwrap();
    let err = strict.read(&small_object, 101, 10).unwrap_err();
    assert_eq!(err.status(), Status::Http, "{err}");
    assert!(err.message().contains("server ignored Range"), "{err}");
}

#[test]
fn keep_alive_connections_are_reused_across_batches() {
    let Some(n) = nginx() else { return };
    keep_alive(&n, &client(&[]), "keep_alive");
}

fn keep_alive(n: &Nginx, c: &Client, test: &str) {
    let (name, size) = LARGE;
    let path = unique(LARGE.0, test);
    let object = n.file(&path);
    // 64 reads far apart (no merging), 4 KiB each.
    let spans = |shift: u64| -> Vec<(u64, u64)> {
        (0..64)
            .map(|i| ((i * (size / 64) + shift) % (size - 4096), 4096))
            .collect()
    };
    let first = read_all(c, &object, name, &spans(0));
    assert_eq!(first.transfers, 64, "{first}");
    assert!(
        (1..=64).contains(&first.new_connections),
        "first batch: {first}"
    );
    // Later batches reuse the pooled connections. A connection is only opened when no idle
    // one is at hand, so a first batch whose reads finish while others are still being
    // dispatched may open fewer than 64, and a later batch then tops the pool up; it never
    // grows past the 64 concurrent transfers.
    let second = read_all(c, &object, name, &spans(12_345));
    let third = read_all(c, &object, name, &spans(777));
    let total = first.new_connections + second.new_connections + third.new_connections;
    assert!(
        total <= 64,
        "pool grew past 64: {first} / {second} / {third}"
    );

    // The server agrees: as many connections as the client counted.
    let Some(requests) = logged(n, &path) else {
        return;
    };
    assert_eq!(requests.len(), 3 * 64, "{requests:?}");
    let mut per_conn: HashMap<u64, usize> = HashMap::new();
    for (_, conn) in &requests {
        *per_conn.entry(*conn).or_default() += 1;
    }
    assert_eq!(per_conn.len() as u64, total, "{per_conn:?}");
}

#[test]
fn missing_file_is_not_found() {
    let Some(n) = nginx() else { return };
    let c = client(&[]);
    let object = n.file("no-such-file.bin");
    let err = c.read(&object, 0, 10).unwrap_err();
    assert_eq!(err.status(), Status::NotFound, "{err}");
    let err = c.stat(&object).unwrap_err();
    assert_eq!(err.status(), Status::NotFound, "{err}");
    let err = c.read_ends(&object, 10, 10).unwrap_err();
    assert_eq!(err.status(), Status::NotFound, "{err}");
    let done = c
        .submit(vec![Read::new(&n.file("dir/missing.bin"), 5, 5)])
        .unwrap()
        .next()
        .unwrap();
    assert_eq!(done.status(), Status::NotFound, "{:?}", done.result);
    assert_eq!(done.got, 0);
}
