//! The temporary file beside the destination: created exclusively, written positionally,
//! published by hard link (never replacing a file) or atomic rename, removed on any failure.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result, Status};

/// How many temporary names are tried before giving up (another process may hold some).
const NAME_ATTEMPTS: u32 = 100;

/// A temporary output file; dropped unpublished, it is removed unless [`keep`](Temp::keep)
/// was called (resume keeps it for the next call).
#[derive(Debug)]
pub(crate) struct Temp {
    path: PathBuf,
    file: Option<File>,
    keep: bool,
}

pub(crate) fn io_error(dest: &Path, what: &str, e: io::Error) -> Error {
    Error::new(Status::Io, format!("{}: {what}: {e}", dest.display())).caused_by(e)
}

/// `<dest>.karu.part.<id>`: the temporary name for id `<pid>.<n>`.
pub(crate) fn part_path(dest: &Path, id: &str) -> PathBuf {
    let mut name = dest.as_os_str().to_owned();
    name.push(format!(".karu.part.{id}"));
    PathBuf::from(name)
}

impl Temp {
    /// Creates `<dest>.karu.part.<pid>.<n>` with create-exclusive, so two downloads (or two
    /// processes) never share a temporary file.
    pub(crate) fn create(dest: &Path) -> Result<Temp> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut last = None;
        for _ in 0..NAME_ATTEMPTS {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = part_path(dest, &format!("{}.{n}", std::process::id()));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(file) => {
                    return Ok(Temp {
                        path,
                        file: Some(file),
                        keep: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(io_error(dest, "cannot create temporary output", e)),
            }
        }
        let e = last.unwrap_or_else(|| io::Error::other("no free temporary name"));
        Err(io_error(dest, "cannot create temporary output", e))
    }

    /// Opens a temporary file an earlier call kept, for resume.
    pub(crate) fn reopen(path: PathBuf) -> io::Result<Temp> {
        let file = OpenOptions::new().write(true).open(&path)?;
        Ok(Temp {
            path,
            file: Some(file),
            keep: false,
        })
    }

    /// The `<pid>.<n>` part of the name, which the resume sidecar records.
    pub(crate) fn id(&self) -> String {
        let name = self.path.to_string_lossy();
        let at = name.rfind(".karu.part.").expect("made by part_path") + ".karu.part.".len();
        name[at..].to_owned()
    }

    /// Where the file lies (named in messages about what was kept).
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// A second handle on the file, for a writer on another thread.
    pub(crate) fn try_clone_file(&self) -> io::Result<File> {
        self.file().try_clone()
    }

    pub(crate) fn len(&self) -> io::Result<u64> {
        self.file().metadata().map(|m| m.len())
    }

    pub(crate) fn set_len(&self, len: u64) -> io::Result<()> {
        self.file().set_len(len)
    }

    pub(crate) fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.file().write_all_at(data, offset)
    }

    fn file(&self) -> &File {
        self.file
            .as_ref()
            .expect("the file is open until published")
    }

    /// Leaves the file in place when dropped (an interrupted resumable download).
    pub(crate) fn keep(&mut self) {
        self.keep = true;
    }

    /// Closes the file and moves it to `dest`: an atomic rename with `overwrite`; otherwise a
    /// hard link, which fails if `dest` appeared meanwhile, so no existing file is replaced.
    pub(crate) fn publish(mut self, dest: &Path, overwrite: bool) -> Result<()> {
        drop(self.file.take());
        let published = if overwrite {
            std::fs::rename(&self.path, dest)
        } else {
            match std::fs::hard_link(&self.path, dest) {
                Ok(()) => std::fs::remove_file(&self.path),
                // Filesystems without hard links: re-check and rename, a best-effort path
                // with an unavoidable race between the check and the rename.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Unsupported | io::ErrorKind::PermissionDenied
                    ) =>
                {
                    if dest.symlink_metadata().is_ok() {
                        Err(io::Error::from(io::ErrorKind::AlreadyExists))
                    } else {
                        std::fs::rename(&self.path, dest)
                    }
                }
                Err(e) => Err(e),
            }
        };
        published.map_err(|e| io_error(dest, "cannot publish downloaded file", e))?;
        // The temporary name is gone: nothing for Drop to remove.
        self.keep = true;
        Ok(())
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        drop(self.file.take());
        if !self.keep {
            // Best effort: after a publish the name is already gone.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Removes temporary files of `dest` left by processes that no longer exist (killed
/// downloads), except `keep`, the one a resume sidecar names. Best effort: a file that
/// cannot be listed or removed stays.
pub(crate) fn remove_stale(dest: &Path, keep: Option<&str>) {
    let Some(name) = dest.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let prefix = format!("{name}.karu.part.");
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(id) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let owner = id
            .split_once('.')
            .and_then(|(pid, _)| pid.parse::<i32>().ok());
        if Some(id) == keep || owner.is_none_or(alive) {
            continue;
        }
        let _ = std::fs::remove_file(entry.path());
    }
}

/// True when process `pid` exists (or cannot be told apart from one that does).
fn alive(pid: i32) -> bool {
    if pid <= 0 || pid == std::process::id() as i32 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_files_of_dead_processes_go_and_the_rest_stay() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.bin");
        // A child that has exited and been reaped: its pid names no process now.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let mine = std::process::id();
        let names = [
            format!("out.bin.karu.part.{dead}.0"),
            format!("out.bin.karu.part.{dead}.1"),
            format!("out.bin.karu.part.{mine}.0"),
            "out.bin.karu.part.1.0".to_owned(), // init: alive
            format!("other.bin.karu.part.{dead}.0"),
        ];
        for n in &names {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        remove_stale(&dest, Some(&format!("{dead}.1")));
        let left = |n: &str| dir.path().join(n).exists();
        assert!(!left(&names[0]));
        assert!(left(&names[1]), "the sidecar's file is kept for resume");
        assert!(left(&names[2]) && left(&names[3]) && left(&names[4]));
    }
}
