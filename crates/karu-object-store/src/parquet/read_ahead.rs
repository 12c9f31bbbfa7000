//! Reading ahead of a sequential scan. Parquet's async reader asks for one row group's column
//! chunks at a time and decodes them before it asks for the next, so a scan waits a round trip
//! per row group while the link idles. Once two row groups in a row were asked for with the
//! same whole column chunks, the next ones' same chunks are sent for before they are asked,
//! up to a depth and a byte budget; a request that breaks the pattern drops what it would not
//! use. Page-level requests (a row selection with an offset index) are never predicted: their
//! ranges depend on the selection, and whole chunks would fetch more than they need.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use parquet::file::metadata::ParquetMetaData;

/// Column chunks of a row group: which row group, and which of its columns (ascending).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Chunks {
    pub(crate) row_group: usize,
    pub(crate) columns: Vec<usize>,
}

/// Every column chunk's byte range, sorted by start, to find a request's row group quickly.
#[derive(Debug)]
pub(crate) struct Layout {
    /// (start, end, row group, column), by start.
    chunks: Vec<(u64, u64, usize, usize)>,
    /// Each row group's column ranges, by column.
    groups: Vec<Vec<Range<u64>>>,
}

impl Layout {
    pub(crate) fn new(meta: &ParquetMetaData) -> Layout {
        Layout::from_groups(
            meta.row_groups()
                .iter()
                .map(|g| {
                    g.columns()
                        .iter()
                        .map(|c| {
                            let (start, len) = c.byte_range();
                            start..start.saturating_add(len)
                        })
                        .collect()
                })
                .collect(),
        )
    }

    /// From each row group's column ranges, by column.
    fn from_groups(groups: Vec<Vec<Range<u64>>>) -> Layout {
        let mut chunks: Vec<_> = groups
            .iter()
            .enumerate()
            .flat_map(|(g, cols)| {
                cols.iter()
                    .enumerate()
                    .map(move |(c, r)| (r.start, r.end, g, c))
            })
            .collect();
        chunks.sort_unstable();
        Layout { chunks, groups }
    }

    /// The row group and columns of `ranges` when each is one whole column chunk of the same
    /// row group; `None` for anything else.
    pub(crate) fn whole_chunks(&self, ranges: &[Range<u64>]) -> Option<Chunks> {
        let mut row_group = None;
        let mut columns = Vec::with_capacity(ranges.len());
        for r in ranges {
            let at = self.chunks.partition_point(|c| c.0 < r.start);
            let &(start, end, g, c) = self.chunks.get(at)?;
            if (start, end) != (r.start, r.end) || *row_group.get_or_insert(g) != g {
                return None;
            }
            columns.push(c);
        }
        columns.sort_unstable();
        columns.dedup();
        Some(Chunks {
            row_group: row_group?,
            columns,
        })
    }

    /// The byte ranges of `chunks`, by column.
    pub(crate) fn ranges(&self, chunks: &Chunks) -> Option<Vec<Range<u64>>> {
        let group = self.groups.get(chunks.row_group)?;
        chunks
            .columns
            .iter()
            .map(|&c| group.get(c).cloned())
            .collect()
    }
}

/// Column chunks sent for before they were asked: in flight, or arrived.
pub(crate) struct Ahead<B> {
    pub(crate) chunks: Chunks,
    pub(crate) ranges: Vec<Range<u64>>,
    /// What carries them (a karu batch), taken when they are asked for.
    pub(crate) fetch: B,
}

impl<B> Ahead<B> {
    fn bytes(&self) -> u64 {
        bytes(&self.ranges)
    }
}

/// The bytes `ranges` cover, saturating: the ranges come from a file's metadata, and a
/// crafted one must exceed the budget, not overflow.
fn bytes(ranges: &[Range<u64>]) -> u64 {
    ranges
        .iter()
        .fold(0, |n, r| n.saturating_add(r.end.saturating_sub(r.start)))
}

/// The prediction and what it sent for. `B` is what carries a read-ahead's bytes.
pub(crate) struct ReadAhead<B> {
    depth: usize,
    budget: u64,
    layout: Option<Arc<Layout>>,
    /// The last row group asked for with each column set (a scan with a row filter asks for
    /// its filter's columns and then its projection's, so two patterns interleave).
    last: Vec<Chunks>,
    ahead: Vec<Ahead<B>>,
}

/// How many column sets are remembered.
const PATTERNS: usize = 4;

impl<B> ReadAhead<B> {
    pub(crate) fn new(depth: usize, budget: u64) -> ReadAhead<B> {
        ReadAhead {
            depth,
            budget,
            layout: None,
            last: Vec::new(),
            ahead: Vec::new(),
        }
    }

    /// Sets the depth (row groups ahead; 0 turns reading ahead off) and the byte budget.
    pub(crate) fn configure(&mut self, depth: usize, budget: u64) {
        self.depth = depth;
        self.budget = budget;
        self.ahead.clear();
    }

