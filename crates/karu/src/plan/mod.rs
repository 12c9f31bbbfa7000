//! The planner: a pure function from reads and a [`Policy`] to transfers (each with its parts)
//! and immediate failures. No threads, no I/O; of backends it only knows local or remote.
//!
//! Planning runs in three steps (spec §5.2): each read is validated on its own, the valid
//! reads are ordered by (backend, identity, `if_match`, absolute offset), and a linear sweep
//! merges neighbours of the same group while the four guards of the [`Policy`] hold.
//!
//! [`plan_cost`] adds a [`CostModel`] of the link: among merge gaps and piece sizes allowed by
//! the guards it keeps the plan with the smallest predicted batch time (see [`cost`]).

mod cheapest;
pub mod cost;
mod group;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::ops::Range;

use crate::error::{Error, Result, Status};
use crate::locator::{Locator, Window};

pub use cost::{CostModel, LinkEstimate, plan_cost};

/// How far the planner may merge reads into one transfer.
///
/// ```
/// let p = karu::plan::Policy::default();
/// assert_eq!((p.gap, p.limit, p.parts, p.amplification), (1 << 20, 64 << 20, 1024, 16));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The most bytes a remote transfer may skip between two reads; 0 disables merging
    /// entirely, even of overlapping reads. Local files never skip bytes.
    pub gap: u64,
    /// The largest span of a merged transfer. A single read larger than this is not split.
    pub limit: u64,
    /// The most reads in one transfer.
    pub parts: u64,
    /// The largest ratio of a transfer's span to its useful bytes (the sum of its reads'
    /// lengths, duplicates counted twice).
    pub amplification: u64,
}

impl Default for Policy {
    /// A 1 MiB gap, a 64 MiB span, 1024 parts and amplification 16.
    fn default() -> Policy {
        Policy {
            gap: 1 << 20,
            limit: 64 << 20,
            parts: 1024,
            amplification: 16,
        }
    }
}

/// Per-batch changes to a [`Policy`]; `None` inherits the policy's value.
///
/// ```
/// use karu::plan::{Overrides, Policy};
/// let o = Overrides { limit: Some(0), ..Overrides::default() };
/// let e = Policy::default().with(&o).unwrap_err();
/// assert_eq!(e.message(), "coalesce_limit must be at least 1");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Replaces [`Policy::gap`]; 0 disables merging.
    pub gap: Option<u64>,
    /// Replaces [`Policy::limit`]; must be at least 1.
    pub limit: Option<u64>,
    /// Replaces [`Policy::parts`]; must be at least 1 and fit in a `usize`.
    pub parts: Option<u64>,
    /// Replaces [`Policy::amplification`]; must be at least 1.
    pub amplification: Option<u64>,
    /// Replaces the client's `KARU_COALESCE_MODE` for this batch.
    pub mode: Option<Mode>,
}

/// How a batch is planned (`KARU_COALESCE_MODE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// The plan of smallest predicted time on the measured link (the default).
    #[default]
    Cost,
    /// The guards alone (the spec's planner). A caller that paces its own parallelism, as a
    /// reader that reads ahead does, gets the fewest requests the guards allow: the cost
    /// model would spend requests on parallelism the caller already has.
    Guards,
}

impl Policy {
    /// This policy with a batch's overrides applied. Out-of-range values are `Invalid`; no
    /// upper bounds are applied here (unlike configuration options).
    ///
    /// ```
    /// use karu::plan::{Overrides, Policy};
    /// let p = Policy::default().with(&Overrides { gap: Some(0), ..Overrides::default() }).unwrap();
    /// assert_eq!(p.gap, 0);
    /// assert_eq!(p.limit, Policy::default().limit);
    /// ```
    pub fn with(&self, o: &Overrides) -> Result<Policy> {
        let invalid = |message: &str| Err(Error::new(Status::Invalid, message));
        let mut p = *self;
        if let Some(gap) = o.gap {
            p.gap = gap;
        }
        if let Some(limit) = o.limit {
            if limit == 0 {
                return invalid("coalesce_limit must be at least 1");
            }
            p.limit = limit;
        }
        if let Some(parts) = o.parts {
            if parts == 0 || usize::try_from(parts).is_err() {
                return invalid("coalesce_parts is outside the supported range");
            }
            p.parts = parts;
        }
        if let Some(amplification) = o.amplification {
            if amplification == 0 {
                return invalid("coalesce_amplification must be at least 1");
            }
            p.amplification = amplification;
        }
        Ok(p)
    }
}

