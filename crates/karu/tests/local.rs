//! Local reads through the whole path: locator, planner, batch, file workers. Every byte is
//! checked against the deterministic content.

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use common::{client, read_all};
use karu::plan::Overrides;
use karu::{Client, Locator, Next, Read, Status};
use karu_testkit::content;

const NAME: &str = "local-object";
const SIZE: u64 = (3 << 20) + 123;

/// A deterministic file in a temp dir, kept for the life of the test.
struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    object: Locator,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.bin");
    content::write_file(&path, NAME, SIZE).unwrap();
    let object = Locator::parse(path.to_str().unwrap()).unwrap();
    Fixture {
        _dir: dir,
        path,
        object,
    }
}

#[test]
fn random_reads_return_exact_bytes() {
    let f = fixture();
    let c = client(&[]);
    let mut rng = 0x1234_5678u64;
    let mut spans = Vec::new();
    for _ in 0..2000 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let offset = (rng >> 20) % (SIZE - 70_000);
        let length = 1 + (rng >> 8) % 65_536;
        spans.push((offset, length));
    }
    let stats = read_all(&c, &f.object, NAME, &spans);
    assert!(stats.transfers <= 2000);
}

#[test]
fn overlapping_and_duplicate_reads_merge_and_each_gets_its_bytes() {
    let f = fixture();
    let c = client(&[]);
    let spans = [(100, 50), (120, 50), (120, 50), (170, 30), (5000, 10)];
    let reads = spans
        .iter()
        .enumerate()
        .map(|(i, &(o, l))| Read::new(&f.object, o, l).tag(i as u64))
        .collect();
    let batch = c.submit(reads).unwrap();
    for done in &batch {
        let (o, l) = spans[done.tag as usize];
        assert_eq!(done.got, l);
        content::check(NAME, o, done.bytes()).unwrap();
    }
    // Overlapping and touching local ranges merge; the far one does not (local gap is 0).
    assert_eq!(batch.stats().transfers, 2);
    // The merged span [100, 200) is read once.
    assert_eq!(batch.stats().received_bytes, 100 + 10);
}

#[test]
fn read_past_end_of_file_gives_range_with_valid_prefix() {
    let f = fixture();
    let c = client(&[]);
    let batch = c
        .submit(vec![
            Read::new(&f.object, SIZE - 100, 300).tag(1),
            Read::new(&f.object, SIZE + 10, 5).tag(2),
            Read::new(&f.object, SIZE - 300, 200).tag(3),
        ])
        .unwrap();
    for done in &batch {
        match done.tag {
            1 => {
                assert_eq!(done.status(), Status::Range);
                assert_eq!(done.got, 100);
                content::check(NAME, SIZE - 100, done.bytes()).unwrap();
            }
            2 => {
                assert_eq!(done.status(), Status::Range);
                assert_eq!(done.got, 0);
            }
            _ => {
                assert!(done.result.is_ok());
                content::check(NAME, SIZE - 300, done.bytes()).unwrap();
            }
        }
    }
}

/// No file holds bytes at or past 2^63 (`off_t`): such reads pass the end (`Range`), they are
/// not file errors (the kernel's EINVAL).
#[test]
fn reads_at_offsets_past_2_pow_63_are_range() {
    let f = fixture();
    let c = client(&[]);
    let far = 1u64 << 63;
    let window = Locator::parse(&format!("/vsisubfile/{far}_100,{}", f.path.display())).unwrap();
    let batch = c
        .submit(vec![
            Read::new(&f.object, far, 16).tag(1),
            Read::new(&f.object, far - 8, 16).tag(2),
            Read::new(&f.object, u64::MAX - 16, 16).tag(3),
            Read::new(&window, 0, 10).tag(4),
            Read::new(&f.object, 10, 20).tag(5),
        ])
        .unwrap();
    let mut seen = 0;
    for done in &batch {
        seen += 1;
        if done.tag == 5 {
            content::check(NAME, 10, done.bytes()).unwrap();
            continue;
        }
        assert_eq!(
            done.status(),
            Status::Range,
            "read {}: {:?}",
            done.tag,
            done.result
        );
        assert_eq!(done.got, 0);
    }
    assert_eq!(seen, 5);
    assert_eq!(
        c.read(&f.object, far, 1).unwrap_err().status(),
        Status::Range
    );
}

