//! The credential stage: transfers of signed cloud backends resolve their credentials on a
//! few worker threads, never on the IO loops, then go on to the loops. Plain HTTP skips it.
//! Transfers travel in runs: one queue hop per run, one lookup per run of transfers in the
//! same credential scope, and one hand-over to the loops per run. Running transfers (a
//! refresh after an expired token) and async probes ask the same workers through [`Lookups`]
//! and await the answer without blocking their loop. What the cache already holds fresh
//! needs no worker: a run of one scope whose credentials are cached goes to the loops at
//! once, and a probe's lookup is answered in place (the hop would cost two thread hand-offs
//! for a map lookup).

use std::sync::Arc;
use std::time::Instant;

use super::Work;
use super::queue::WorkQueue;
use crate::batch::{Counters, Shared};
use crate::credentials::{Auth, Resolved};
use crate::error::{Error, Result, Status};
use crate::locator::Locator;

/// What the stage asks of the credential room.
pub(crate) trait Resolver: Send + Sync {
    /// How `locator` is signed, looked up before `deadline` (blocking).
    fn resolve(&self, locator: &Locator, deadline: Option<Instant>) -> Result<Auth>;
    /// A key equal for locators that [`Resolver::resolve`] answers alike at one moment, or
    /// `None` when each needs its own lookup.
    fn scope(&self, locator: &Locator) -> Option<Scope>;
    /// Forgets cached credentials for `locator`.
    fn invalidate(&self, locator: &Locator, rejected: &Arc<Resolved>);
    /// When a lookup started now must be done (the read's request timeout).
    fn deadline_from(&self, start: Instant) -> Option<Instant>;
    /// What [`Resolver::resolve`] would answer for `locator` from what is cached, without
    /// blocking; `None` when that takes a lookup.
    fn cached(&self, locator: &Locator) -> Option<Auth>;
}

/// What [`Resolver::scope`] groups transfers by.
pub(crate) type Scope = (crate::locator::Backend, Vec<usize>);

/// Hands transfers with their credentials on to the IO loops.
pub(crate) type Forward = dyn Fn(&Arc<Shared>, Vec<Work>) + Send + Sync;

/// Transfers resolved and handed on together: large enough that a big batch costs few
/// queue hops, small enough that the loops start on the first run while workers resolve the
/// next ones.
const RUN: usize = 64;

enum Job {
    /// A run of one batch's transfers to resolve, then forward.
    Transfers(Arc<Shared>, Vec<Work>),
    /// A lookup someone awaits.
    Lookup {
        locator: Locator,
        refresh: Option<Arc<Resolved>>,
        deadline: Option<Instant>,
        reply: tokio::sync::oneshot::Sender<Result<Auth>>,
    },
}

struct Queue {
    jobs: WorkQueue<Job>,
    resolver: Arc<dyn Resolver>,
    forward: Box<Forward>,
}

/// The credential workers.
pub(crate) struct CredentialStage {
    queue: Arc<Queue>,
}

/// Asks the credential workers for a lookup and awaits it (usable on an IO loop).
#[derive(Clone)]
pub(crate) struct Lookups {
    queue: Arc<Queue>,
}

impl Lookups {
    /// How `locator` is signed; with `refresh` (the value a server rejected), that value is
    /// dropped from the cache first and the lookup goes ahead of queued transfers.
    pub(crate) async fn lookup(
        &self,
        locator: &Locator,
        refresh: Option<Arc<Resolved>>,
        deadline: Option<Instant>,
    ) -> Result<Auth> {
        if refresh.is_none()
            && let Some(auth) = self.queue.resolver.cached(locator)
        {
            return Ok(auth);
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let urgent = refresh.is_some();
        let job = Job::Lookup {
            locator: locator.clone(),
            refresh,
            deadline,
            reply,
        };
        if urgent {
            self.queue.jobs.push_front(job);
        } else {
            self.queue.jobs.push([job]);
        }
        answer.await.unwrap_or_else(|_| {
            Err(Error::new(
                Status::Cancelled,
                format!("{}: the client is shutting down", locator.display()),
            ))
        })
    }
}

impl CredentialStage {
    /// Starts `workers` threads that resolve, then forward; NOMEM when a thread cannot
    /// start (the ones started then exit).
    pub(crate) fn start(
        workers: usize,
        resolver: Arc<dyn Resolver>,
        forward: Box<Forward>,
    ) -> Result<Self> {
        let stage = CredentialStage {
            queue: Arc::new(Queue {
                jobs: WorkQueue::new(),
                resolver,
                forward,
            }),
        };
        for i in 0..workers {
            let q = Arc::clone(&stage.queue);
            super::spawn(format!("karu-credentials-{i}"), move || work(&q))?;
        }
        Ok(stage)
    }

