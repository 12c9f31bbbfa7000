//! The engine: lazily started workers that carry out planned transfers. Local transfers go to
//! a small pool of file workers; remote backends arrive with the transport issues.

mod file;

use std::sync::Arc;

use crate::batch::{Completion, Counters, Shared};
use crate::error::{Error, Status};
use crate::locator::Locator;
use crate::read::Dest;

pub(crate) use file::FileWorkers;

/// How many file workers do positional reads.
const FILE_WORKERS: usize = 4;

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
    pub(crate) fn complete(self, result: Result<(), Error>, got: u64) -> Completion {
        Completion {
            tag: self.tag,
            result,
            got,
            buffer: self.dest.into_vec(),
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
}

impl Work {
    /// Fails every read of the transfer with the same error.
    pub(crate) fn fail(self, error: &Error) -> impl Iterator<Item = Completion> {
        let error = error.clone();
        self.parts
            .into_iter()
            .map(move |p| p.complete(Err(error.clone()), 0))
    }
}

/// The running engine of one client.
#[derive(Debug)]
pub(crate) struct Engine {
    files: FileWorkers,
}

impl Engine {
    pub(crate) fn start() -> Engine {
        Engine {
            files: FileWorkers::start(FILE_WORKERS),
        }
    }

    /// Hands the batch's transfers to the workers that serve their backends.
    pub(crate) fn dispatch(&self, batch: &Arc<Shared>, work: Vec<Work>) {
        let mut local = Vec::new();
        let mut unsupported = Vec::new();
        for w in work {
            if w.locator.is_remote() {
                unsupported.push(w);
            } else {
                local.push(w);
            }
        }
        self.files.submit(batch, local);
        for w in unsupported {
            let backend = w.locator.backend().name();
            let error = Error::new(
                Status::Unsupported,
                format!(
                    "{}: reading from the {backend} backend is not built yet",
                    w.locator.display()
                ),
            );
            Counters::add(&batch.counters.transfers_finished, 1);
            batch.complete(w.fail(&error));
        }
    }
}
