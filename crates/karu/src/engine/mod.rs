//! The engine: lazily started workers that carry out planned transfers. Local transfers go to
//! a small pool of file workers; remote backends arrive with the transport issues.

mod credentials;
mod cut;
pub(crate) mod exchange;
#[cfg(test)]
mod faults;
mod file;
mod gate;
pub(crate) mod link;
mod parts;
mod pending;
mod queue;
pub(crate) mod remote;
mod secrets;
pub(crate) mod split;
pub(crate) mod wave;

use std::sync::{Arc, OnceLock};

use crate::batch::{Completion, Counters, Shared};
use crate::config::Settings;
use crate::dest::Dest;
use crate::error::{Error, Result, Status};
use crate::locator::Locator;
use crate::validate::condition::Condition;

pub(crate) use file::FileWorkers;
pub(crate) use remote::Remote;

/// How many file workers do positional reads.
const FILE_WORKERS: usize = 4;

/// The part of object bytes `[at, at + data.len())` that falls in `[offset, offset +
/// length)`: its place from `offset`, and the bytes. `None` when they do not meet.
pub(crate) fn overlap(offset: u64, length: u64, at: u64, data: &[u8]) -> Option<(u64, &[u8])> {
    let end = at + data.len() as u64;
    let p_end = offset + length;
    if offset >= end || p_end <= at {
        return None;
    }
    let from = at.max(offset);
    let to = end.min(p_end);
    Some((
        from - offset,
        &data[(from - at) as usize..(to - at) as usize],
    ))
}

/// One read's place in a transfer: its absolute range, tag and destination.
#[derive(Debug)]
pub(crate) struct PartRead {
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) tag: u64,
    pub(crate) dest: Dest,
}

impl PartRead {
    /// The completion for this read: `got` defined bytes and `result`.
    pub(crate) fn complete(self, result: std::result::Result<(), Error>, got: u64) -> Completion {
        Completion {
            tag: self.tag,
            result,
            got,
            buffer: self.dest.into_vec(),
            etag: None,
        }
    }
}

/// A planned transfer with the reads it serves.
#[derive(Debug)]
pub(crate) struct Work {
    pub(crate) locator: Locator,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) parts: Vec<PartRead>,
    /// Pieces of split reads, in offset order (remote transfers only).
    pub(crate) pieces: Vec<split::PieceRead>,
    /// The first wave this transfer belongs to, if the batch re-plans after it.
    pub(crate) wave: Option<wave::Ticket>,
    /// The reads' version condition (all parts of a transfer share it); boxed, since most
    /// transfers have none and a queued transfer's size is a million reads' memory.
    pub(crate) pin: Option<Box<Condition>>,
    /// What the credential stage resolved.
    pub(crate) access: exchange::Access,
}

impl Work {
    /// Fails every read of the transfer with the same error (a split read once all its
    /// pieces have ended).
    pub(crate) fn fail(self, error: &Error) -> impl Iterator<Item = Completion> {
        let failed: Result<(u64, split::Version)> = Err(error.clone());
        let locator = self.locator;
        let split: Vec<Completion> = self
            .pieces
            .into_iter()
            .filter_map(|p| p.finish(&locator, &failed))
            .collect();
        let error = error.clone();
        self.parts
            .into_iter()
            .map(move |p| p.complete(Err(error.clone()), 0))
            .chain(split)
    }
}

/// Starts a named engine thread. A thread the system cannot give is NOMEM (never a panic,
/// which would abort across the C ABI).
pub(crate) fn spawn(name: String, run: impl FnOnce() + Send + 'static) -> Result<()> {
    let refused =
        |e: std::io::Error| Error::new(Status::NoMem, format!("cannot start {name}: {e}"));
    #[cfg(test)]
    faults::spawn().map_err(refused)?;
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(run)
        .map(drop)
        .map_err(refused)
}

/// A panic's message, for the error that replaces it.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message")
}

/// The running engine of one client.
#[derive(Debug)]
pub(crate) struct Engine {
    settings: Settings,
    /// The file workers, or why they could not start (every local read then fails so).
    files: Result<FileWorkers>,
    /// Started on the first remote read.
    remote: OnceLock<Result<Remote>>,
    /// What the remote loops learn of each endpoint's link.
    links: Arc<link::LinkTable>,
}

/// Splits `work` into what `pred` holds for and the rest, like `Iterator::partition`, but
/// hands the vector on whole when every item goes one way, as most batches do: a batch of
/// many reads is megabytes of work, and a copy's freed heap stays in the process's RSS.
pub(crate) fn partition(work: Vec<Work>, pred: impl Fn(&Work) -> bool) -> (Vec<Work>, Vec<Work>) {
    if work.iter().all(&pred) {
        (work, Vec::new())
    } else if !work.iter().any(&pred) {
        (Vec::new(), work)
    } else {
        work.into_iter().partition(pred)
    }
}

impl Engine {
    pub(crate) fn start(settings: &Settings) -> Engine {
        Engine {
            settings: settings.clone(),
            files: FileWorkers::start(FILE_WORKERS),
            remote: OnceLock::new(),
            links: Arc::default(),
        }
    }

    /// The remote loops, started on first use.
    pub(crate) fn remote(&self) -> Result<&Remote> {
        self.remote
            .get_or_init(|| Remote::start(&self.settings, &self.links))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Whether `endpoint`'s total rate has been measured.
    pub(crate) fn total_known(&self, endpoint: &str) -> bool {
        self.links.total_rate(endpoint).is_some()
    }

    /// The link estimate a plan for `endpoint` assumes: what the loops measured, with as many
    /// slots as the endpoint's gate lets small transfers have (`concurrency` unless it
    /// limits them; see `gate`).
    pub(crate) fn estimate(&self, endpoint: &str, concurrency: u32) -> crate::plan::LinkEstimate {
        let slots = match self.remote.get() {
            Some(Ok(remote)) => remote.small_level(endpoint),
            _ => None,
        };
        self.links
            .estimate(endpoint, slots.map_or(concurrency, |s| s.min(concurrency)))
    }

    /// Hands the batch's transfers to the workers that serve their backends.
    pub(crate) fn dispatch(&self, batch: &Arc<Shared>, work: Vec<Work>) {
        let mut failed = Vec::new();
        let (remote, local) = partition(work, |w| w.locator.backend().is_remote());
        match &self.files {
            Ok(files) => files.submit(batch, local),
            Err(e) => failed.extend(local.into_iter().map(|w| (w, e.clone()))),
        }
        if !remote.is_empty() {
            match self.remote() {
                Ok(r) => r.submit(batch, remote),
                Err(e) => failed.extend(remote.into_iter().map(|w| (w, e.clone()))),
            }
        }
        for (w, error) in failed {
            Counters::add(&batch.counters.transfers_finished, 1);
            batch.complete(w.fail(&error));
        }
    }
}
