//! File workers: positional reads (`pread`) straight into destinations.

use std::fs::File;
use std::sync::Arc;

use super::queue::WorkQueue;
use super::{PartRead, Work};
use crate::batch::{Completion, Counters, Shared};
use crate::dest::Dest;
use crate::error::{Error, Status};

/// Transfers handed to a worker at once: enough to amortize the queue lock on small reads,
/// few enough bytes that large reads still spread over every worker.
const CHUNK_TRANSFERS: usize = 64;
const CHUNK_BYTES: u64 = 256 << 10;

struct Job {
    batch: Arc<Shared>,
    work: Vec<Work>,
}

/// The pool of file workers.
pub(crate) struct FileWorkers {
    queue: Arc<WorkQueue<Job>>,
}

impl std::fmt::Debug for FileWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileWorkers")
    }
}

impl FileWorkers {
    /// Starts `n` workers; NOMEM when a thread cannot start (the ones started then exit).
    pub(crate) fn start(n: usize) -> crate::error::Result<FileWorkers> {
        let workers = FileWorkers {
            queue: Arc::new(WorkQueue::new()),
        };
        for i in 0..n {
            let q = Arc::clone(&workers.queue);
            super::spawn(format!("karu-file-{i}"), move || worker(&q))?;
        }
        Ok(workers)
    }

    /// Queues the transfers in chunks.
    pub(crate) fn submit(&self, batch: &Arc<Shared>, work: Vec<Work>) {
        if work.is_empty() {
            return;
        }
        let mut jobs = Vec::new();
        let mut chunk = Vec::new();
        let mut bytes = 0;
        for w in work {
            bytes += w.length;
            chunk.push(w);
            if chunk.len() >= CHUNK_TRANSFERS || bytes >= CHUNK_BYTES {
                jobs.push(Job {
                    batch: Arc::clone(batch),
                    work: std::mem::take(&mut chunk),
                });
                bytes = 0;
            }
        }
        if !chunk.is_empty() {
            jobs.push(Job {
                batch: Arc::clone(batch),
                work: chunk,
            });
        }
        self.queue.push(jobs);
    }
}

impl Drop for FileWorkers {
    fn drop(&mut self) {
        // Workers finish what is queued, then exit.
        self.queue.close();
    }
}

fn worker(queue: &WorkQueue<Job>) {
    let mut files = OpenFiles::default();
    while let Some(job) = queue.pop() {
        run(job, &mut files);
    }
}

fn run(job: Job, files: &mut OpenFiles) {
    let batch = job.batch;
    let Some(busy) = batch.begin() else {
        return;
    };
    files.retain_batch(&batch);
    // Every read's tag, transfer after transfer: a transfer that panics still completes its
    // reads (NOMEM: in a release build only failed allocations panic here), and the worker
    // lives on.
    let tags: Vec<u64> = job
        .work
        .iter()
        .flat_map(|w| w.parts.iter().map(|p| p.tag))
        .collect();
    let mut tags = tags.as_slice();
    let mut done = Vec::new();
    for w in job.work {
        if batch.is_cancelled() {
            break;
        }
        let (mine, rest) = tags.split_at(w.parts.len());
        tags = rest;
        let kept = done.len();
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            #[cfg(test)]
            super::faults::transfer(&w.locator);
            read_transfer(w, files, &mut done)
        }));
        match read {
            Ok(received) => Counters::add(&batch.counters.received_bytes, received),
            Err(payload) => {
                done.truncate(kept);
                let error = Error::new(
                    Status::NoMem,
                    format!(
                        "internal failure: a local read panicked ({})",
                        super::panic_message(&*payload)
                    ),
                );
                done.extend(mine.iter().map(|&tag| Completion {
                    tag,
                    result: Err(error.clone()),
                    got: 0,
                    buffer: None,
                    etag: None,
                }));
            }
        }
        Counters::add(&batch.counters.transfers_finished, 1);
    }
    busy.finish(done);
}

