//! The workloads of issue 8, generated deterministically so that the parent (which plans and
//! counts) and each child (which reads) build exactly the same reads from the same arguments.

use std::sync::OnceLock;

use bytes::Bytes;
use karu_testkit::parquet;

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// One workload: the objects it touches and what is read from them.
pub struct Workload {
    pub id: char,
    pub title: String,
    /// (name, size); the name is both the path on the server and the content name.
    pub objects: Vec<(String, u64)>,
    /// (object index, offset, length); empty unless `kind` is [`Kind::Reads`].
    pub reads: Vec<(usize, u64, u64)>,
    pub kind: Kind,
}

/// What a workload asks of its objects, which decides the readers that can run it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The listed reads, as one batch.
    Reads,
    /// E: every object is opened by its first and last bytes (head, tail).
    Ends(u64, u64),
    /// D: the one object, whole, into a local file.
    Download,
    /// P: the test kit's Parquet file (with this many rows per row group) read through a
    /// Parquet reader: the projection, or (with the readers marked scan) every column.
    Parquet(u64),
}

impl Workload {
    /// Bytes the caller asked for.
    pub fn requested(&self) -> u64 {
        match self.kind {
            Kind::Reads => self.reads.iter().map(|r| r.2).sum(),
            Kind::Ends(h, t) => self.objects.iter().map(|(_, s)| (h + t).min(*s)).sum(),
            Kind::Download | Kind::Parquet(_) => self.objects.iter().map(|(_, s)| s).sum(),
        }
    }

    /// The bytes of a workload whose object is a written file (P's Parquet file), which the
    /// servers are given as they are; none where the object is the test kit's content.
    pub fn written(&self) -> Option<&'static Bytes> {
        match self.kind {
            Kind::Parquet(rows) => Some(parquet_file(rows)),
            _ => None,
        }
    }

    /// The workload with its written file's size (P's); the others unchanged.
    pub fn sized(mut self) -> Workload {
        if let Some(bytes) = self.written() {
            for object in &mut self.objects {
                object.1 = bytes.len() as u64;
            }
        }
        self
    }

    /// Number of reads (for E, two per object: head and tail; for D, one).
    pub fn count(&self) -> usize {
        match self.kind {
            Kind::Reads => self.reads.len(),
            Kind::Ends(..) => 2 * self.objects.len(),
            Kind::Download | Kind::Parquet(_) => 1,
        }
    }
}

/// Size knobs: the issue's figures in a full run, smaller ones in quick mode.
#[derive(Clone, Copy)]
pub struct Scale {
    /// How the parent names this scale to its children.
    pub name: &'static str,
    pub random_reads: usize,
    pub sparse_reads: u64,
    pub columns: usize,
    pub ends_objects: usize,
    pub download_bytes: u64,
    /// Rows per row group of P's Parquet file (20 row groups).
    pub parquet_rows: u64,
}

impl Scale {
    /// The issue's figures (`--issue-scale`).
    pub const ISSUE: Scale = Scale {
        name: "issue",
        random_reads: 10_000,
        sparse_reads: 1_000,
        columns: 200,
        ends_objects: 100,
        download_bytes: GIB,
        parquet_rows: parquet::ROWS,
    };
    /// A full run's default: the issue's R, H and E; S, C and D cut to a quarter of their bytes
    /// (250 reads, 50 chunks, 256 MiB) so that the whole matrix, 1 Gbit/s profiles included,
    /// fits in a quarter of an hour on two shared cores. Their shapes (stride, chunk and gap
    /// sizes; D's 8 MiB chunks) are unchanged, so the per-transfer behaviour is the same; only
    /// the batch is shorter.
    pub const FULL: Scale = Scale {
        name: "full",
        random_reads: 10_000,
        sparse_reads: 250,
        columns: 50,
        ends_objects: 100,
        download_bytes: 256 * MIB,
        parquet_rows: parquet::ROWS,
    };
    pub const QUICK: Scale = Scale {
        name: "quick",
        random_reads: 1_000,
        sparse_reads: 100,
        columns: 20,
        ends_objects: 20,
        download_bytes: 32 * MIB,
        // A tenth of the rows: a ~5 MB file, same shape.
        parquet_rows: parquet::ROWS / 10,
    };

    pub fn by_name(name: &str) -> Scale {
        [Scale::QUICK, Scale::FULL, Scale::ISSUE]
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("unknown scale {name}"))
    }
}

/// splitmix64: a fixed, dependency-free stream, so every process draws the same numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

