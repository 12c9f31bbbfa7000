//! A blocking work queue for the engine's worker threads (file and credential workers).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

/// Jobs and whether the queue is closed.
struct State<T> {
    jobs: VecDeque<T>,
    closed: bool,
}

/// Many producers, a few worker threads; closing lets workers finish what is queued.
pub(crate) struct WorkQueue<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

impl<T> WorkQueue<T> {
    pub(crate) fn new() -> WorkQueue<T> {
        WorkQueue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                closed: false,
            }),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Pushes and pops cannot leave the queue inconsistent, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues jobs and wakes as many workers.
    pub(crate) fn push(&self, jobs: impl IntoIterator<Item = T>) {
        let mut st = self.lock();
        let before = st.jobs.len();
        st.jobs.extend(jobs);
        let added = st.jobs.len() - before;
        drop(st);
        match added {
            0 => {}
            1 => self.wake.notify_one(),
            _ => self.wake.notify_all(),
        }
    }

    /// Queues one job ahead of every waiting one (credential refreshes of running
    /// transfers go first).
    pub(crate) fn push_front(&self, job: T) {
        self.lock().jobs.push_front(job);
        self.wake.notify_one();
    }

    /// The next job, waiting for one; `None` once the queue is closed and empty.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut st = self.lock();
        loop {
            if let Some(job) = st.jobs.pop_front() {
                return Some(job);
            }
            if st.closed {
                return None;
            }
            st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Closes the queue: workers drain it, then stop.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }
}
