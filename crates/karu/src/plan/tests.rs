use super::*;
use crate::locator::Backend;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

pub(super) fn locator(
    backend: Backend,
    identity: &str,
    offset: u64,
    length: Option<u64>,
) -> Locator {
    Locator::from_parts(
        backend,
        identity.to_owned(),
        identity.to_owned(),
        String::new(),
        String::new(),
        Window { offset, length },
    )
}

fn remote(identity: &str) -> Locator {
    locator(Backend::Http, identity, 0, None)
}

fn local(path: &str) -> Locator {
    locator(Backend::File, path, 0, None)
}

fn read(locator: &Locator, offset: u64, length: u64) -> Request<'_> {
    Request {
        locator,
        offset,
        length,
        if_match: None,
    }
}

fn etag<'a>(r: Request<'a>, tag: &'a str) -> Request<'a> {
    Request {
        if_match: Some(tag),
        ..r
    }
}

fn policy(gap: u64, limit: u64, parts: u64, amplification: u64) -> Policy {
    Policy {
        gap,
        limit,
        parts,
        amplification,
    }
}

/// The parts' request indices of each transfer.
fn shape(p: &Plan) -> Vec<Vec<usize>> {
    p.transfers
        .iter()
        .map(|t| p.parts_of(t).iter().map(|part| part.index).collect())
        .collect()
}

