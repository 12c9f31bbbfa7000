//! The credential stage: transfers of signed cloud backends resolve their credentials on a
//! few worker threads, never on the IO loops, then go on to the loops. Plain HTTP skips it.
//! The cloud backends fill in what resolving means; the stage only schedules it.

use std::sync::Arc;
use std::time::Instant;

use super::Work;
use super::queue::WorkQueue;
use crate::batch::{Counters, Shared};
use crate::config::Credentials;
use crate::error::Result;
use crate::locator::Locator;

/// Finds the credentials for a transfer's object (`None`: anonymous).
pub(crate) type Resolve = dyn Fn(&Locator) -> Result<Option<Arc<Credentials>>> + Send + Sync;
/// Hands a transfer with its credentials on to the IO loops.
pub(crate) type Forward = dyn Fn(&Arc<Shared>, Work) + Send + Sync;

struct Queue {
    jobs: WorkQueue<(Arc<Shared>, Work)>,
    resolve: Box<Resolve>,
    forward: Box<Forward>,
}

/// The credential workers.
pub(crate) struct CredentialStage {
    queue: Arc<Queue>,
}

impl CredentialStage {
    /// Starts `workers` threads that resolve, then forward.
    pub(crate) fn start(workers: usize, resolve: Box<Resolve>, forward: Box<Forward>) -> Self {
        let queue = Arc::new(Queue {
            jobs: WorkQueue::new(),
            resolve,
            forward,
        });
        for i in 0..workers {
            let q = Arc::clone(&queue);
            std::thread::Builder::new()
                .name(format!("karu-credentials-{i}"))
                .spawn(move || work(&q))
                .expect("karu: cannot start a credential worker thread");
        }
        CredentialStage { queue }
    }

    /// Queues transfers for resolution.
    pub(crate) fn submit(&self, batch: &Arc<Shared>, work: Vec<Work>) {
        self.queue
            .jobs
            .push(work.into_iter().map(|w| (Arc::clone(batch), w)));
    }
}

impl Drop for CredentialStage {
    fn drop(&mut self) {
        self.queue.jobs.close();
    }
}

fn work(queue: &Queue) {
    while let Some((batch, mut w)) = queue.jobs.pop() {
        if batch.is_cancelled() {
            continue;
        }
        // The read's deadline covers the credential lookup (spec §5.5).
        w.access.started = Some(Instant::now());
        match (queue.resolve)(&w.locator) {
            Ok(credentials) => {
                w.access.credentials = credentials;
                (queue.forward)(&batch, w);
            }
            Err(e) => {
                Counters::add(&batch.counters.transfers_finished, 1);
                batch.complete(w.fail(&e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, Status};
    use crate::read::Dest;
    use std::sync::{Mutex, mpsc};

    fn work(key: &str) -> Work {
        let locator = Locator::parse(&format!("s3://bucket/{key}")).unwrap();
        Work {
            locator,
            offset: 0,
            length: 1,
            parts: vec![super::super::PartRead {
                offset: 0,
                length: 1,
                tag: 9,
                dest: Dest::Alloc,
            }],
            if_match: None,
            access: Default::default(),
        }
    }

    #[test]
    fn resolves_off_the_caller_then_forwards_or_fails_the_reads() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let stage = CredentialStage::start(
            2,
            Box::new(|l: &Locator| {
                if l.key() == "denied" {
                    return Err(Error::new(Status::Credentials, "no credentials"));
                }
                let c = Credentials {
                    access_key_id: format!("for-{}", l.key()),
                    ..Credentials::default()
                };
                Ok(Some(Arc::new(c)))
            }),
            Box::new(move |_, w: Work| {
                let who = std::thread::current().name().unwrap_or("").to_owned();
                let key = w.access.credentials.as_ref().unwrap().access_key_id.clone();
                tx.lock()
                    .unwrap()
                    .send((who, key, w.access.started.is_some()))
                    .unwrap();
            }),
        );
        let batch = Shared::new(2);
        stage.submit(&batch, vec![work("a"), work("denied")]);
        let (who, key, started) = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert!(who.starts_with("karu-credentials-"), "{who}");
        assert_eq!(key, "for-a");
        assert!(started);
        let b = crate::batch::Batch {
            shared: batch,
            _engine: None,
        };
        let done = b.next().unwrap();
        assert_eq!((done.tag, done.status()), (9, Status::Credentials));
    }
}