#[test]
fn merged_transfer_ending_early_fails_only_the_parts_past_the_end() {
    let f = fixture();
    let c = client(&[]);
    // Touching reads merge into one transfer that runs past the end of the file.
    let batch = c
        .submit(vec![
            Read::new(&f.object, SIZE - 200, 100).tag(1),
            Read::new(&f.object, SIZE - 100, 150).tag(2),
            Read::new(&f.object, SIZE + 50, 10).tag(3),
        ])
        .unwrap();
    let mut got = std::collections::BTreeMap::new();
    for done in &batch {
        got.insert(done.tag, (done.status(), done.got));
        if done.got > 0 {
            let off = if done.tag == 1 {
                SIZE - 200
            } else {
                SIZE - 100
            };
            content::check(NAME, off, done.bytes()).unwrap();
        }
    }
    assert_eq!(got[&1], (Status::Ok, 100));
    assert_eq!(got[&2], (Status::Range, 100));
    assert_eq!(got[&3], (Status::Range, 0));
}

#[test]
fn windows_translate_offsets_and_are_never_escaped() {
    let f = fixture();
    let c = client(&[]);
    let p = f.path.to_str().unwrap();
    let sub = Locator::parse(&format!("/vsisubfile/1000_5000,{p}")).unwrap();
    let frag = Locator::parse(&format!("{p}#bytes=2000-2999")).unwrap();
    assert_eq!(
        c.read(&sub, 10, 100).unwrap(),
        content::bytes(NAME, 1010, 100)
    );
    assert_eq!(
        c.read(&frag, 0, 1000).unwrap(),
        content::bytes(NAME, 2000, 1000)
    );
    let e = c.read(&frag, 900, 101).unwrap_err();
    assert_eq!(e.status(), Status::Range);
    assert!(e.message().contains("leaves the locator window"), "{e}");
    assert_eq!(c.size(&sub).unwrap(), 5000);
    assert_eq!(c.size(&f.object).unwrap(), SIZE);
    let open = Locator::parse(&format!("/vsisubfile/1000,{p}")).unwrap();
    assert_eq!(c.size(&open).unwrap(), SIZE - 1000);
    let info = c.stat(&open).unwrap();
    assert_eq!((info.size, info.etag), (SIZE - 1000, None));
}

#[test]
fn every_bad_read_gets_its_own_error_and_the_rest_complete() {
    let f = fixture();
    let c = client(&[]);
    let p = f.path.to_str().unwrap();
    let window = Locator::parse(&format!("{p}#bytes=0-99")).unwrap();
    let offset_window = Locator::parse(&format!("/vsisubfile/100,{p}")).unwrap();
    let missing = Locator::parse("/nonexistent/karu/file.bin").unwrap();
    let unsigned = Locator::parse("gs://bucket/key").unwrap();
    let reads = vec![
        Read::new(&f.object, 0, 0).tag(0),                         // empty
        Read::new(&f.object, 0, u64::MAX).tag(1),                  // unbounded
        Read::new(&offset_window, u64::MAX - 10, 5).tag(2),        // offset overflow
        Read::new(&f.object, u64::MAX - 10, 20).tag(3),            // end overflow
        Read::new(&window, 50, 51).tag(4),                         // window escape
        Read::new(&f.object, 0, 10).if_match("\"a\r\nb\"").tag(5), // CR/LF in ETag
        Read::new(&f.object, 0, 10).if_match("\"abc\"").tag(6),    // ETag on a local file
        Read::new(&missing, 0, 10).tag(7),                         // OS error
        Read::new(&unsigned, 0, 10).tag(8),                        // no credentials
        Read::new(&f.object, 12345, 678).tag(9),                   // fine
        Read::new(&f.object, 0, 10).if_match("\"a\0b\"").tag(10),  // NUL in ETag
    ];
    let batch = c.submit(reads).unwrap();
    let mut results = std::collections::BTreeMap::new();
    for done in &batch {
        if done.tag == 9 {
            content::check(NAME, 12345, done.bytes()).unwrap();
        }
        let msg = done.result.as_ref().err().map(|e| e.message().to_owned());
        results.insert(done.tag, (done.status(), msg.unwrap_or_default()));
    }
    let expect = [
        (0, Status::Invalid, "empty"),
        (1, Status::Invalid, "finite length"),
        (2, Status::Range, "overflows its absolute offset"),
        (3, Status::Range, "overflows its end offset"),
        (4, Status::Range, "leaves the locator window"),
        (5, Status::Invalid, "ETag"),
        (
            6,
            Status::Unsupported,
            "ETag preconditions are not available for local files",
        ),
        (7, Status::Io, "No such file or directory"),
        (8, Status::Credentials, "no GCS credentials"),
        (9, Status::Ok, ""),
        (10, Status::Invalid, "ETag"),
    ];
    assert_eq!(results.len(), expect.len());
    for (tag, status, text) in expect {
        let (s, m) = &results[&tag];
        assert_eq!(*s, status, "read {tag}: {m}");
        assert!(m.contains(text), "read {tag}: '{m}' lacks '{text}'");
    }
}