fn only_error(requests: &[Request<'_>]) -> Error {
    let p = plan(requests, &Policy::default());
    assert!(p.transfers.is_empty());
    assert_eq!(p.rejected.len(), 1);
    p.rejected[0].1.clone()
}

fn assert_error(e: Error, status: Status, message: &str) {
    assert_eq!((e.status(), e.message()), (status, message));
}

#[test]
fn validation_messages() {
    let h = remote("https://h/x");
    let f = local("/tmp/x");
    let win = locator(Backend::S3, "/vsis3/b/k", 100, Some(10));
    let high = locator(Backend::Http, "https://h/y", u64::MAX - 5, None);
    let cases: Vec<(Request<'_>, Status, &str)> = vec![
        (
            read(&h, 0, 0),
            Status::Invalid,
            "https://h/x: request is empty",
        ),
        (
            read(&h, 0, u64::MAX),
            Status::Invalid,
            "https://h/x: request does not have a finite length",
        ),
        (
            etag(read(&h, 0, 1), "a\0b"),
            Status::Invalid,
            "https://h/x: invalid ETag",
        ),
        (
            etag(read(&h, 0, 1), "a\rb"),
            Status::Invalid,
            "https://h/x: invalid ETag",
        ),
        (
            etag(read(&h, 0, 1), "\"a\"\n"),
            Status::Invalid,
            "https://h/x: invalid ETag",
        ),
        (
            etag(read(&f, 0, 1), "\"a\""),
            Status::Unsupported,
            "/tmp/x: ETag preconditions are not available for local files",
        ),
        (
            read(&win, 11, 1),
            Status::Range,
            "/vsis3/b/k: range [11, +1) leaves the locator window",
        ),
        (
            read(&win, 10, 1),
            Status::Range,
            "/vsis3/b/k: range [10, +1) leaves the locator window",
        ),
        (
            read(&win, 5, 6),
            Status::Range,
            "/vsis3/b/k: range [5, +6) leaves the locator window",
        ),
        (
            read(&high, 6, 1),
            Status::Range,
            "https://h/y: range [6, +1) overflows its absolute offset",
        ),
        (
            read(&high, 2, 5),
            Status::Range,
            "https://h/y: range [2, +5) overflows its end offset",
        ),
    ];
    for (r, status, message) in cases {
        assert_error(only_error(&[r]), status, message);
    }
    // The last bytes of a window, and of the offset space, are readable.
    for r in [read(&win, 5, 5), read(&win, 0, 10), read(&high, 2, 4)] {
        let p = plan(&[r], &Policy::default());
        assert!(p.rejected.is_empty(), "{:?}", p.rejected);
    }
}

#[test]
fn validation_order_puts_arguments_before_locator_rules() {
    let f = local("/tmp/x");
    let r = Request {
        if_match: Some("e"),
        ..read(&f, 0, 0)
    };
    assert_error(
        only_error(&[r]),
        Status::Invalid,
        "/tmp/x: request is empty",
    );
    let win = locator(Backend::File, "/tmp/w", 0, Some(4));
    let r = Request {
        if_match: Some("e"),
        ..read(&win, 9, 1)
    };
    assert_eq!(only_error(&[r]).status(), Status::Unsupported);
}

#[test]
fn empty_if_match_is_no_precondition() {
    let f = local("/tmp/x");
    let h = remote("https://h/x");
    let p = plan(
        &[
            Request {
                if_match: Some(""),
                ..read(&f, 0, 4)
            },
            Request {
                if_match: Some(""),
                ..read(&h, 0, 4)
            },
            read(&h, 4, 4),
        ],
        &Policy::default(),
    );
    assert!(p.rejected.is_empty());
    assert_eq!(shape(&p), vec![vec![0], vec![1, 2]]);
}

#[test]
fn failing_reads_do_not_stop_the_others() {
    let h = remote("https://h/x");
    let p = plan(
        &[read(&h, 0, 10), read(&h, 10, 0), read(&h, 10, 10)],
        &Policy::default(),
    );
    assert_eq!(shape(&p), vec![vec![0, 2]]);
    assert_eq!(p.rejected.len(), 1);
    assert_eq!(p.rejected[0].0, 1);
    assert_eq!(p.requested_bytes, 20);
}

#[test]
fn gap_guard_is_inclusive_for_remote_and_zero_for_local() {
    let h = remote("https://h/x");
    let f = local("/tmp/x");
    let p = policy(100, u64::MAX, 1024, u64::MAX);
    // 100 bytes strictly between the reads merge; 101 do not.
    assert_eq!(
        shape(&plan(&[read(&h, 0, 10), read(&h, 110, 10)], &p)),
        vec![vec![0, 1]]
    );
    assert_eq!(
        shape(&plan(&[read(&h, 0, 10), read(&h, 111, 10)], &p)),
        vec![vec![0], vec![1]]
    );
    // Local files merge touching and overlapping reads only.
    assert_eq!(
        shape(&plan(
            &[read(&f, 0, 10), read(&f, 10, 10), read(&f, 5, 20)],
            &p
        )),
        vec![vec![0, 2, 1]]
    );
    assert_eq!(
        shape(&plan(&[read(&f, 0, 10), read(&f, 11, 10)], &p)),
        vec![vec![0], vec![1]]
    );
}

#[test]
fn gap_zero_disables_merging_even_of_overlaps() {
    for l in [remote("https://h/x"), local("/tmp/x")] {
        let p = plan(
            &[
                read(&l, 0, 10),
                read(&l, 0, 10),
                read(&l, 5, 10),
                read(&l, 10, 1),
            ],
            &policy(0, u64::MAX, 1024, u64::MAX),
        );
        assert_eq!(shape(&p), vec![vec![0], vec![1], vec![2], vec![3]]);
    }
}

#[test]
fn limit_guard() {
    let h = remote("https://h/x");
    let reads = [read(&h, 0, 10), read(&h, 20, 10)];
    assert_eq!(
        shape(&plan(&reads, &policy(100, 30, 1024, 16))),
        vec![vec![0, 1]]
    );
    assert_eq!(
        shape(&plan(&reads, &policy(100, 29, 1024, 16))),
        vec![vec![0], vec![1]]
    );
    // A read larger than the limit is neither split nor merged.
    let big = [read(&h, 0, 100), read(&h, 100, 1), read(&h, 101, 1)];
    let p = plan(&big, &policy(100, 10, 1024, 16));
    assert_eq!(shape(&p), vec![vec![0], vec![1, 2]]);
    assert_eq!((p.transfers[0].offset, p.transfers[0].length), (0, 100));
}

#[test]
fn parts_guard() {
    let h = remote("https://h/x");
    let reads: Vec<_> = (0..5).map(|i| read(&h, i * 10, 10)).collect();
    let p = plan(&reads, &policy(100, u64::MAX, 2, 16));
    assert_eq!(shape(&p), vec![vec![0, 1], vec![2, 3], vec![4]]);
    let p = plan(&reads, &policy(100, u64::MAX, 1, 16));
    assert_eq!(p.transfers.len(), 5);
}

#[test]
fn amplification_guard_counts_duplicates_and_passes_on_overflow() {
    let h = remote("https://h/x");
    // Span 40 for 20 useful bytes: amplification 2 passes, 1 does not.
    let reads = [read(&h, 0, 10), read(&h, 30, 10)];
    assert_eq!(
        shape(&plan(&reads, &policy(100, 1000, 1024, 2))),
        vec![vec![0, 1]]
    );
    assert_eq!(
        shape(&plan(&reads, &policy(100, 1000, 1024, 1))),
        vec![vec![0], vec![1]]
    );
    // A duplicate adds useful bytes: span 40 for 30 useful bytes fits amplification 2
    // only because the duplicate counts.
    let reads = [
        read(&h, 0, 10),
        read(&h, 0, 10),
        read(&h, 30, 10),
        read(&h, 30, 10),
    ];
    let p = plan(&reads, &policy(100, 1000, 1024, 1));
    assert_eq!(shape(&p), vec![vec![0, 1], vec![2, 3]]);
    assert_eq!(p.fetched_bytes(), 20);
    // useful × amplification overflows 64 bits: the guard passes.
    let reads = [read(&h, 0, 1 << 62), read(&h, 1 << 62, 1 << 62)];
    let p = plan(&reads, &policy(1, u64::MAX, 1024, u64::MAX));
    assert_eq!(shape(&p), vec![vec![0, 1]]);
    assert_eq!(p.transfers[0].length, 1 << 63);
}

#[test]
fn groups_by_identity_and_if_match_not_by_window_or_pointer() {
    let a = remote("https://h/a");
    let a_again = remote("https://h/a");
    let a_window = locator(Backend::Http, "https://h/a", 100, Some(50));
    let b = remote("https://h/b");
    let reads = [
        read(&b, 0, 10),
        read(&a, 0, 10),
        read(&a_again, 10, 10),
        read(&a_window, 0, 10), // absolute 100
        etag(read(&a, 20, 10), "\"1\""),
        etag(read(&a, 30, 10), "\"2\""),
        etag(read(&a_again, 40, 10), "\"1\""),
    ];
    let p = plan(&reads, &Policy::default());
    // Order: identity, then if_match (None first), then offset.
    assert_eq!(shape(&p), vec![vec![1, 2, 3], vec![4, 6], vec![5], vec![0]]);
    assert_eq!(p.parts_of(&p.transfers[0])[2].offset, 100);
    assert_eq!((p.transfers[0].offset, p.transfers[0].length), (0, 110));
    assert_eq!((p.transfers[1].offset, p.transfers[1].length), (20, 30));
    assert_eq!(p.requested_bytes, 70);
}

#[test]
fn backends_with_equal_identity_do_not_merge() {
    let f = local("x");
    let h = remote("x");
    let p = plan(&[read(&h, 0, 10), read(&f, 10, 10)], &Policy::default());
    assert_eq!(shape(&p), vec![vec![1], vec![0]]);
}

#[test]
fn parts_are_in_offset_order_and_the_first_serves() {
    let h = remote("https://h/x");
    let reads = [
        read(&h, 50, 10),
        read(&h, 0, 10),
        read(&h, 20, 5),
        read(&h, 0, 10),
    ];
    let p = plan(&reads, &Policy::default());
    assert_eq!(shape(&p), vec![vec![1, 3, 2, 0]]);
    let t = &p.transfers[0];
    assert_eq!((t.index, t.offset, t.length), (1, 0, 60));
    assert_eq!(
        p.parts_of(t)[2],
        Part {
            index: 2,
            offset: 20,
            length: 5,
            skip: 0
        }
    );
}

#[test]
fn overrides() {
    let base = policy(7, 8, 9, 10);
    let invalid = |o: Overrides, message: &str| {
        let e = base.with(&o).unwrap_err();
        assert_error(e, Status::Invalid, message);
    };
    let none = Overrides::default();
    assert_eq!(base.with(&none).unwrap(), base);
    invalid(
        Overrides {
            limit: Some(0),
            ..none
        },
        "coalesce_limit must be at least 1",
    );
    invalid(
        Overrides {
            parts: Some(0),
            ..none
        },
        "coalesce_parts is outside the supported range",
    );
    invalid(
        Overrides {
            amplification: Some(0),
            ..none
        },
        "coalesce_amplification must be at least 1",
    );
    if usize::BITS < 64 {
        let parts = Some(usize::MAX as u64 + 1);
        invalid(
            Overrides { parts, ..none },
            "coalesce_parts is outside the supported range",
        );
    }
    let all = Overrides {
        gap: Some(0),
        limit: Some(1),
        parts: Some(usize::MAX as u64),
        amplification: Some(u64::MAX),
        mode: None,
    };
    assert_eq!(
        base.with(&all).unwrap(),
        policy(0, 1, usize::MAX as u64, u64::MAX)
    );
    let gap = Overrides {
        gap: Some(0),
        ..none
    };
    assert_eq!(base.with(&gap).unwrap(), policy(0, 8, 9, 10));
}

/// The published figures of spec §8: 1000 reads of 64 KiB on an HTTPS locator.
#[test]
fn benchmark_patterns_give_the_published_figures() {
    let h = remote("https://example.com/data.bin");
    let policies = [
        ("defaults", Policy::default()),
        (
            "16 MiB amp 4",
            Policy {
                limit: 16 * MIB,
                amplification: 4,
                ..Policy::default()
            },
        ),
        (
            "gap 0",
            Policy {
                gap: 0,
                ..Policy::default()
            },
        ),
    ];
    let expected = [
        ("contiguous", 64 * KIB, "defaults", 1, "1.00"),
        ("alternating", 128 * KIB, "defaults", 2, "2.00"),
        ("alternating", 128 * KIB, "16 MiB amp 4", 8, "1.99"),
        ("sparse", MIB, "defaults", 16, "15.76"),
        ("sparse", MIB, "16 MiB amp 4", 1000, "1.00"),
        ("contiguous", 64 * KIB, "gap 0", 1000, "1.00"),
        ("alternating", 128 * KIB, "gap 0", 1000, "1.00"),
        ("sparse", MIB, "gap 0", 1000, "1.00"),
    ];
    for (pattern, stride, name, transfers, ratio) in expected {
        let reads: Vec<_> = (0..1000).map(|i| read(&h, i * stride, 64 * KIB)).collect();
        let policy = policies.iter().find(|p| p.0 == name).unwrap().1;
        let p = plan(&reads, &policy);
        let got = p.fetched_bytes() as f64 / p.requested_bytes as f64;
        assert_eq!(
            (p.transfers.len(), format!("{got:.2}")),
            (transfers, ratio.to_owned()),
            "{pattern} under {name}"
        );
    }
}