/// One read to plan.
///
/// ```
/// use karu::plan::{plan, Policy, Request};
/// let object = karu::Locator::parse("https://example.com/data.bin")?;
/// let reads = [
///     Request { locator: &object, offset: 0, length: 512, if_match: Some("\"v1\"") },
///     Request { locator: &object, offset: 512, length: 0, if_match: None }, // empty: invalid
/// ];
/// let planned = plan(&reads, &Policy::default());
/// assert_eq!(planned.transfers.len(), 1);
/// assert_eq!(planned.rejected[0].0, 1);
/// assert_eq!(planned.rejected[0].1.status(), karu::Status::Invalid);
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The object (and window) to read from.
    pub locator: &'a Locator,
    /// Offset relative to the locator's window.
    pub offset: u64,
    /// Number of bytes; nonzero and finite (not `u64::MAX`).
    pub length: u64,
    /// A strong ETag the object must still have. `Some("")` means no precondition, as `None`.
    pub if_match: Option<&'a str>,
}

/// One read inside a transfer.
///
/// ```
/// use karu::plan::{plan, Part, Policy, Request};
/// let object = karu::Locator::parse("https://example.com/data.bin#bytes=1000-")?;
/// let reads = [
///     Request { locator: &object, offset: 300, length: 100, if_match: None },
///     Request { locator: &object, offset: 0, length: 100, if_match: None },
/// ];
/// let planned = plan(&reads, &Policy::default());
/// // Parts are ordered by offset, with absolute offsets (the window starts at 1000).
/// assert_eq!(planned.parts_of(&planned.transfers[0]), [
///     Part { index: 1, offset: 1000, length: 100, skip: 0 },
///     Part { index: 0, offset: 1300, length: 100, skip: 0 },
/// ]);
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Index of the read in the request slice.
    pub index: usize,
    /// Absolute offset in the object.
    pub offset: u64,
    /// Number of bytes.
    pub length: u64,
    /// Bytes of the read before this part: 0 unless the read is split into pieces (only
    /// [`plan_cost`] splits), each piece a part of its own transfer. A split read is whole
    /// when all its pieces are.
    pub skip: u64,
}

/// One ranged request to a backend, serving one or more reads.
///
/// ```
/// use karu::plan::{plan, Policy, Request};
/// let object = karu::Locator::parse("https://example.com/data.bin")?;
/// let reads = [
///     Request { locator: &object, offset: 0, length: 100, if_match: None },
///     Request { locator: &object, offset: 150, length: 50, if_match: None },
/// ];
/// let planned = plan(&reads, &Policy::default());
/// let t = &planned.transfers[0];
/// assert_eq!((t.index, t.offset, t.length), (0, 0, 200)); // the 50-byte gap is fetched too
/// assert_eq!(planned.parts_of(t).len(), 2);
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Transfer {
    /// A read of this transfer (its first part): its locator and `if_match` serve the
    /// whole transfer, since all parts share backend, identity and `if_match`.
    pub index: usize,
    /// Absolute offset of the first byte.
    pub offset: u64,
    /// Number of bytes, from the first part's start to the furthest part end.
    pub length: u64,
    /// Where its reads are in the plan's [`Plan::parts`] (ordered by offset, then by index):
    /// see [`Plan::parts_of`]. One list for the whole plan, so that planning allocates per
    /// batch, not per transfer.
    pub parts: Range<usize>,
    /// Whether the object is remote (only remote transfers use a link).
    pub remote: bool,
}

