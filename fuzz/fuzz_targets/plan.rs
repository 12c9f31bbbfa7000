//! Planner invariants over arbitrary reads, windows and policies: every read is either
//! rejected (only for bad input, with the status an independent check expects) or is exactly
//! one part of exactly one transfer; each transfer covers its parts exactly; reads of
//! different objects or preconditions never share a transfer; the four guards (gap, limit,
//! parts, amplification) hold for every merged transfer.
#![no_main]

use karu::plan::{Overrides, Policy, Request, plan};
use karu::{Locator, Status, fuzzing};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

/// Objects reads may address: two remote, one local, each possibly with two identities.
const OBJECTS: [&str; 4] = [
    "s3://bucket/a",
    "s3://bucket/b",
    "https://example.com/c",
    "/data/d",
];
const ETAGS: [Option<&str>; 5] = [None, Some(""), Some("\"a\""), Some("\"b\""), Some("c\n")];

#[derive(Arbitrary, Debug)]
struct Object {
    which: u8,
    offset: u64,
    length: Option<u64>,
}

#[derive(Arbitrary, Debug)]
struct Read {
    object: u8,
    offset: u64,
    length: u64,
    etag: u8,
}

#[derive(Arbitrary, Debug)]
struct Input {
    objects: [Object; 4],
    reads: Vec<Read>,
    gap: Option<u64>,
    limit: Option<u64>,
    parts: Option<u64>,
    amplification: Option<u64>,
}

/// Wide-arithmetic statement of validity: the absolute offset, or the failure's status.
fn expected(r: &Request<'_>) -> Result<u64, Status> {
    let etag = r.if_match.filter(|s| !s.is_empty());
    if r.length == 0 || r.length == u64::MAX {
        return Err(Status::Invalid);
    }
    if etag.is_some_and(|s| s.contains(['\0', '\r', '\n'])) {
        return Err(Status::Invalid);
    }
    if etag.is_some() && !r.locator.is_remote() {
        return Err(Status::Unsupported);
    }
    let (offset, length) = (u128::from(r.offset), u128::from(r.length));
    if r.locator
        .window_length()
        .is_some_and(|w| offset + length > u128::from(w))
    {
        return Err(Status::Range);
    }
    let absolute = u128::from(r.locator.window_offset()) + offset;
    if absolute + length - 1 > u128::from(u64::MAX) {
        return Err(Status::Range);
    }
    Ok(absolute as u64)
}

fn key<'a>(r: &Request<'a>) -> (karu::Backend, &'a str, Option<&'a str>) {
    (
        r.locator.backend(),
        r.locator.identity(),
        r.if_match.filter(|s| !s.is_empty()),
    )
}

fuzz_target!(|input: Input| {
    if input.reads.len() > 4096 {
        return;
    }
    let overrides = Overrides {
        gap: input.gap,
        limit: input.limit,
        parts: input.parts,
        amplification: input.amplification,
        mode: None,
    };
    let policy = match Policy::default().with(&overrides) {
        Ok(p) => p,
        Err(e) => {
            // Only out-of-range values are refused.
            assert_eq!(e.status(), Status::Invalid);
            assert!(
                overrides.limit == Some(0)
                    || overrides.parts == Some(0)
                    || overrides.amplification == Some(0)
                    || overrides.parts.is_some_and(|p| usize::try_from(p).is_err()),
                "{overrides:?} refused: {e:?}"
            );
            return;
        }
    };
    let locators: Vec<Locator> = input
        .objects
        .iter()
        .map(|o| {
            let uri = OBJECTS[usize::from(o.which) % OBJECTS.len()];
            fuzzing::locator_with_window(uri, o.offset, o.length).expect("fixed URIs parse")
        })
        .collect();
    let requests: Vec<Request<'_>> = input
        .reads
        .iter()
        .map(|r| Request {
            locator: &locators[usize::from(r.object) % locators.len()],
            offset: r.offset,
            length: r.length,
            if_match: ETAGS[usize::from(r.etag) % ETAGS.len()],
        })
        .collect();

    let planned = plan(&requests, &policy);
    let mut seen = vec![0u32; requests.len()];
    let mut requested = 0u64;
    for (index, e) in &planned.rejected {
        seen[*index] += 1;
        assert_eq!(expected(&requests[*index]).err(), Some(e.status()), "{e:?}");
    }
    assert!(planned.rejected.windows(2).all(|w| w[0].0 < w[1].0));
    // Each transfer's parts are the next run of the plan's, and together they are all of them.
    let mut next = 0;
    for t in &planned.transfers {
        assert_eq!(t.parts.start, next, "{t:?}");
        next = t.parts.end;
        let parts = planned.parts_of(t);
        assert!(!parts.is_empty());
        assert_eq!(t.index, parts[0].index);
        assert_eq!(t.offset, parts[0].offset);
        assert!(
            parts
                .windows(2)
                .all(|w| (w[0].offset, w[0].index) < (w[1].offset, w[1].index))
        );
        let first = &requests[t.index];
        let remote = first.locator.is_remote();
        let mut end = 0u128;
        let mut useful = 0u128;
        for p in parts {
            let r = &requests[p.index];
            seen[p.index] += 1;
            requested = requested.saturating_add(r.length);
            assert_eq!(key(r), key(first), "different groups share {t:?}");
            assert_eq!(Ok(p.offset), expected(r), "{t:?}");
            assert_eq!(p.length, r.length);
            let part_end = u128::from(p.offset) + u128::from(p.length);
            assert!(p.offset >= t.offset);
            assert!(part_end <= u128::from(t.offset) + u128::from(t.length));
            if end > 0 {
                let gap = u128::from(p.offset).saturating_sub(end);
                let allowed = if remote { policy.gap } else { 0 };
                assert!(gap <= u128::from(allowed), "gap {gap} in {t:?}");
            }
            end = end.max(part_end);
            useful += u128::from(p.length);
        }
        // Exact coverage: the transfer ends where its furthest part ends.
        assert_eq!(u128::from(t.offset) + u128::from(t.length), end, "{t:?}");
        if parts.len() > 1 {
            assert!(policy.gap > 0);
            assert!(t.length <= policy.limit);
            assert!(parts.len() as u64 <= policy.parts);
            let budget = useful.checked_mul(u128::from(policy.amplification));
            assert!(budget.is_none_or(|b| u128::from(t.length) <= b), "{t:?}");
        }
    }
    assert_eq!(next, planned.parts.len());
    assert!(
        seen.iter().all(|&n| n == 1),
        "reads not planned exactly once"
    );
    assert_eq!(planned.requested_bytes, requested);
    assert_eq!(
        planned,
        plan(&requests, &policy),
        "planning is not deterministic"
    );
});
