//! Planner invariants over random reads, locators and policies.

use proptest::prelude::*;

use super::tests::locator;
use super::*;
use crate::locator::Backend;

const ETAGS: [Option<&str>; 5] = [None, Some(""), Some("\"a\""), Some("\"b\""), Some("c\n")];

/// (backend is remote, identity, window offset, window length)
type LocatorSpec = (bool, u8, u64, Option<u64>);
/// (locator, offset, length, etag)
type ReadSpec = (usize, u64, u64, usize);

fn locator_spec() -> impl Strategy<Value = LocatorSpec> {
    let window_offset = prop_oneof![4 => Just(0u64), 2 => 0..50u64, 1 => Just(u64::MAX - 100)];
    let window_length = prop_oneof![3 => Just(None), 2 => (0..150u64).prop_map(Some)];
    (any::<bool>(), 0..2u8, window_offset, window_length)
}

fn read_spec() -> impl Strategy<Value = ReadSpec> {
    let offset = prop_oneof![20 => 0..300u64, 1 => Just(u64::MAX - 50)];
    let length = prop_oneof![
        1 => Just(0u64),
        20 => 1..40u64,
        2 => 40..400u64,
        1 => Just(u64::MAX),
        1 => Just(u64::MAX / 2),
    ];
    let etag = prop_oneof![6 => Just(0usize), 1 => 1..ETAGS.len()];
    (0..4usize, offset, length, etag)
}

fn policy_strategy() -> impl Strategy<Value = Policy> {
    let gap = prop_oneof![1 => Just(0u64), 4 => 1..60u64, 1 => Just(u64::MAX)];
    let limit = prop_oneof![4 => 1..400u64, 1 => Just(u64::MAX)];
    let parts = prop_oneof![4 => 1..6u64, 1 => Just(u64::MAX)];
    let amplification = prop_oneof![4 => 1..6u64, 1 => Just(u64::MAX)];
    (gap, limit, parts, amplification).prop_map(|(gap, limit, parts, amplification)| Policy {
        gap,
        limit,
        parts,
        amplification,
    })
}