/// The outcome of planning.
///
/// ```
/// use karu::plan::{plan, Overrides, Policy, Request};
/// let object = karu::Locator::parse("https://example.com/data.bin")?;
/// let reads = [
///     Request { locator: &object, offset: 0, length: 100, if_match: None },
///     Request { locator: &object, offset: 1000, length: 100, if_match: None },
/// ];
/// let merged = plan(&reads, &Policy::default());
/// assert_eq!(merged.transfers.len(), 1);
/// assert_eq!((merged.requested_bytes, merged.fetched_bytes()), (200, 1100)); // gap included
/// let no_gap = Policy::default().with(&Overrides { gap: Some(0), ..Overrides::default() })?;
/// let split = plan(&reads, &no_gap);
/// assert_eq!((split.transfers.len(), split.fetched_bytes()), (2, 200));
/// assert!(split.rejected.is_empty());
/// # Ok::<(), karu::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// Transfers ordered by (backend, identity, `if_match`, offset).
    pub transfers: Vec<Transfer>,
    /// Every transfer's reads, each transfer's a run of them ([`Transfer::parts`]).
    pub parts: Vec<Part>,
    /// Reads that fail before any I/O, each with its own error, in request order.
    pub rejected: Vec<(usize, Error)>,
    /// Sum of the lengths of the valid reads (saturating).
    pub requested_bytes: u64,
}

impl Plan {
    /// The reads of one of this plan's transfers.
    pub fn parts_of(&self, t: &Transfer) -> &[Part] {
        &self.parts[t.parts.clone()]
    }

    /// Sum of the transfer lengths: the bytes the transfers will fetch (saturating).
    pub fn fetched_bytes(&self) -> u64 {
        self.transfers
            .iter()
            .fold(0u64, |sum, t| sum.saturating_add(t.length))
    }
}

/// A valid read, reduced to what sorting and merging need.
#[derive(Clone, Copy, Default)]
struct Entry {
    offset: u64,
    length: u64,
    index: usize,
}

