//! Reads whose buffers cannot be allocated fail alone with `NoMem` instead of aborting the
//! process or panicking an IO loop; the reads beside them still return every byte.

mod common;

use common::{client, object};
use karu::{Client, Completion, Locator, Read, Status};
use karu_testkit::content;
use karu_testkit::server::RangeServer;

const NAME: &str = "no-memory";
const SIZE: u64 = 100_000;

/// More than this machine can allocate under the kernel's default overcommit rule, but a
/// valid read: where the allocation does succeed (overcommit always), the read must then end
/// at the object's end with `Range` and its exact prefix.
const HUGE: u64 = 1 << 40;

/// Past what any allocator accepts (over `isize::MAX`): always `NoMem`.
const IMPOSSIBLE: u64 = 1 << 63;

fn by_tag(client: &Client, reads: Vec<Read>) -> Vec<Completion> {
    let batch = client.submit(reads).unwrap();
    let mut all: Vec<Completion> = batch.collect();
    all.sort_by_key(|d| d.tag);
    all
}

/// A `NoMem` read, or (allocation granted) the whole object as a `Range` prefix.
fn no_mem_or_whole_prefix(done: &Completion, name: &str) {
    match done.status() {
        Status::NoMem => {
            assert_eq!(done.got, 0);
            assert!(done.buffer.is_none(), "no buffer was allocated");
        }
        Status::Range => {
            assert_eq!(done.got, SIZE);
            content::check(name, 0, done.bytes()).unwrap();
        }
        other => panic!("unexpected {other:?}: {:?}", done.result),
    }
}

/// The same batch against any object holding `name`'s content of `SIZE` bytes.
fn too_large_reads_fail_alone(c: &Client, l: &Locator, name: &str) {
    let done = by_tag(
        c,
        vec![
            Read::new(l, 0, IMPOSSIBLE).tag(1),
            Read::new(l, 0, HUGE).tag(2),
            Read::new(l, 0, IMPOSSIBLE)
                .into_buffer(vec![7, 7, 7])
                .tag(3),
            Read::new(l, 100, 5000).tag(4),
            Read::new(l, SIZE - 10, 10).tag(5),
        ],
    );
    assert_eq!(done.len(), 5);
    assert_eq!(done[0].status(), Status::NoMem, "{:?}", done[0].result);
    assert_eq!((done[0].got, done[0].buffer.is_none()), (0, true));
    assert!(
        done[0]
            .result
            .as_ref()
            .unwrap_err()
            .message()
            .contains("allocate")
    );
    no_mem_or_whole_prefix(&done[1], name);
    assert_eq!(done[2].status(), Status::NoMem);
    assert_eq!(
        done[2].buffer.as_deref(),
        Some(&[7u8, 7, 7][..]),
        "the caller's vector comes back"
    );
    for (d, offset) in [(&done[3], 100), (&done[4], SIZE - 10)] {
        assert!(d.result.is_ok(), "{:?}", d.result);
        content::check(name, offset, d.bytes()).unwrap();
    }
    // The blocking read of the issue: an error, not an abort.
    match c.read(l, 0, HUGE) {
        Err(e) => assert!(matches!(e.status(), Status::NoMem | Status::Range), "{e}"),
        Ok(b) => panic!("{} bytes from a {SIZE}-byte object", b.len()),
    }
    assert_eq!(
        c.read(l, 0, IMPOSSIBLE).unwrap_err().status(),
        Status::NoMem
    );
}

#[test]
fn local_reads_too_large_to_allocate_fail_alone_with_no_mem() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.bin");
    content::write_file(&path, NAME, SIZE).unwrap();
    let l = Locator::parse(path.to_str().unwrap()).unwrap();
    too_large_reads_fail_alone(&client(&[]), &l, NAME);
    // Without merging too (each read its own transfer).
    too_large_reads_fail_alone(&client(&[("KARU_COALESCE_GAP", "0")]), &l, NAME);
    // A window longer than memory: its ends are clamped to the window, then cannot be had.
    let window = Locator::parse(&format!("/vsisubfile/0_{IMPOSSIBLE},{}", path.display())).unwrap();
    let e = client(&[]).read_ends(&window, u64::MAX, 0).unwrap_err();
    assert_eq!(e.status(), Status::NoMem, "{e}");
}

#[test]
fn remote_reads_too_large_to_allocate_fail_alone_with_no_mem() {
    let server = RangeServer::start();
    let l = object(&server, &format!("/ok/{NAME}?size={SIZE}"));
    too_large_reads_fail_alone(&client(&[]), &l, NAME);
}

#[test]
fn read_ends_with_a_head_too_large_to_allocate_is_no_mem() {
    let server = RangeServer::start();
    let c = client(&[]);
    let l = object(&server, &format!("/ok/{NAME}?size={SIZE}"));
    for head in [u64::MAX, IMPOSSIBLE] {
        let e = c.read_ends(&l, head, 16).unwrap_err();
        assert_eq!(e.status(), Status::NoMem, "{e}");
        assert!(e.message().starts_with(&server.url("")), "{e}");
    }
    match c.read_ends(&l, HUGE, 16) {
        Err(e) => assert_eq!(e.status(), Status::NoMem, "{e}"),
        Ok(ends) => {
            assert_eq!(ends.head, content::bytes(NAME, 0, SIZE as usize));
            assert_eq!(ends.tail, content::bytes(NAME, SIZE - 16, 16));
        }
    }
    // The loop that served those is still alive and reads as before.
    let ends = c.read_ends(&l, 1000, 16).unwrap();
    assert_eq!(ends.head, content::bytes(NAME, 0, 1000));
    assert_eq!(ends.tail, content::bytes(NAME, SIZE - 16, 16));
    // A bounded window longer than memory: its head is clamped to the window, then refused.
    let window = Locator::parse(&format!(
        "/vsisubfile/0_{IMPOSSIBLE},{}",
        server.url(&format!("/ok/{NAME}?size={SIZE}"))
    ))
    .unwrap();
    assert_eq!(
        c.read_ends(&window, u64::MAX, 0).unwrap_err().status(),
        Status::NoMem
    );
}