/// An independent statement of validity (with wide arithmetic): the absolute offset or the
/// status of the failure.
fn expected(r: &Request<'_>) -> std::result::Result<u64, Status> {
    let etag = r.if_match.filter(|s| !s.is_empty());
    if r.length == 0 || r.length == u64::MAX {
        return Err(Status::Invalid);
    }
    if etag.is_some_and(|s| s.contains(['\0', '\r', '\n'])) {
        return Err(Status::Invalid);
    }
    if etag.is_some() && r.locator.backend() == Backend::File {
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

fn key<'a>(r: &Request<'a>) -> (Backend, &'a str, Option<&'a str>) {
    let l: &'a Locator = r.locator;
    (
        l.backend(),
        l.identity(),
        r.if_match.filter(|s| !s.is_empty()),
    )
}

/// Whether a read may join a transfer under the policy's four guards.
fn fits(t: &Transfer, parts: &[Part], p: &Part, remote: bool, policy: &Policy) -> bool {
    let end = u128::from(t.offset) + u128::from(t.length); // exclusive
    let start = u128::from(p.offset);
    let gap = start.saturating_sub(end);
    let allowed = if remote { policy.gap } else { 0 };
    let span = end.max(start + u128::from(p.length)) - u128::from(t.offset);
    let useful: u128 =
        parts.iter().map(|q| u128::from(q.length)).sum::<u128>() + u128::from(p.length);
    policy.gap > 0
        && gap <= u128::from(allowed)
        && span <= u128::from(policy.limit)
        && (parts.len() as u64) < policy.parts
        && useful
            .checked_mul(u128::from(policy.amplification))
            .is_none_or(|budget| span <= budget)
}

/// Whether the transfers' runs of parts follow one another and cover the plan's parts.
fn contiguous(planned: &Plan) -> bool {
    let mut next = 0;
    for t in &planned.transfers {
        if t.parts.start != next {
            return false;
        }
        next = t.parts.end;
    }
    next == planned.parts.len()
}

fn check(requests: &[Request<'_>], policy: &Policy) -> std::result::Result<(), TestCaseError> {
    let planned = plan(requests, policy);
    prop_assert_eq!(
        &planned,
        &plan(requests, policy),
        "planning is not deterministic"
    );

    let mut seen = vec![0usize; requests.len()];
    let mut requested = 0u64;
    for (index, e) in &planned.rejected {
        seen[*index] += 1;
        prop_assert_eq!(expected(&requests[*index]).err(), Some(e.status()));
        prop_assert!(
            e.message()
                .starts_with(requests[*index].locator.display().as_str())
        );
    }
    prop_assert!(planned.rejected.windows(2).all(|w| w[0].0 < w[1].0));

    prop_assert!(contiguous(&planned));
    for t in &planned.transfers {
        let parts = planned.parts_of(t);
        prop_assert!(!parts.is_empty());
        let first = &requests[parts[0].index];
        prop_assert_eq!(t.index, parts[0].index);
        prop_assert!(
            parts
                .windows(2)
                .all(|w| (w[0].offset, w[0].index) < (w[1].offset, w[1].index))
        );
        let mut end = 0u128;
        let mut useful = 0u128;
        for p in parts {
            let r = &requests[p.index];
            seen[p.index] += 1;
            requested = requested.saturating_add(r.length);
            prop_assert_eq!(
                key(r),
                key(first),
                "reads of different groups share a transfer"
            );
            prop_assert_eq!(Ok(p.offset), expected(r));
            prop_assert_eq!(p.length, r.length);
            let part_end = u128::from(p.offset) + u128::from(p.length);
            prop_assert!(p.offset >= t.offset);
            prop_assert!(part_end <= u128::from(t.offset) + u128::from(t.length));
            if end > 0 {
                let gap = u128::from(p.offset).saturating_sub(end);
                let allowed = if first.locator.is_remote() {
                    policy.gap
                } else {
                    0
                };
                prop_assert!(gap <= u128::from(allowed), "gap {} in {:?}", gap, t);
            }
            end = end.max(part_end);
            useful += u128::from(p.length);
        }
        prop_assert_eq!(t.offset, parts[0].offset);
        prop_assert_eq!(u128::from(t.offset) + u128::from(t.length), end);
        if parts.len() > 1 {
            prop_assert!(policy.gap > 0);
            prop_assert!(t.length <= policy.limit);
            prop_assert!(parts.len() as u64 <= policy.parts);
            let budget = useful.checked_mul(u128::from(policy.amplification));
            prop_assert!(budget.is_none_or(|b| u128::from(t.length) <= b));
        }
    }
    prop_assert!(
        seen.iter().all(|&n| n == 1),
        "reads not planned exactly once: {:?}",
        seen
    );
    prop_assert_eq!(planned.requested_bytes, requested);

    // Transfers come in (group, offset) order, and the sweep is greedy: a transfer ends only
    // where the next read of its group breaks a guard.
    for w in planned.transfers.windows(2) {
        let (a, b) = (&requests[w[0].index], &requests[w[1].index]);
        prop_assert!((key(a), w[0].offset) <= (key(b), w[1].offset));
        if key(a) == key(b) {
            let next = &planned.parts_of(&w[1])[0];
            let parts = planned.parts_of(&w[0]);
            prop_assert!(!fits(&w[0], parts, next, a.locator.is_remote(), policy));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn plan_invariants(
        specs in prop::collection::vec(locator_spec(), 4),
        reads in prop::collection::vec(read_spec(), 0..40),
        policy in policy_strategy(),
    ) {
        let locators: Vec<Locator> = specs
            .iter()
            .map(|&(remote, id, offset, length)| {
                let backend = if remote { Backend::S3 } else { Backend::File };
                locator(backend, &format!("object{id}"), offset, length)
            })
            .collect();
        let requests: Vec<Request<'_>> = reads
            .iter()
            .map(|&(l, offset, length, etag)| Request {
                locator: &locators[l],
                offset,
                length,
                if_match: ETAGS[etag],
            })
            .collect();
        check(&requests, &policy)?;
    }
}

fn model_strategy() -> impl Strategy<Value = CostModel> {
    let rate = prop_oneof![1 => 1..1000u64, 3 => 1000..20_000_000_000u64];
    let strategy = (0..100_000u64, 0..1000u64, rate.clone(), rate, 1..128u32);
    (strategy, any::<bool>()).prop_map(
        |((rtt_us, per_request_us, connection_rate, total_rate, concurrency), total_known)| {
            CostModel {
                rtt: std::time::Duration::from_micros(rtt_us),
                per_request: std::time::Duration::from_micros(per_request_us),
                connection_rate,
                total_rate,
                concurrency,
                max_transfer: None,
                total_known,
            }
        },
    )
}

/// The cost plan serves every valid read exactly once (whole, or in pieces that tile it),
/// keeps the guards as ceilings, and is predicted no slower than the guards plan or the plan
/// without merging.
fn check_cost(
    requests: &[Request<'_>],
    policy: &Policy,
    model: &CostModel,
) -> std::result::Result<(), TestCaseError> {
    let planned = plan_cost(requests, policy, model);
    let guards = plan(requests, policy);
    let no_merge = plan(requests, &Policy { gap: 0, ..*policy });
    prop_assert_eq!(&planned, &plan_cost(requests, policy, model));
    prop_assert!(model.predict(&planned) <= model.predict(&guards));
    prop_assert!(model.predict(&planned) <= model.predict(&no_merge));
    prop_assert_eq!(&planned.rejected, &guards.rejected);
    prop_assert_eq!(planned.requested_bytes, guards.requested_bytes);

    // (skip, length, offset) of every part of each read.
    let mut pieces: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); requests.len()];
    prop_assert!(contiguous(&planned));
    for t in &planned.transfers {
        let parts = planned.parts_of(t);
        prop_assert!(!parts.is_empty());
        prop_assert_eq!(t.index, parts[0].index);
        prop_assert_eq!(t.offset, parts[0].offset);
        let first = &requests[t.index];
        let mut end = 0u128;
        let mut useful = 0u128;
        for p in parts {
            prop_assert_eq!(key(&requests[p.index]), key(first));
            prop_assert!(p.offset >= t.offset && p.length > 0);
            if end > 0 {
                let gap = u128::from(p.offset).saturating_sub(end);
                prop_assert!(policy.gap > 0 && gap <= u128::from(policy.gap));
            }
            end = end.max(u128::from(p.offset) + u128::from(p.length));
            useful += u128::from(p.length);
            pieces[p.index].push((p.skip, p.length, p.offset));
        }
        prop_assert_eq!(u128::from(t.offset) + u128::from(t.length), end);
        if parts.len() > 1 {
            prop_assert!(t.length <= policy.limit);
            prop_assert!(parts.len() as u64 <= policy.parts);
            let budget = useful.checked_mul(u128::from(policy.amplification));
            prop_assert!(budget.is_none_or(|b| u128::from(t.length) <= b));
            prop_assert!(parts.iter().all(|p| p.skip == 0));
        }
        if !first.locator.is_remote() {
            prop_assert!(parts.iter().all(|p| p.skip == 0));
        }
    }
    for (i, r) in requests.iter().enumerate() {
        let mut mine = std::mem::take(&mut pieces[i]);
        match expected(r) {
            Err(_) => prop_assert!(mine.is_empty()),
            Ok(start) => {
                mine.sort_unstable();
                let mut next = 0u64;
                for (skip, length, offset) in mine {
                    prop_assert_eq!(skip, next, "read {} is not tiled", i);
                    prop_assert_eq!(offset, start + skip);
                    next += length;
                }
                prop_assert_eq!(next, r.length);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn cost_plan_invariants(
        specs in prop::collection::vec(locator_spec(), 4),
        reads in prop::collection::vec(read_spec(), 0..40),
        policy in policy_strategy(),
        model in model_strategy(),
    ) {
        let locators: Vec<Locator> = specs
            .iter()
            .map(|&(remote, id, offset, length)| {
                let backend = if remote { Backend::S3 } else { Backend::File };
                locator(backend, &format!("object{id}"), offset, length)
            })
            .collect();
        let requests: Vec<Request<'_>> = reads
            .iter()
            .map(|&(l, offset, length, etag)| Request {
                locator: &locators[l],
                offset,
                length,
                if_match: ETAGS[etag],
            })
            .collect();
        check_cost(&requests, &policy, &model)?;
    }

    /// Byte-sized reads on realistic objects, where merging and splitting both pay.
    #[test]
    fn cost_plans_of_large_reads(
        reads in prop::collection::vec((0..1u64 << 30, 1..16u64 << 20), 1..60),
        policy in policy_strategy(),
        model in model_strategy(),
    ) {
        let object = locator(Backend::Http, "big", 0, None);
        let requests: Vec<Request<'_>> = reads
            .iter()
            .map(|&(offset, length)| Request { locator: &object, offset, length, if_match: None })
            .collect();
        let policy = Policy {
            gap: policy.gap << 16,
            limit: policy.limit << 20,
            ..policy
        };
        check_cost(&requests, &policy, &model)?;
    }
}