/// Plans reads into transfers under a policy.
///
/// Every read ends up either in exactly one transfer's parts or in `rejected`. Reads merge
/// only with reads of the same backend, identity and `if_match`; windows do not matter.
///
/// ```
/// use karu::plan::{plan, Overrides, Policy};
/// let policy = Policy::default().with(&Overrides::default())?;
/// let planned = plan(&[], &policy);
/// assert!(planned.transfers.is_empty() && planned.rejected.is_empty());
/// assert_eq!(planned.requested_bytes, 0);
/// # Ok::<(), karu::Error>(())
/// ```
///
/// With reads:
///
/// ```
/// use karu::plan::{plan, Policy, Request};
/// let object = karu::Locator::parse("https://example.com/data.bin").unwrap();
/// let reads: Vec<Request> = (0..4u64)
///     .map(|i| Request { locator: &object, offset: i * 4096, length: 4096, if_match: None })
///     .collect();
/// let planned = plan(&reads, &Policy::default());
/// assert_eq!(planned.transfers.len(), 1);
/// assert_eq!(planned.transfers[0].length, 16384);
/// ```
pub fn plan(requests: &[Request<'_>], policy: &Policy) -> Plan {
    let mut prepared = Prepared::new(requests);
    let mut transfers = Vec::new();
    let mut parts = Vec::with_capacity(prepared.entries.len());
    let mut spans = Vec::new();
    for (group, remote) in prepared.groups() {
        spans.clear();
        sweep(group, guards_gap(policy, remote), policy, &mut spans);
        transfers.extend(
            spans
                .iter()
                .map(|&s| transfer(group, s, remote, &mut parts)),
        );
    }
    Plan {
        transfers,
        parts,
        rejected: std::mem::take(&mut prepared.rejected),
        requested_bytes: prepared.requested_bytes,
    }
}

/// Valid reads sorted by group, then by offset, and the reads that failed validation.
struct Prepared {
    entries: Vec<Entry>,
    /// Group `r` is `entries[bounds[r]..bounds[r + 1]]`.
    bounds: Vec<usize>,
    remote: Vec<bool>,
    rejected: Vec<(usize, Error)>,
    requested_bytes: u64,
}

impl Prepared {
    /// Validates, groups and sorts.
    fn new(requests: &[Request<'_>]) -> Prepared {
        let mut rejected = Vec::new();
        let mut entries = Vec::with_capacity(requests.len());
        let mut groups = group::Groups::default();
        // The group of each entry, kept only once a second group shows up.
        let mut ids = Vec::new();
        let mut requested_bytes = 0u64;
        for (index, r) in requests.iter().enumerate() {
            let if_match = r.if_match.filter(|s| !s.is_empty());
            match validate(r, if_match) {
                Ok(offset) => {
                    let id = groups.id(r.locator, if_match);
                    if id != 0 && ids.is_empty() {
                        ids.resize(entries.len(), 0);
                    }
                    if !ids.is_empty() {
                        ids.push(id);
                    }
                    entries.push(Entry {
                        offset,
                        length: r.length,
                        index,
                    });
                    requested_bytes = requested_bytes.saturating_add(r.length);
                }
                Err(e) => rejected.push((index, e)),
            }
        }
        let order = groups.finish();
        let (mut entries, bounds) = order.partition(entries, &ids);
        for range in bounds.windows(2) {
            // The index makes keys unique, so ties keep request order.
            entries[range[0]..range[1]].sort_unstable_by_key(|e| (e.offset, e.index));
        }
        Prepared {
            entries,
            bounds,
            remote: order.remote,
            rejected,
            requested_bytes,
        }
    }

    /// Each group's sorted entries and whether it is remote.
    fn groups(&self) -> impl Iterator<Item = (&[Entry], bool)> {
        self.bounds
            .windows(2)
            .zip(&self.remote)
            .map(|(range, &remote)| (&self.entries[range[0]..range[1]], remote))
    }
}

/// The gap the guards plan merges across: `None` (no merging at all) when the policy's gap is
/// 0; local files never skip bytes.
fn guards_gap(policy: &Policy, remote: bool) -> Option<u64> {
    (policy.gap > 0).then_some(if remote { policy.gap } else { 0 })
}

/// Checks one read and returns its absolute offset.
fn validate(r: &Request<'_>, if_match: Option<&str>) -> Result<u64> {
    let l = r.locator;
    let fail = |status, what: &str| Err(Error::new(status, format!("{}: {what}", l.display())));
    let range = |what: &str| {
        fail(
            Status::Range,
            &format!("range [{}, +{}) {what}", r.offset, r.length),
        )
    };
    if r.length == 0 {
        return fail(Status::Invalid, "request is empty");
    }
    if r.length == u64::MAX {
        return fail(Status::Invalid, "request does not have a finite length");
    }
    if r.if_match
        .is_some_and(|s| s.bytes().any(|b| matches!(b, 0 | b'\r' | b'\n')))
    {
        return fail(Status::Invalid, "invalid ETag");
    }
    if if_match.is_some() && !l.is_remote() {
        return fail(
            Status::Unsupported,
            "ETag preconditions are not available for local files",
        );
    }
    let Window { offset, length } = l.window();
    if let Some(window) = length
        && (r.offset > window || r.length > window - r.offset)
    {
        return range("leaves the locator window");
    }
    let Some(absolute) = offset.checked_add(r.offset) else {
        return range("overflows its absolute offset");
    };
    if absolute.checked_add(r.length - 1).is_none() {
        return range("overflows its end offset");
    }
    Ok(absolute)
}

/// A run of sorted entries `from..to` merged into one transfer of bytes `[start, last]`.
#[derive(Clone, Copy, Debug)]
struct Span {
    from: usize,
    to: usize,
    start: u64,
    /// Inclusive: an exclusive end of the last byte of the object would overflow.
    last: u64,
}

impl Span {
    fn length(&self) -> u64 {
        self.last - self.start + 1
    }
}

/// The linear sweep over one group's sorted entries: extends the current span while the gap
/// (`None`: no merging, even of overlapping reads) and the other guards hold.
fn sweep(entries: &[Entry], gap: Option<u64>, policy: &Policy, spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < entries.len() {
        let mut open = Open::new(&entries[i], policy);
        let mut j = i + 1;
        if let Some(gap) = gap {
            for e in &entries[i + 1..] {
                if !open.joins(e, gap, policy) {
                    break;
                }
                open.join(e, policy);
                j += 1;
            }
        }
        spans.push(Span {
            from: i,
            to: j,
            start: open.start,
            last: open.last,
        });
        i = j;
    }
}

/// A span being merged: its first and last byte, its amplification budget (the bytes its
/// reads ask for times the guard, saturating: an overflowing budget passes, spec §5.2) and how
/// many reads it holds. The budget is kept multiplied out, so that testing a read costs a
/// 64-bit product rather than a 128-bit one: the cost planner tests every read under each of
/// up to a dozen gaps.
#[derive(Clone, Copy, Debug)]
struct Open {
    start: u64,
    last: u64,
    budget: u128,
    parts: u64,
}

impl Open {
    fn new(e: &Entry, policy: &Policy) -> Open {
        Open {
            start: e.offset,
            last: e.offset + (e.length - 1),
            budget: share(e, policy),
            parts: 1,
        }
    }

    /// Whether the next read (in offset order) joins the span under merge gap `gap` and the
    /// guards: within the gap, the span limit, the parts limit and the amplification budget.
    fn joins(&self, e: &Entry, gap: u64, policy: &Policy) -> bool {
        let end = self.last.max(e.offset + (e.length - 1));
        self.reaches(e, gap, policy)
            && u128::from(end - self.start) < self.budget.saturating_add(share(e, policy))
    }

    /// Whether the next read (in offset order) is within the gap, the span limit and the
    /// parts limit: every guard but amplification.
    fn reaches(&self, e: &Entry, gap: u64, policy: &Policy) -> bool {
        let end = self.last.max(e.offset + (e.length - 1));
        (e.offset <= self.last || e.offset - self.last - 1 <= gap)
            && end - self.start < policy.limit
            && self.parts < policy.parts
    }

    /// Whether the span keeps the amplification guard as it stands.
    fn amplified_within(&self) -> bool {
        u128::from(self.last - self.start) < self.budget
    }

    fn join(&mut self, e: &Entry, policy: &Policy) {
        self.last = self.last.max(e.offset + (e.length - 1));
        self.budget = self.budget.saturating_add(share(e, policy));
        self.parts += 1;
    }

    fn length(&self) -> u64 {
        self.last - self.start + 1
    }
}

/// A read's share of a span's amplification budget: its length times the guard (a 64-bit
/// product: it fits in 128 bits).
fn share(e: &Entry, policy: &Policy) -> u128 {
    u128::from(e.length) * u128::from(policy.amplification)
}

/// The transfer of one span of whole reads, its parts appended to `parts`.
fn transfer(entries: &[Entry], s: Span, remote: bool, parts: &mut Vec<Part>) -> Transfer {
    let first = parts.len();
    parts.extend(entries[s.from..s.to].iter().map(|e| Part {
        index: e.index,
        offset: e.offset,
        length: e.length,
        skip: 0,
    }));
    Transfer {
        remote,
        index: entries[s.from].index,
        offset: s.start,
        length: s.length(),
        parts: first..parts.len(),
    }
}
