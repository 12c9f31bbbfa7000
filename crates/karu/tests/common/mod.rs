//! What the integration tests share: the endpoints the server scripts publish (skip outside
//! CI, fail under it), clients built from options, deterministic random spans, and batch reads
//! with every byte checked.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use std::collections::BTreeSet;

use karu::{Batch, BatchStats, Client, Completion, Config, Error, Locator, Read};
use karu_testkit::content;
use karu_testkit::server::RangeServer;

/// Objects that the server scripts seed under these names and sizes (the header of each
/// script says which of them it has); a byte is `content::byte(name, offset)`.
pub const ONE: (&str, u64) = ("one.bin", 1);
pub const SMALL: (&str, u64) = ("small.bin", 1000);
pub const MEDIUM: (&str, u64) = ("medium.bin", 1_048_583);
pub const LARGE: (&str, u64) = ("large.bin", 16_777_219);

/// The variables a server script (`scripts/NAME.sh`, run by `scripts/test.sh`) wrote.
pub struct Started {
    /// The variable that says the servers run.
    var: &'static str,
    /// Its value, without a trailing `/`.
    pub url: String,
}

impl Started {
    /// Another variable of the same script, which must be set when the first one is.
    pub fn require(&self, name: &str) -> String {
        var(name).unwrap_or_else(|| panic!("{} is set but {name} is not", self.var))
    }

    /// Another variable of the same script that may be missing.
    pub fn optional(&self, name: &str) -> Option<String> {
        var(name)
    }
}

/// A set, non-empty environment variable.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The one place that reads whether `scripts/<script>.sh` runs, by its variable `url_var`:
/// `None` after a skip line when it does not outside CI; a panic when it does not under `CI`,
/// so that a server that did not start cannot look like a green run.
pub fn started(url_var: &'static str, script: &str) -> Option<Started> {
    let Some(url) = var(url_var) else {
        if var("CI").is_some() {
            panic!(
                "{url_var} is not set but CI is: the tests of `scripts/{script}.sh` must run in \
                 CI. Run them through `bash scripts/test.sh`, or start the servers with \
                 `scripts/{script}.sh start ENV_FILE` and source ENV_FILE."
            );
        }
        eprintln!("skipped: {url_var} is not set (run `bash scripts/test.sh`)");
        return None;
    };
    Some(Started {
        var: url_var,
        url: url.trim_end_matches('/').to_owned(),
    })
}

/// A client with these options on top of a hermetic `Config::empty()`.
pub fn client(options: &[(&str, &str)]) -> Client {
    let mut config = Config::empty();
    for (name, value) in options {
        config.set(name, Some(value)).unwrap();
    }
    Client::new(&config).unwrap()
}

/// [`client`] with `options` and then `extra` (a test's own options on top of a helper's).
pub fn client_plus(options: &[(&str, &str)], extra: &[(&str, &str)]) -> Client {
    client(&[options, extra].concat())
}

/// `path` (a fault route and its query) on the test kit's range server.
pub fn object(server: &RangeServer, path: &str) -> Locator {
    Locator::parse(&server.url(path)).unwrap()
}

/// Every completion of `batch`, in tag order.
pub fn collect(batch: &Batch) -> Vec<Completion> {
    let mut all: Vec<Completion> = batch.collect();
    all.sort_by_key(|d| d.tag);
    all
}

/// A small deterministic generator (no seeding from time: failures must reproduce).
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 16) % n
    }
}

/// `n` random `(offset, length)` spans inside `size` bytes, each at most `max_len` long.
pub fn random_spans(rng: &mut Rng, size: u64, n: usize, max_len: u64) -> Vec<(u64, u64)> {
    (0..n)
        .map(|_| {
            let len = 1 + rng.below(max_len.min(size));
            (rng.below(size - len + 1), len)
        })
        .collect()
}

/// Submits `(offset, length)` reads of one object in one batch; checks that each completes
/// once, whole, with bytes that `check(offset, bytes)` accepts; returns the batch's stats.
pub fn read_checked(
    client: &Client,
    object: &Locator,
    spans: &[(u64, u64)],
    check: impl Fn(u64, &[u8]) -> Result<(), String>,
) -> BatchStats {
    let reads: Vec<(&Locator, u64, u64)> = spans.iter().map(|&(o, l)| (object, o, l)).collect();
    read_spans(client, &reads, |_, off, bytes| check(off, bytes))
}

/// Reads `len` bytes at `offset` of each object in one batch (`objects[i]` is a locator and
/// its content name), every byte checked as [`read_checked`] does; returns the batch's stats.
pub fn read_each(
    client: &Client,
    objects: &[(Locator, String)],
    offset: u64,
    len: u64,
) -> BatchStats {
    let reads: Vec<(&Locator, u64, u64)> = objects.iter().map(|(o, _)| (o, offset, len)).collect();
    read_spans(client, &reads, |i, off, bytes| {
        content::check(&objects[i].1, off, bytes)
    })
}

/// The batch behind [`read_checked`] and [`read_each`]: read `i` is `reads[i]`, and
/// `check(i, offset, bytes)` judges its bytes.
fn read_spans(
    client: &Client,
    reads: &[(&Locator, u64, u64)],
    check: impl Fn(usize, u64, &[u8]) -> Result<(), String>,
) -> BatchStats {
    let batch = client
        .submit(
            reads
                .iter()
                .enumerate()
                .map(|(i, &(object, off, len))| Read::new(object, off, len).tag(i as u64))
                .collect(),
        )
        .unwrap();
    let mut seen = BTreeSet::new();
    for done in &batch {
        let i = done.tag as usize;
        let (object, off, len) = reads[i];
        let what = format!("{} [{off}, +{len})", object.display());
        assert!(done.result.is_ok(), "{what}: {:?}", done.result);
        assert_eq!(done.got, len, "{what}");
        assert_eq!(done.bytes().len() as u64, len, "{what}");
        check(i, off, done.bytes()).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(seen.insert(done.tag), "tag {} completed twice", done.tag);
    }
    assert_eq!(seen.len(), reads.len(), "every read completes once");
    let stats = batch.stats();
    assert_eq!(stats.transfers, stats.transfers_finished);
    assert_eq!(
        stats.requested_bytes,
        reads.iter().map(|r| r.2).sum::<u64>()
    );
    stats
}

/// Reads 10 bytes at 0 of `bad` (a read that must fail) and of `good` (content `good_name`) in
/// one batch: bad input fails only the reads it affects, so the good read returns its bytes.
/// Returns the bad read's error.
pub fn fails_alone(client: &Client, bad: &Locator, good: &Locator, good_name: &str) -> Error {
    let batch = client
        .submit(vec![
            Read::new(bad, 0, 10).tag(1),
            Read::new(good, 0, 10).tag(2),
        ])
        .unwrap();
    let [bad_done, good_done]: [Completion; 2] = collect(&batch).try_into().unwrap();
    assert!(good_done.result.is_ok(), "{:?}", good_done.result);
    content::check(good_name, 0, good_done.bytes()).unwrap();
    bad_done
        .result
        .expect_err("the read of the bad input fails")
}

/// [`read_checked`] against the deterministic content of `name`.
pub fn read_all(client: &Client, object: &Locator, name: &str, spans: &[(u64, u64)]) -> BatchStats {
    read_checked(client, object, spans, |off, bytes| {
        content::check(name, off, bytes)
    })
}

/// Peak resident set size of this process, in bytes (Linux `VmHWM`).
pub fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}