    /// Sends transfers on, in runs of at most [`RUN`]: from the cache at once while it holds
    /// their credentials, from the first run it does not through the workers.
    pub(crate) fn submit(&self, batch: &Arc<Shared>, work: Vec<Work>) {
        if work.is_empty() {
            return;
        }
        let mut runs = Vec::with_capacity(work.len().div_ceil(RUN));
        let mut work = work.into_iter().peekable();
        while work.peek().is_some() {
            let mut run: Vec<Work> = work.by_ref().take(RUN).collect();
            if runs.is_empty() && from_cache(&*self.queue.resolver, &mut run) {
                (self.queue.forward)(batch, run);
            } else {
                runs.push(Job::Transfers(Arc::clone(batch), run));
            }
        }
        self.queue.jobs.push(runs);
    }

    /// A handle for awaited lookups.
    pub(crate) fn lookups(&self) -> Lookups {
        Lookups {
            queue: Arc::clone(&self.queue),
        }
    }
}

impl Drop for CredentialStage {
    fn drop(&mut self) {
        self.queue.jobs.close();
    }
}

fn work(queue: &Queue) {
    while let Some(job) = queue.jobs.pop() {
        match job {
            Job::Transfers(batch, run) => transfers(queue, &batch, run),
            Job::Lookup {
                locator,
                refresh,
                deadline,
                reply,
            } => {
                let answer = guarded(&locator, || {
                    if let Some(rejected) = &refresh {
                        queue.resolver.invalidate(&locator, rejected);
                    }
                    queue.resolver.resolve(&locator, deadline)
                });
                let _ = reply.send(answer);
            }
        }
    }
}

/// Gives a run of one scope the credentials the cache holds for it; false (the run
/// untouched) when its transfers span scopes or the cache has none fresh.
fn from_cache(resolver: &dyn Resolver, run: &mut [Work]) -> bool {
    let Some((first, rest)) = run.split_first() else {
        return false;
    };
    let scope = resolver.scope(&first.locator);
    if scope.is_none() || rest.iter().any(|w| resolver.scope(&w.locator) != scope) {
        return false;
    }
    let Some(auth) = resolver.cached(&first.locator) else {
        return false;
    };
    let started = Some(Instant::now());
    for w in run {
        w.access.started = started;
        w.access.auth = Some(auth.clone());
    }
    true
}

/// Resolves a run of transfers, looking up once for consecutive transfers of one scope, and
/// forwards those with credentials together; the others fail.
fn transfers(queue: &Queue, batch: &Arc<Shared>, run: Vec<Work>) {
    if batch.is_cancelled() {
        return;
    }
    // The read's deadline covers the credential lookup (spec §5.5).
    let started = Instant::now();
    let deadline = queue.resolver.deadline_from(started);
    let mut ready = Vec::with_capacity(run.len());
    let mut last: Option<(Scope, Auth)> = None;
    for mut w in run {
        w.access.started = Some(started);
        let scope = queue.resolver.scope(&w.locator);
        let known = match (&last, &scope) {
            (Some((s, auth)), Some(scope)) if s == scope => Some(auth.clone()),
            _ => None,
        };
        let answer = match known {
            Some(auth) => Ok(auth),
            None => guarded(&w.locator, || queue.resolver.resolve(&w.locator, deadline)),
        };
        match answer {
            Ok(auth) => {
                last = scope.map(|s| (s, auth.clone()));
                w.access.auth = Some(auth);
                ready.push(w);
            }
            Err(e) => {
                Counters::add(&batch.counters.transfers_finished, 1);
                batch.complete(w.fail(&e));
            }
        }
    }
    if !ready.is_empty() {
        (queue.forward)(batch, ready);
    }
}

/// Runs a lookup, turning a panic (a caller's `CredentialsProvider` may panic) into a
/// CREDENTIALS failure of the read, so the worker lives on and the read completes.
fn guarded(locator: &Locator, lookup: impl FnOnce() -> Result<Auth>) -> Result<Auth> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(lookup)).unwrap_or_else(|payload| {
        Err(Error::new(
            Status::Credentials,
            format!(
                "{}: the credential lookup panicked ({})",
                locator.display(),
                super::panic_message(&*payload)
            ),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credentials::Resolved;
    use crate::dest::Dest;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

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
            pieces: Vec::new(),
            wave: None,
            pin: None,
            access: Default::default(),
        }
    }

    #[derive(Default)]
    struct Fake {
        invalidated: AtomicUsize,
        /// Lookups made.
        resolved: AtomicUsize,
        /// Group transfers by bucket (else each looks up alone).
        scoped: bool,
        /// Answer every lookup from a cache.
        cached: bool,
    }

    impl Fake {
        fn answer(&self, l: &Locator) -> Result<Auth> {
            if l.key() == "denied" {
                return Err(Error::new(Status::Credentials, "no credentials"));
            }
            let n = self.invalidated.load(Ordering::SeqCst);
            let c = crate::config::Credentials {
                access_key_id: format!("for-{}-{n}", l.key()),
                ..Default::default()
            };
            Ok(Auth::Signed(Arc::new(Resolved::new(c))))
        }
    }

    impl Resolver for Fake {
        fn resolve(&self, l: &Locator, _deadline: Option<Instant>) -> Result<Auth> {
            self.resolved.fetch_add(1, Ordering::SeqCst);
            self.answer(l)
        }
        fn cached(&self, l: &Locator) -> Option<Auth> {
            self.cached.then(|| self.answer(l).ok()).flatten()
        }
        fn invalidate(&self, _l: &Locator, _rejected: &Arc<Resolved>) {
            self.invalidated.fetch_add(1, Ordering::SeqCst);
        }
        fn scope(&self, l: &Locator) -> Option<Scope> {
            let bucket = l.container().len();
            self.scoped.then(|| (l.backend(), vec![bucket]))
        }
        fn deadline_from(&self, _start: Instant) -> Option<Instant> {
            None
        }
    }

    fn key_of(auth: &Auth) -> String {
        match auth {
            Auth::Signed(r) => r.credentials.access_key_id.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn resolves_off_the_caller_then_forwards_or_fails_the_reads() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let stage = CredentialStage::start(
            2,
            Arc::new(Fake::default()),
            Box::new(move |_, run: Vec<Work>| {
                let who = std::thread::current().name().unwrap_or("").to_owned();
                for w in run {
                    let key = key_of(w.access.auth.as_ref().unwrap());
                    tx.lock()
                        .unwrap()
                        .send((who.clone(), key, w.access.started.is_some()))
                        .unwrap();
                }
            }),
        )
        .unwrap();
        let batch = Shared::new(2, false);
        stage.submit(&batch, vec![work("a"), work("denied")]);
        let (who, key, started) = rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        assert!(who.starts_with("karu-credentials-"), "{who}");
        assert_eq!(key, "for-a-0");
        assert!(started);
        let b = crate::batch::Batch {
            shared: batch,
            _engine: None,
        };
        let done = b.next().unwrap();
        assert_eq!((done.tag, done.status()), (9, Status::Credentials));
    }

    fn work_in(bucket: &str, key: &str) -> Work {
        Work {
            locator: Locator::parse(&format!("s3://{bucket}/{key}")).unwrap(),
            ..work(key)
        }
    }

    /// A batch's transfers travel in runs: one lookup per run of one scope, one hand-over per
    /// run, every transfer forwarded once with its credentials.
    #[test]
    fn transfers_are_resolved_and_forwarded_per_run_and_scope() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let fake = Arc::new(Fake {
            scoped: true,
            ..Fake::default()
        });
        let stage = CredentialStage::start(
            1,
            fake.clone(),
            Box::new(move |_, run: Vec<Work>| {
                let keys: Vec<String> = run
                    .iter()
                    .map(|w| {
                        assert!(w.access.started.is_some());
                        key_of(w.access.auth.as_ref().unwrap())
                    })
                    .collect();
                tx.lock().unwrap().send(keys).unwrap();
            }),
        )
        .unwrap();
        let batch = Shared::new(RUN + 3, false);
        // A run of one bucket, then a run that changes bucket twice.
        let mut work: Vec<Work> = (0..RUN).map(|i| work_in("a", &format!("k{i}"))).collect();
        work.extend([work_in("bb", "x"), work_in("bb", "y"), work_in("a", "z")]);
        stage.submit(&batch, work);
        let wait = std::time::Duration::from_secs(5);
        let first = rx.recv_timeout(wait).unwrap();
        let second = rx.recv_timeout(wait).unwrap();
        assert_eq!(first.len(), RUN);
        assert!(first.iter().all(|k| k == "for-k0-0"), "{first:?}");
        assert_eq!(second, ["for-x-0", "for-x-0", "for-z-0"]);
        assert_eq!(fake.resolved.load(Ordering::SeqCst), 3);
    }

    /// Without a single worker, what the cache holds still goes on: runs of one scope from
    /// the submitting thread, a probe's lookup in place. A run that spans scopes waits for
    /// the workers.
    #[test]
    fn cached_credentials_need_no_worker() {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let fake = Arc::new(Fake {
            scoped: true,
            cached: true,
            ..Fake::default()
        });
        let stage = CredentialStage::start(
            0,
            fake.clone(),
            Box::new(move |_, run: Vec<Work>| {
                assert!(run.iter().all(|w| w.access.started.is_some()));
                let key = key_of(run[0].access.auth.as_ref().unwrap());
                tx.lock().unwrap().send((run.len(), key)).unwrap();
            }),
        )
        .unwrap();
        let batch = Shared::new(RUN + 5, false);
        stage.submit(
            &batch,
            (0..RUN + 3)
                .map(|i| work_in("a", &format!("k{i}")))
                .collect(),
        );
        assert_eq!(rx.try_recv().unwrap(), (RUN, "for-k0-0".to_owned()));
        assert_eq!(rx.try_recv().unwrap(), (3, format!("for-k{RUN}-0")));
        stage.submit(&batch, vec![work_in("a", "x"), work_in("bb", "y")]);
        assert!(
            rx.try_recv().is_err(),
            "a run of two scopes went past the workers"
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let l = Locator::parse("s3://bucket/k").unwrap();
        let auth = rt.block_on(stage.lookups().lookup(&l, None, None)).unwrap();
        assert_eq!(key_of(&auth), "for-k-0");
        assert_eq!(fake.resolved.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn awaited_lookups_and_refreshes_run_on_the_workers() {
        let fake = Arc::new(Fake::default());
        let stage = CredentialStage::start(1, fake.clone(), Box::new(|_, _| {})).unwrap();
        let lookups = stage.lookups();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let l = Locator::parse("s3://bucket/k").unwrap();
        let first = rt.block_on(lookups.lookup(&l, None, None)).unwrap();
        assert_eq!(key_of(&first), "for-k-0");
        let Auth::Signed(rejected) = first else {
            unreachable!()
        };
        let again = rt
            .block_on(lookups.lookup(&l, Some(rejected), None))
            .unwrap();
        assert_eq!(key_of(&again), "for-k-1");
        assert_eq!(fake.invalidated.load(Ordering::SeqCst), 1);
    }
}