    /// The same settings and layout, with nothing sent for (a reader's clone).
    pub(crate) fn fresh(&self) -> ReadAhead<B> {
        ReadAhead {
            layout: self.layout.clone(),
            ..ReadAhead::new(self.depth, self.budget)
        }
    }

    pub(crate) fn set_layout(&mut self, layout: Layout) {
        self.layout = Some(Arc::new(layout));
        self.last.clear();
        self.ahead.clear();
    }

    /// A request for `ranges`: what was sent for it ahead, if anything, and the row groups to
    /// send for now (their chunks and ranges), which the caller sends and hands to
    /// [`ReadAhead::sent`]. Read-aheads the request shows will not be asked for are dropped.
    #[allow(clippy::type_complexity)]
    pub(crate) fn asked(
        &mut self,
        ranges: &[Range<u64>],
    ) -> (Option<Ahead<B>>, Vec<(Chunks, Vec<Range<u64>>)>) {
        let Some(layout) = self.layout.clone().filter(|_| self.depth > 0) else {
            return (None, Vec::new());
        };
        let Some(asked) = layout.whole_chunks(ranges) else {
            return (None, Vec::new());
        };
        // The reader goes forward: read-aheads behind this row group will not be asked for
        // now (those of this row group with other columns still may, with a row filter).
        let taken = self
            .ahead
            .iter()
            .position(|a| a.chunks == asked)
            .map(|i| self.ahead.swap_remove(i));
        self.ahead.retain(|a| a.chunks.row_group >= asked.row_group);
        let previous = self.last.iter().position(|c| c.columns == asked.columns);
        let sequential = previous.is_some_and(|i| self.last[i].row_group + 1 == asked.row_group);
        match previous {
            Some(i) => self.last[i] = asked.clone(),
            None => {
                if self.last.len() == PATTERNS {
                    self.last.remove(0);
                }
                self.last.push(asked.clone());
            }
        }
        let mut send = Vec::new();
        if sequential {
            let mut held: u64 = self.ahead.iter().map(Ahead::bytes).sum();
            for row_group in asked.row_group + 1..=asked.row_group.saturating_add(self.depth) {
                let next = Chunks {
                    row_group,
                    columns: asked.columns.clone(),
                };
                if self.ahead.iter().any(|a| a.chunks == next) {
                    continue;
                }
                let Some(ranges) = layout.ranges(&next) else {
                    break; // past the last row group
                };
                let more = bytes(&ranges);
                if held.saturating_add(more) > self.budget {
                    break;
                }
                held += more;
                send.push((next, ranges));
            }
        }
        (taken, send)
    }

    /// A read-ahead the caller sent for.
    pub(crate) fn sent(&mut self, ahead: Ahead<B>) {
        self.ahead.push(ahead);
    }
}