pub const IDS: [char; 7] = ['R', 'S', 'C', 'H', 'E', 'D', 'P'];

/// P's file: the name it is served under, and its bytes (written once per process; the writer
/// is deterministic, so parent and children agree on them).
pub fn parquet_file(rows: u64) -> &'static Bytes {
    static FILE: OnceLock<Bytes> = OnceLock::new();
    FILE.get_or_init(|| Bytes::from(parquet::file(rows)))
}

pub fn workload(id: char, scale: Scale) -> Workload {
    let one = |name: &str, size: u64| vec![(format!("karu-bench-{name}.bin"), size)];
    match id {
        'R' => {
            let mut rng = Rng(0x5eed);
            let reads = (0..scale.random_reads)
                .map(|_| (0, rng.range(0, GIB / (4 * KIB) - 1) * 4 * KIB, 4 * KIB))
                .collect();
            Workload {
                id,
                title: format!(
                    "{} random 4 KiB reads in a 1 GiB object",
                    scale.random_reads
                ),
                objects: one("R", GIB),
                reads,
                kind: Kind::Reads,
            }
        }
        'S' => Workload {
            id,
            title: format!("{} reads of 64 KiB at 1 MiB stride", scale.sparse_reads),
            objects: one("S", GIB),
            reads: (0..scale.sparse_reads)
                .map(|i| (0, i * MIB, 64 * KIB))
                .collect(),
            kind: Kind::Reads,
        },
        'C' => {
            // Parquet-like: column chunks laid end to end with small gaps (page indexes, other
            // columns' chunks not selected), each read whole.
            let mut rng = Rng(0xc01);
            let mut at = 4 * KIB;
            let mut reads = Vec::new();
            for _ in 0..scale.columns {
                let len = rng.range(256 * KIB, 4 * MIB);
                reads.push((0, at, len));
                at += len + rng.range(0, 64 * KIB);
            }
            Workload {
                id,
                title: format!(
                    "{} column chunks of 256 KiB–4 MiB with gaps of 0–64 KiB",
                    scale.columns
                ),
                // Room for a footer after the last chunk, as in a Parquet file.
                objects: one("C", at + MIB),
                reads,
                kind: Kind::Reads,
            }
        }
        'H' => {
            // HDF5-like: 780 chunks of ~56 KiB (48–64 KiB, compressed) packed in 15 clusters
            // whose starts are spread evenly over 48 MB; a few KiB of B-tree nodes and headers
            // sit between chunks.
            let mut rng = Rng(0x4df5);
            let span = 48_000_000u64;
            let mut reads = Vec::new();
            for cluster in 0..15u64 {
                let mut at = cluster * (span / 15);
                for _ in 0..52 {
                    let len = rng.range(48 * KIB, 64 * KIB);
                    reads.push((0, at, len));
                    at += len + rng.range(0, 2 * KIB);
                }
            }
            let end = reads.iter().map(|r| r.1 + r.2).max().unwrap_or(0);
            Workload {
                id,
                title: "780 chunks of ~56 KiB in 15 clusters over 48 MB".into(),
                objects: one("H", end.max(span) + MIB),
                reads,
                kind: Kind::Reads,
            }
        }
        'E' => Workload {
            id,
            title: format!(
                "head (64 KiB) + tail (64 KiB) open of {} objects of 4 MiB",
                scale.ends_objects
            ),
            objects: (0..scale.ends_objects)
                .map(|i| (format!("karu-bench-E{i}.bin"), 4 * MIB))
                .collect(),
            reads: Vec::new(),
            kind: Kind::Ends(64 * KIB, 64 * KIB),
        },
        'D' => Workload {
            id,
            title: format!(
                "download of one {} MiB object to a local file",
                scale.download_bytes / MIB
            ),
            objects: one("D", scale.download_bytes),
            reads: Vec::new(),
            kind: Kind::Download,
        },
        'P' => Workload {
            id,
            title: format!(
                "Parquet file of {} row groups × 10 columns ({} rows each): {} columns of {} \
                 row groups, and a full scan",
                parquet::ROW_GROUPS,
                scale.parquet_rows,
                parquet::COLUMNS.len(),
                parquet::SELECTED.len()
            ),
            // The size is the written file's, set by `sized` in the parent only: a reader's
            // child reads by name, and writing the file there would count in its memory.
            objects: vec![("karu-bench-P.parquet".into(), 0)],
            reads: Vec::new(),
            kind: Kind::Parquet(scale.parquet_rows),
        },
        _ => panic!("unknown workload {id}"),
    }
}
