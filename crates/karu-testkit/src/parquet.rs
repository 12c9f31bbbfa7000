//! The Parquet file of the adapter's tests and of the benchmark's workload P (feature
//! `parquet`): [`ROW_GROUPS`] row groups × 10 columns of mixed types, every value a function
//! of its row and column, written by `parquet`'s `ArrowWriter`; and a [`Summary`] (rows and a
//! checksum) to check what a reader decoded against what was written.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Float32Array, Float64Array, Int16Array, Int32Array,
    Int64Array, RecordBatch, StringArray,
};
use parquet::arrow::ArrowWriter;

/// Row groups in the file.
pub const ROW_GROUPS: u64 = 20;
/// Rows per row group of the full-size file (about 50 MB in all).
pub const ROWS: u64 = 27_000;
/// The projection read: two columns far apart (more than 1 MiB between them in each row group
/// of the full-size file), `id` and `text`.
pub const COLUMNS: [usize; 2] = [0, 8];
/// The row groups of the projection.
pub const SELECTED: [usize; 5] = [1, 4, 7, 12, 19];

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A deterministic 64-bit value for (row, column).
fn h(row: u64, col: u64) -> u64 {
    mix(row.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ col.wrapping_mul(0xD1B5_4A32_D192_ED03))
}

/// Column 8's (`text`) value for a row: 0 to 40 characters.
pub fn text(row: u64) -> String {
    let v = h(row, 8);
    format!("{v:016x}{v:016x}{v:08x}")[..(v % 41) as usize].to_owned()
}

/// Row group `g` of a file with `rows` rows per group; column 0 (`id`) is the row's number.
pub fn row_group(g: u64, rows: u64) -> RecordBatch {
    let range = g * rows..(g + 1) * rows;
    let col = |c: u64| range.clone().map(move |r| h(r, c));
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(
                range.clone().map(|r| r as i64),
            )),
        ),
        (
            "f64",
            Arc::new(Float64Array::from_iter_values(
                col(1).map(|v| v as f64 / 7.0),
            )),
        ),
        (
            "name",
            Arc::new(StringArray::from_iter_values(
                col(2).map(|v| format!("{v:016x}")),
            )),
        ),
        (
            "i32",
            Arc::new(Int32Array::from_iter_values(col(3).map(|v| v as i32))),
        ),
        (
            "flag",
            Arc::new(BooleanArray::from_iter(col(4).map(|v| Some(v & 1 == 1)))),
        ),
        (
            "blob",
            Arc::new(BinaryArray::from_iter_values(
                col(5).map(|v| v.to_le_bytes()[..6].repeat(2)),
            )),
        ),
        (
            "f32",
            Arc::new(Float32Array::from_iter_values(col(6).map(|v| v as f32))),
        ),
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(col(7).map(|v| v as i64))),
        ),
        (
            "text",
            Arc::new(StringArray::from_iter_values(range.clone().map(text))),
        ),
        (
            "i16",
            Arc::new(Int16Array::from_iter_values(col(9).map(|v| v as i16))),
        ),
    ];
    RecordBatch::try_from_iter(columns).expect("columns of equal length")
}

/// The file's bytes: [`ROW_GROUPS`] groups of `rows` rows, one row group per group.
pub fn file(rows: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut writer =
        ArrowWriter::try_new(&mut out, row_group(0, rows).schema(), None).expect("a writer");
    for g in 0..ROW_GROUPS {
        writer.write(&row_group(g, rows)).expect("a row group");
        writer.flush().expect("a flush"); // one row group per batch
    }
    writer.close().expect("the footer");
    out
}

/// Rows decoded and a checksum of their values, which does not depend on how the rows are cut
/// into batches (a sum of one hash per value, keyed by the column's name).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Rows seen.
    pub rows: u64,
    /// The checksum of every value seen.
    pub checksum: u64,
}

impl Summary {
    /// Adds the rows of `batch`.
    pub fn add(&mut self, batch: &RecordBatch) {
        self.rows += batch.num_rows() as u64;
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            let key = mix(fnv(field.name().as_bytes()));
            self.checksum = self.checksum.wrapping_add(column_sum(column, key));
        }
    }

    /// What a reader of the file with `rows` rows per group must find reading the columns
    /// `columns` (all if none) of the row groups `groups` (all if none).
    pub fn expected(rows: u64, columns: Option<&[usize]>, groups: Option<&[usize]>) -> Summary {
        let all: Vec<usize> = (0..ROW_GROUPS as usize).collect();
        let mut s = Summary::default();
        for &g in groups.unwrap_or(&all) {
            let batch = row_group(g as u64, rows);
            match columns {
                Some(c) => s.add(&batch.project(c).expect("columns of the file")),
                None => s.add(&batch),
            }
        }
        s
    }
}

/// FNV-1a.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The sum of one hash per value of `column` (and its null count, which the file has none of).
fn column_sum(column: &ArrayRef, key: u64) -> u64 {
    let any = column.as_any();
    let mut sum = column.null_count() as u64;
    let mut add = |bytes: &[u8]| sum = sum.wrapping_add(mix(fnv(bytes) ^ key));
    if let Some(a) = any.downcast_ref::<Int64Array>() {
        a.values().iter().for_each(|v| add(&v.to_le_bytes()));
    } else if let Some(a) = any.downcast_ref::<Int32Array>() {
        a.values().iter().for_each(|v| add(&v.to_le_bytes()));
    } else if let Some(a) = any.downcast_ref::<Int16Array>() {
        a.values().iter().for_each(|v| add(&v.to_le_bytes()));
    } else if let Some(a) = any.downcast_ref::<Float64Array>() {
        a.values().iter().for_each(|v| add(&v.to_le_bytes()));
    } else if let Some(a) = any.downcast_ref::<Float32Array>() {
        a.values().iter().for_each(|v| add(&v.to_le_bytes()));
    } else if let Some(a) = any.downcast_ref::<BooleanArray>() {
        a.values().iter().for_each(|v| add(&[u8::from(v)]));
    } else if let Some(a) = any.downcast_ref::<StringArray>() {
        (0..a.len()).for_each(|i| add(a.value(i).as_bytes()));
    } else if let Some(a) = any.downcast_ref::<BinaryArray>() {
        (0..a.len()).for_each(|i| add(a.value(i)));
    } else {
        panic!("a column of type {} is not in the file", column.data_type());
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_does_not_depend_on_batch_boundaries_but_on_every_value() {
        let whole = row_group(3, 100);
        let mut once = Summary::default();
        once.add(&whole);
        let mut cut = Summary::default();
        cut.add(&whole.slice(0, 37));
        cut.add(&whole.slice(37, 63));
        assert_eq!(once, cut);
        assert_eq!(once.rows, 100);
        assert_eq!(Summary::expected(100, None, Some(&[3])), once);
        // One value changed changes the checksum.
        let mut other = Summary::default();
        other.add(&whole.slice(0, 99));
        other.add(&row_group(4, 100).slice(0, 1));
        assert_eq!(other.rows, once.rows);
        assert_ne!(other, once);
    }
}