impl<B> std::fmt::Debug for ReadAhead<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadAhead")
            .field("depth", &self.depth)
            .field("budget", &self.budget)
            .field(
                "ahead",
                &self.ahead.iter().map(|a| &a.chunks).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The bytes of `ranges`, each inside one of `chunks` (their ranges and bytes).
pub(crate) fn slices(ranges: &[Range<u64>], chunks: &[(Range<u64>, Bytes)]) -> Option<Vec<Bytes>> {
    ranges
        .iter()
        .map(|r| {
            let (c, bytes) = chunks
                .iter()
                .find(|(c, _)| c.start <= r.start && r.end <= c.end)?;
            let at = (r.start - c.start) as usize;
            let len = (r.end - r.start) as usize;
            (at + len <= bytes.len()).then(|| bytes.slice(at..at + len))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // a request of one range, not a range of values
mod tests {
    use super::*;

    /// Four row groups of two columns, 100 bytes each, back to back from byte 4.
    fn layout() -> Layout {
        Layout::from_groups((0..4).map(|g| group(g, &[0, 1])).collect())
    }

    fn ahead(depth: usize, budget: u64) -> ReadAhead<()> {
        let mut r = ReadAhead::new(depth, budget);
        r.layout = Some(Arc::new(layout()));
        r
    }

    fn group(g: u64, cols: &[u64]) -> Vec<Range<u64>> {
        cols.iter()
            .map(|c| 4 + (g * 2 + c) * 100..4 + (g * 2 + c + 1) * 100)
            .collect()
    }

    /// Asks for `ranges`, sends what it says, and returns (was it ahead, row groups sent).
    fn ask(r: &mut ReadAhead<()>, ranges: &[Range<u64>]) -> (bool, Vec<usize>) {
        let (taken, send) = r.asked(ranges);
        let sent = send.iter().map(|(c, _)| c.row_group).collect();
        for (chunks, ranges) in send {
            r.sent(Ahead {
                chunks,
                ranges,
                fetch: (),
            });
        }
        (taken.is_some(), sent)
    }

    #[test]
    fn whole_chunks_of_one_row_group_only() {
        let l = layout();
        let c = l.whole_chunks(&group(1, &[1, 0])).unwrap();
        assert_eq!((c.row_group, c.columns), (1, vec![0, 1]));
        // Part of a chunk, a span of two, chunks of two row groups, a range past the end.
        assert!(l.whole_chunks(&[104..150]).is_none());
        assert!(l.whole_chunks(&[104..304]).is_none());
        assert!(
            l.whole_chunks(&[group(0, &[0]), group(1, &[0])].concat())
                .is_none()
        );
        assert!(l.whole_chunks(&[804..904]).is_none());
    }

    #[test]
    fn a_scan_is_read_ahead_from_its_second_row_group() {
        let mut r = ahead(2, u64::MAX);
        assert_eq!(ask(&mut r, &group(0, &[0, 1])), (false, vec![]));
        assert_eq!(ask(&mut r, &group(1, &[0, 1])), (false, vec![2, 3]));
        assert_eq!(ask(&mut r, &group(2, &[0, 1])), (true, vec![]));
        assert_eq!(ask(&mut r, &group(3, &[0, 1])), (true, vec![]));
    }

    #[test]
    fn skipping_row_groups_or_changing_columns_predicts_nothing() {
        let mut r = ahead(2, u64::MAX);
        ask(&mut r, &group(0, &[1]));
        assert_eq!(ask(&mut r, &group(2, &[1])), (false, vec![]));
        let mut r = ahead(2, u64::MAX);
        ask(&mut r, &group(0, &[0]));
        assert_eq!(ask(&mut r, &group(1, &[1])), (false, vec![]));
    }

    #[test]
    fn a_request_past_a_read_ahead_drops_it() {
        let mut r = ahead(1, u64::MAX);
        ask(&mut r, &group(0, &[0]));
        assert_eq!(ask(&mut r, &group(1, &[0])), (false, vec![2]));
        // Column 1 of row group 2 (a row filter's columns, say): the read-ahead of column 0
        // stays, and so it does when row group 0 is asked for again.
        ask(&mut r, &group(2, &[1]));
        assert_eq!(r.ahead.len(), 1);
        ask(&mut r, &group(0, &[0]));
        assert_eq!(r.ahead.len(), 1);
        let mut r = ahead(1, u64::MAX);
        ask(&mut r, &group(0, &[0]));
        ask(&mut r, &group(1, &[0]));
        ask(&mut r, &group(0, &[1]));
        assert_eq!(r.ahead.len(), 1);
        // Anything of a row group past it: row group 2's read-ahead is dropped.
        let mut r = ahead(1, u64::MAX);
        ask(&mut r, &group(0, &[0]));
        ask(&mut r, &group(1, &[0]));
        let (_, _) = r.asked(&group(3, &[1]));
        assert!(r.ahead.is_empty());
    }

    #[test]
    fn the_budget_and_the_depth_bound_what_is_sent() {
        // One row group's two chunks are 200 bytes.
        let mut r = ahead(5, 199);
        ask(&mut r, &group(0, &[0, 1]));
        assert_eq!(ask(&mut r, &group(1, &[0, 1])), (false, vec![]));
        let mut r = ahead(5, 399);
        ask(&mut r, &group(0, &[0, 1]));
        assert_eq!(ask(&mut r, &group(1, &[0, 1])), (false, vec![2]));
        // Row group 2 arrived and is handed over: room for row group 3.
        assert_eq!(ask(&mut r, &group(2, &[0, 1])), (true, vec![3]));
        let mut r = ahead(0, u64::MAX);
        ask(&mut r, &group(0, &[0]));
        assert_eq!(ask(&mut r, &group(1, &[0])), (false, vec![]));
    }

    #[test]
    fn an_unbounded_depth_and_chunks_past_u64_overflow_nothing() {
        // The layout is the file's metadata: a crafted one may claim chunks whose sizes
        // sum past u64, and the caller may ask for any depth.
        let mut groups: Vec<_> = (0..2).map(|g| group(g, &[0, 1])).collect();
        groups.push(vec![404..u64::MAX, 405..u64::MAX]);
        let mut r = ReadAhead::new(usize::MAX, u64::MAX - 1);
        r.layout = Some(Arc::new(Layout::from_groups(groups)));
        ask(&mut r, &group(0, &[0, 1]));
        assert_eq!(ask(&mut r, &group(1, &[0, 1])), (false, vec![]));
    }

    #[test]
    fn slices_come_from_the_chunk_that_holds_them() {
        let chunks = vec![(10..20, Bytes::from_static(b"0123456789"))];
        assert_eq!(
            slices(&[12..15, 10..20], &chunks).unwrap(),
            [
                Bytes::from_static(b"234"),
                Bytes::from_static(b"0123456789")
            ]
        );
        assert!(slices(&[15..25], &chunks).is_none());
    }
}