#[test]
fn bad_overrides_fail_the_submit() {
    let f = fixture();
    let c = client(&[]);
    let bad = Overrides {
        limit: Some(0),
        ..Overrides::default()
    };
    let e = c
        .submit_with(vec![Read::new(&f.object, 0, 1)], &bad)
        .unwrap_err();
    assert_eq!(e.status(), Status::Invalid);
    assert!(e.message().contains("coalesce_limit must be at least 1"));
}

#[test]
fn several_threads_drain_one_batch_each_completion_once_and_all_see_the_end() {
    let f = fixture();
    let c = client(&[]);
    let reads = (0..20_000u64)
        .map(|i| Read::new(&f.object, (i * 4099) % (SIZE - 64), 64).tag(i))
        .collect();
    let batch = Arc::new(c.submit(reads).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let b = Arc::clone(&batch);
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                loop {
                    match b.next_timeout(std::time::Duration::from_millis(50)) {
                        Next::Done(d) => {
                            content::check(NAME, (d.tag * 4099) % (SIZE - 64), d.bytes()).unwrap();
                            mine.push(d.tag);
                        }
                        Next::Timeout => {}
                        Next::End => return mine,
                    }
                }
            })
        })
        .collect();
    let mut all = HashSet::new();
    for h in handles {
        for t in h.join().unwrap() {
            assert!(all.insert(t), "tag {t} delivered twice");
        }
    }
    assert_eq!(all.len(), 20_000);
    assert!(matches!(
        batch.next_timeout(std::time::Duration::ZERO),
        Next::End
    ));
}

#[test]
fn owned_buffers_come_back_and_fetch_into_fills_borrowed_ones() {
    let f = fixture();
    let c = client(&[]);
    let buf = Vec::with_capacity(4096);
    let ptr = buf.as_ptr();
    let batch = c
        .submit(vec![Read::new(&f.object, 77, 4096).into_buffer(buf)])
        .unwrap();
    let done = batch.next().unwrap();
    let back = done.into_result().unwrap();
    assert_eq!(back.as_ptr(), ptr, "the caller's vector is reused");
    content::check(NAME, 77, &back).unwrap();

    let mut a = vec![0u8; 10_000];
    let mut b = vec![0u8; 3];
    c.fetch_into(vec![
        (&f.object, 5, &mut a[..]),
        (&f.object, SIZE - 3, &mut b[..]),
    ])
    .unwrap();
    content::check(NAME, 5, &a).unwrap();
    content::check(NAME, SIZE - 3, &b).unwrap();
}

