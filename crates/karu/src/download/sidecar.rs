//! Resume state: `<dest>.karu.resume`, a small text file beside the destination naming the
//! pinned ETag, the layout (size, chunk size), the temporary file and the completed chunks.
//!
//! Chunks are appended one line each after their bytes were written, so a process killed
//! mid-download leaves a sidecar that claims only chunks really on disk (a torn last line is
//! ignored).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Version 2: chunks on a grid from byte 0 (version 1 put them after a probe).
const MAGIC: &str = "karu-download 2";

/// What an interrupted download left for the next call.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Saved {
    pub(crate) etag: String,
    pub(crate) size: u64,
    pub(crate) chunk_size: u64,
    /// The temporary file's `<pid>.<n>` id.
    pub(crate) temp_id: String,
    pub(crate) done: BTreeSet<u64>,
}

pub(crate) fn path(dest: &Path) -> PathBuf {
    let mut name = dest.as_os_str().to_owned();
    name.push(".karu.resume");
    PathBuf::from(name)
}

/// The saved state, or `None` when there is none or it cannot be understood (the download
/// then starts over).
pub(crate) fn load(dest: &Path) -> Option<Saved> {
    let text = std::fs::read_to_string(path(dest)).ok()?;
    let mut lines = text.split_inclusive('\n');
    if lines.next()?.trim_end() != MAGIC {
        return None;
    }
    let mut field = |name: &str| -> Option<String> {
        let line = lines.next()?.strip_suffix('\n')?;
        Some(line.strip_prefix(name)?.strip_prefix(' ')?.to_owned())
    };
    let etag = field("etag")?;
    let size = field("size")?.parse().ok()?;
    let chunk_size = field("chunk")?.parse().ok()?;
    let temp_id = field("temp")?;
    if temp_id.contains('/') {
        return None;
    }
    let done = lines
        // Only whole lines count: the last one may have been cut by a kill.
        .filter_map(|l| l.strip_suffix('\n')?.strip_prefix("done ")?.parse().ok())
        .collect();
    Some(Saved {
        etag,
        size,
        chunk_size,
        temp_id,
        done,
    })
}

/// Removes the sidecar (best effort: it may not exist).
pub(crate) fn remove(dest: &Path) {
    let _ = std::fs::remove_file(path(dest));
}

/// An open sidecar that records chunks as they complete.
#[derive(Debug)]
pub(crate) struct Sidecar {
    file: File,
}

impl Sidecar {
    /// Starts a fresh sidecar for a new temporary file (replacing any older one).
    pub(crate) fn create(
        dest: &Path,
        etag: &str,
        size: u64,
        chunk: u64,
        temp_id: &str,
    ) -> io::Result<Sidecar> {
        let mut file = File::create(path(dest))?;
        write!(
            file,
            "{MAGIC}\netag {etag}\nsize {size}\nchunk {chunk}\ntemp {temp_id}\n"
        )?;
        Ok(Sidecar { file })
    }

    /// Continues the sidecar an earlier call left.
    pub(crate) fn append(dest: &Path) -> io::Result<Sidecar> {
        let file = OpenOptions::new().append(true).open(path(dest))?;
        Ok(Sidecar { file })
    }

    /// Records chunk `index` as written.
    pub(crate) fn done(&mut self, index: u64) -> io::Result<()> {
        // One write per line keeps lines whole unless the process dies inside the call.
        self.file.write_all(format!("done {index}\n").as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_ignores_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.bin");
        let mut s = Sidecar::create(&dest, "\"abc\"", 100, 10, "7.3").unwrap();
        s.done(2).unwrap();
        s.done(5).unwrap();
        drop(s);
        let mut f = OpenOptions::new().append(true).open(path(&dest)).unwrap();
        f.write_all(b"done 9").unwrap(); // no newline: a kill cut it
        let saved = load(&dest).unwrap();
        assert_eq!(
            saved,
            Saved {
                etag: "\"abc\"".into(),
                size: 100,
                chunk_size: 10,
                temp_id: "7.3".into(),
                done: [2, 5].into(),
            }
        );
        std::fs::write(path(&dest), "something else\n").unwrap();
        assert_eq!(load(&dest), None);
        remove(&dest);
        assert_eq!(load(&dest), None);
    }
}
