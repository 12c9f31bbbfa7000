//! A chunked download holds about one sub-read per chunk in flight, not the whole chunk: each
//! chunk is one request whose sub-reads complete as their last byte arrives and are written
//! into the file at once, their buffers freed. Its own test binary, so the process's peak RSS
//! is this test's alone.

mod common;

use std::io::Read as _;

use common::peak_rss;
use karu::{Chunking, DownloadOptions, Locator};
use karu_testkit::content;
use karu_testkit::server::{RangeServer, etag};

const CHUNK: u64 = 8 << 20;
const PARALLELISM: u64 = 8;
const SIZE: u64 = 64 << 20;

#[test]
fn a_chunked_download_holds_far_less_than_its_chunks_in_flight() {
    let server = RangeServer::start();
    // 8 MB/s a request, 64 MB/s for the 8 together: slower than a debug build writes them to
    // the file, so completions do not wait for the download's loop.
    let route = format!("/trickle/memory?size={SIZE}&rate=8000000");
    let object = Locator::parse(&server.url(&route)).unwrap();
    let client = common::client(&[]);
    // Warm up: the loops, their runtimes and a pooled connection exist before measuring.
    assert_eq!(client.read(&object, 0, 4096).unwrap().len(), 4096);
    server.clear_log();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.bin");
    let before = peak_rss();
    let result = client
        .download(
            &object,
            &dest,
            DownloadOptions {
                chunk_size: CHUNK,
                parallelism: PARALLELISM,
                chunking: Chunking::Always,
                ..Default::default()
            },
        )
        .unwrap();
    // Measured before the file is read back, which would count its pages.
    let growth = peak_rss().saturating_sub(before);
    eprintln!("peak RSS growth {growth} bytes downloading {SIZE} bytes in {CHUNK}-byte chunks");

    // Every byte, read back in pieces.
    let mut file = std::fs::File::open(&dest).unwrap();
    assert_eq!(file.metadata().unwrap().len(), SIZE);
    let mut piece = vec![0u8; 1 << 20];
    let mut at = 0;
    while at < SIZE {
        file.read_exact(&mut piece).unwrap();
        content::check("memory", at, &piece).unwrap();
        at += piece.len() as u64;
    }

    // One request per chunk, as when a chunk was one read: the first (the probe, unpinned)
    // and the others pinned, each asking for exactly its chunk.
    let log = server.log();
    let tag = etag("memory", SIZE, 0);
    let mut ranges: Vec<(u64, String)> = log
        .iter()
        .map(|r| {
            assert_eq!(r.status, 206);
            let range = r.range.clone().unwrap();
            let start = range[6..].split('-').next().unwrap().parse().unwrap();
            (start, range)
        })
        .collect();
    ranges.sort();
    let want: Vec<(u64, String)> = (0..SIZE / CHUNK)
        .map(|i| {
            (
                i * CHUNK,
                format!("bytes={}-{}", i * CHUNK, (i + 1) * CHUNK - 1),
            )
        })
        .collect();
    assert_eq!(ranges, want);
    assert_eq!(log[0].header("if-match"), None, "the probe is not pinned");
    assert!(
        log[1..]
            .iter()
            .all(|r| r.header("if-match") == Some(tag.as_str()))
    );
    assert_eq!(result.requests, SIZE / CHUNK);
    assert_eq!((result.size, result.downloaded), (SIZE, SIZE));
    assert_eq!(result.received_bytes, SIZE);
    assert!(server.max_in_flight() >= 4, "{}", server.max_in_flight());

    // While a chunk was one read into one buffer, the 7 chunks beside the probe's stream held
    // 7 x 8 MiB at once: growth of about 56 MiB. Now about a sub-read each.
    let bound = CHUNK * PARALLELISM / 4;
    assert!(growth < bound, "{growth} bytes (bound {bound})");
}