/// Reads one transfer; returns the bytes read from the file.
fn read_transfer(w: Work, files: &mut OpenFiles, done: &mut Vec<Completion>) -> u64 {
    let path = w.locator.target().to_owned();
    let file = match files.open(&path) {
        Ok(f) => f,
        Err(e) => {
            let error =
                Error::new(Status::Io, format!("{}: {e}", w.locator.display())).caused_by(e);
            done.extend(w.fail(&error));
            return 0;
        }
    };
    let id = w.locator.display();
    // Parts are in offset order. Touching, disjoint parts are each read straight into their
    // destinations; only a run of overlapping parts is read once into a scratch buffer and
    // copied out (copying a large merged span would cost more than the saved syscalls).
    let mut parts = w.parts.into_iter().peekable();
    let mut received = 0u64;
    // Set once the file ended (or failed): later parts get nothing more.
    let mut stopped = false;
    let mut failure: Option<Error> = None;
    while let Some(first) = parts.next() {
        let mut run = vec![first];
        let mut end = run[0].offset + run[0].length;
        while let Some(next) = parts.next_if(|p| p.offset < end) {
            end = end.max(next.offset + next.length);
            run.push(next);
        }
        if stopped {
            let result = || failure.clone().map_or(Ok(0), |e| Err((0, e)));
            done.extend(run.into_iter().map(|p| finish_part(&id, p, result())));
            continue;
        }
        // A run whose scratch buffer cannot be had is read part by part instead.
        let mut scratch = Dest::Alloc;
        if run.len() == 1 || scratch.prepare(end - run[0].offset).is_err() {
            for mut part in run {
                let result = part
                    .dest
                    .prepare(part.length)
                    .map_err(|e| (0, e))
                    .and_then(|()| part.dest.read_file(file, part.offset));
                match &result {
                    Ok(n) => {
                        stopped |= *n as u64 != part.length;
                        received += *n as u64;
                    }
                    Err((n, e)) if e.status() == Status::Io => {
                        stopped = true;
                        failure = Some(e.clone());
                        received += *n as u64;
                    }
                    Err(_) => {} // no buffer for this read alone
                }
                done.push(finish_part(&id, part, result));
            }
            continue;
        }
        let start = run[0].offset;
        let result = scratch.read_file(file, start);
        let scratch = scratch.into_vec().unwrap_or_default();
        let (n, error) = match result {
            Ok(n) => (n, None),
            Err((n, e)) => (n, Some(e)),
        };
        failure.clone_from(&error);
        stopped = (n as u64) < end - start;
        received += n as u64;
        for mut part in run {
            let from = (part.offset - start) as usize;
            let result = match &error {
                Some(e) => Err((0, e.clone())),
                None => part
                    .dest
                    .prepare(part.length)
                    .map_err(|e| (0, e))
                    .map(|()| {
                        // The scratch buffer ends after the `n` bytes read.
                        let bytes = scratch.get(from..n).unwrap_or_default();
                        let avail = bytes.len().min(part.length as usize);
                        part.dest.write(0, &bytes[..avail]);
                        avail
                    }),
            };
            done.push(finish_part(&id, part, result));
        }
    }
    received
}

/// Turns a read outcome into the part's completion: a short read is `Range` with its prefix.
fn finish_part(id: &str, part: PartRead, result: Result<usize, (usize, Error)>) -> Completion {
    match result {
        Ok(n) if n as u64 == part.length => {
            let len = part.length;
            part.complete(Ok(()), len)
        }
        Ok(n) => {
            let end = part.offset + n as u64;
            let msg = format!(
                "{id}: range [{}, +{}) passes the end of the file at byte {end}",
                part.offset, part.length
            );
            part.complete(Err(Error::new(Status::Range, msg)), n as u64)
        }
        Err((_, e)) => part.complete(Err(e.context(id)), 0),
    }
}

/// A worker's open files, kept only while it serves one batch, so a file replaced between
/// batches is opened anew.
#[derive(Default)]
struct OpenFiles {
    batch: u64,
    files: Vec<(String, File)>,
}

impl OpenFiles {
    const MAX: usize = 16;

    fn retain_batch(&mut self, batch: &Arc<Shared>) {
        if batch.id != self.batch {
            self.batch = batch.id;
            self.files.clear();
        }
    }

    fn open(&mut self, path: &str) -> std::io::Result<&File> {
        if let Some(i) = self.files.iter().position(|(p, _)| p == path) {
            return Ok(&self.files[i].1);
        }
        let f = File::open(path)?;
        if self.files.len() >= Self::MAX {
            self.files.remove(0);
        }
        self.files.push((path.to_owned(), f));
        Ok(&self.files.last().expect("just pushed").1)
    }
}