#[test]
fn fetch_returns_buffers_in_order_or_the_first_failure() {
    let f = fixture();
    let c = client(&[]);
    let bufs = c
        .fetch(vec![
            Read::new(&f.object, 9, 99),
            Read::new(&f.object, 1, 11),
        ])
        .unwrap();
    content::check(NAME, 9, &bufs[0]).unwrap();
    content::check(NAME, 1, &bufs[1]).unwrap();
    let e = c
        .fetch(vec![
            Read::new(&f.object, 0, 8),
            Read::new(&f.object, SIZE, 1),
        ])
        .unwrap_err();
    assert_eq!(e.status(), Status::Range);
}

#[test]
fn dropping_a_batch_mid_flight_returns_promptly() {
    let f = fixture();
    let c = client(&[]);
    let reads: Vec<_> = (0..200_000u64)
        .map(|i| Read::new(&f.object, (i * 7919) % (SIZE - 4096), 4096).tag(i))
        .collect();
    let batch = c.submit(reads).unwrap();
    let _ = batch.next();
    let t = std::time::Instant::now();
    drop(batch);
    // Generous: cancellation waits only for the chunk each worker holds.
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    // The client still works afterwards.
    content::check(NAME, 3, &c.read(&f.object, 3, 30).unwrap()).unwrap();
}

#[test]
fn read_ends_of_a_local_file_and_window() {
    let f = fixture();
    let c = client(&[]);
    let ends = c.read_ends(&f.object, 1000, 500).unwrap();
    assert_eq!(ends.info.size, SIZE);
    content::check(NAME, 0, &ends.head).unwrap();
    content::check(NAME, SIZE - 500, &ends.tail).unwrap();
    let p = f.path.to_str().unwrap();
    let w = Locator::parse(&format!("{p}#bytes=100-199")).unwrap();
    let ends = c.read_ends(&w, 1000, 30).unwrap();
    assert_eq!(ends.head, content::bytes(NAME, 100, 100));
    assert_eq!(ends.tail, content::bytes(NAME, 170, 30));
    let past = Locator::parse(&format!("/vsisubfile/{}_100,{p}", SIZE - 10)).unwrap();
    assert_eq!(
        c.read_ends(&past, 100, 0).unwrap_err().status(),
        Status::Range
    );
}

#[test]
fn async_twins_complete_without_blocking_a_thread() {
    let f = fixture();
    let c = client(&[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let data = c.read_async(&f.object, 100, 1000).await.unwrap();
        content::check(NAME, 100, &data).unwrap();
        let all = c
            .fetch_async(
                (0..100)
                    .map(|i| Read::new(&f.object, i * 1000, 10))
                    .collect(),
            )
            .await
            .unwrap();
        for (i, d) in all.iter().enumerate() {
            content::check(NAME, i as u64 * 1000, d).unwrap();
        }
        assert_eq!(c.size_async(&f.object).await.unwrap(), SIZE);
    });
}

#[test]
fn empty_batch_ends_at_once() {
    let c = client(&[]);
    let batch = c.submit(Vec::new()).unwrap();
    assert!(matches!(
        batch.next_timeout(std::time::Duration::ZERO),
        Next::End
    ));
}

#[test]
fn client_is_send_sync_clone() {
    fn is<T: Send + Sync + Clone>() {}
    is::<Client>();
}

#[test]
fn completions_stream_for_async_consumers() {
    use std::future::poll_fn;
    use std::pin::Pin;
    let f = fixture();
    let c = client(&[]);
    let reads = (0..300u64)
        .map(|i| Read::new(&f.object, i * 1000, 100).tag(i))
        .collect();
    let batch = c.submit(reads).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let tags = rt.block_on(async {
        let mut stream = batch.stream();
        let mut tags = Vec::new();
        while let Some(d) =
            poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut stream), cx)).await
        {
            content::check(NAME, d.tag * 1000, d.bytes()).unwrap();
            tags.push(d.tag);
        }
        tags
    });
    let mut tags = tags;
    tags.sort();
    assert_eq!(tags, (0..300).collect::<Vec<_>>());
}
