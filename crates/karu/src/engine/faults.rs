//! Test-only fault injection for failures no server can cause: a panic inside a transfer
//! task, a thread the system refuses, a runtime that cannot be built. The switches are
//! per thread (the thread that starts the engine, or a marker in the object's name), so tests
//! running in parallel never see each other's faults. Compiled only under `cfg(test)`.

use std::cell::Cell;

use crate::locator::Locator;

/// An object whose name holds this panics in its transfer task.
const PANIC_MARKER: &str = "karu-test-panic";

thread_local! {
    /// Thread spawns this thread may still make (`None`: unlimited).
    static SPAWNS_LEFT: Cell<Option<usize>> = const { Cell::new(None) };
    /// Whether runtimes built on this thread fail.
    static RUNTIME_FAILS: Cell<bool> = const { Cell::new(false) };
}

/// Called before each engine thread spawn.
pub(super) fn spawn() -> std::io::Result<()> {
    SPAWNS_LEFT.with(|left| match left.get() {
        Some(0) => Err(std::io::Error::other("injected spawn failure")),
        Some(n) => {
            left.set(Some(n - 1));
            Ok(())
        }
        None => Ok(()),
    })
}

/// Called before each IO loop runtime is built.
pub(super) fn runtime() -> std::io::Result<()> {
    if RUNTIME_FAILS.with(Cell::get) {
        return Err(std::io::Error::other("injected runtime failure"));
    }
    Ok(())
}

/// Called at the start of every remote transfer task.
pub(super) fn transfer(locator: &Locator) {
    assert!(
        !locator.display().contains(PANIC_MARKER),
        "injected transfer panic"
    );
}

mod tests {
    use super::*;
    use crate::config::{Config, Credentials, CredentialsKind, CredentialsProvider};
    use crate::error::{Result, Status};
    use crate::{Batch, Client, Completion, Next, Read};
    use karu_testkit::content;
    use karu_testkit::server::RangeServer;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn client(options: &[(&str, &str)]) -> Client {
        let mut config = Config::empty();
        for (name, value) in options {
            config.set(name, Some(value)).unwrap();
        }
        Client::new(&config).unwrap()
    }

    /// Every completion of `batch`, failing the test when one takes longer than 10 s.
    fn drain(batch: &Batch) -> Vec<Completion> {
        let mut all = Vec::new();
        loop {
            match batch.next_timeout(Duration::from_secs(10)) {
                Next::Done(c) => all.push(c),
                Next::End => break,
                Next::Timeout => panic!("a read never completed ({} did)", all.len()),
            }
        }
        all.sort_by_key(|c| c.tag);
        all
    }

    /// The status and message of a failed read.
    fn failure(c: &Completion) -> (Status, String) {
        let e = c.result.as_ref().unwrap_err();
        (e.status(), e.message().to_owned())
    }

    #[test]
    fn a_panicking_transfer_fails_its_reads_and_frees_its_slot() {
        let server = RangeServer::start();
        let c = client(&[("KARU_CONCURRENCY", "2"), ("KARU_IO_THREADS", "1")]);
        let bad = Locator::parse(&server.url(&format!("/ok/{PANIC_MARKER}?size=1000"))).unwrap();
        let good = Locator::parse(&server.url("/ok/good?size=1000")).unwrap();
        // Ten panicking transfers through two slots: each must give its slot back.
        let mut reads: Vec<Read> = (0..10)
            .map(|i| Read::new(&bad, i * 50, 10).tag(i))
            .collect();
        reads.push(Read::new(&good, 100, 10).tag(10));
        let overrides = crate::plan::Overrides {
            gap: Some(0),
            ..Default::default()
        };
        let batch = c.submit_with(reads, &overrides).unwrap();
        let done = drain(&batch);
        assert_eq!(done.len(), 11);
        for d in &done[..10] {
            let (status, message) = failure(d);
            assert_eq!((status, d.got), (Status::NoMem, 0));
            assert!(
                message
                    .ends_with("internal failure: the transfer panicked (injected transfer panic)"),
                "{message}"
            );
        }
        content::check("good", 100, done[10].bytes()).unwrap();
        // A batch dropped with a panicking transfer in flight does not wait for it.
        let batch = c.submit(vec![Read::new(&bad, 0, 10)]).unwrap();
        let t = Instant::now();
        drop(batch);
        assert!(t.elapsed() < Duration::from_secs(5));
        content::check("good", 0, &c.read(&good, 0, 100).unwrap()).unwrap();
    }

    #[test]
    fn a_panicking_local_read_fails_its_reads_and_the_workers_live_on() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join(PANIC_MARKER);
        let good = dir.path().join("good.bin");
        std::fs::write(&bad, [1u8; 100]).unwrap();
        std::fs::write(&good, b"0123456789").unwrap();
        let bad = Locator::parse(bad.to_str().unwrap()).unwrap();
        let good = Locator::parse(good.to_str().unwrap()).unwrap();
        let c = client(&[]);
        // More panicking reads than file workers, around good ones in the same jobs.
        let mut reads = vec![Read::new(&good, 0, 4).tag(0)];
        reads.extend((1..=8).map(|i| Read::new(&bad, i, 1).tag(i)));
        reads.push(Read::new(&good, 4, 4).tag(9));
        let done = drain(&c.submit(reads).unwrap());
        assert_eq!(done.len(), 10);
        assert_eq!(done[0].bytes(), b"0123");
        assert_eq!(done[9].bytes(), b"4567");
        for d in &done[1..9] {
            let (status, message) = failure(d);
            assert_eq!((status, d.got), (Status::NoMem, 0));
            assert_eq!(
                message,
                "internal failure: a local read panicked (injected transfer panic)"
            );
        }
        for _ in 0..8 {
            assert_eq!(c.read(&good, 8, 2).unwrap(), b"89");
        }
    }

    /// A provider that panics on every call.
    struct Panicking;

    impl CredentialsProvider for Panicking {
        fn credentials(&self, _: CredentialsKind, _: &str) -> Result<Credentials> {
            panic!("provider bug")
        }
    }

    #[test]
    fn a_panicking_credentials_provider_fails_reads_with_credentials() {
        let server = RangeServer::start();
        let mut config = Config::empty();
        config
            .set("AWS_S3_ENDPOINT", Some(&server.url("/ok")))
            .unwrap();
        config.set_credentials_provider(CredentialsKind::Aws, Some(Arc::new(Panicking)));
        let c = Client::new(&config).unwrap();
        // More reads than credential workers: each worker survives its panics.
        let reads = (0..12)
            .map(|i| {
                let l = crate::Locator::parse(&format!("s3://bucket/key-{i}")).unwrap();
                Read::new(&l, 0, 10).tag(i)
            })
            .collect();
        let done = drain(&c.submit(reads).unwrap());
        assert_eq!(done.len(), 12);
        for d in &done {
            let (status, message) = failure(d);
            assert_eq!(status, Status::Credentials, "{message}");
            assert!(
                message.ends_with("the credential lookup panicked (provider bug)"),
                "{message}"
            );
        }
        assert!(server.log().is_empty());
    }

    /// Runs `f` with at most `spawns` engine threads allowed to start on this thread.
    fn with_spawns<T>(spawns: usize, f: impl FnOnce() -> T) -> T {
        SPAWNS_LEFT.with(|left| left.set(Some(spawns)));
        let out = f();
        SPAWNS_LEFT.with(|left| left.set(None));
        out
    }

    #[test]
    fn threads_that_cannot_start_fail_reads_with_nomem() {
        let server = RangeServer::start();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.bin");
        std::fs::write(&path, b"0123456789").unwrap();
        let local = Locator::parse(path.to_str().unwrap()).unwrap();
        let remote = Locator::parse(&server.url("/ok/r?size=1000")).unwrap();
        let refused = |r: Result<Vec<u8>>, what: &str| {
            let e = r.unwrap_err();
            assert_eq!(e.status(), Status::NoMem, "{e}");
            assert!(e.message().contains(&format!("cannot start {what}")), "{e}");
            assert!(e.message().contains("injected spawn failure"), "{e}");
        };
        // The third of four file workers, then the first credential worker.
        let c = client(&[]);
        with_spawns(2, || {
            refused(c.read(&local, 0, 4), "karu-file-2");
            refused(c.read(&remote, 0, 4), "karu-credentials-0");
        });
        // Every later call fails the same way, at once.
        refused(c.read(&local, 0, 4), "karu-file-2");
        refused(c.read(&remote, 0, 4), "karu-credentials-0");
        // The second IO loop (after four file and four credential workers and one loop).
        let c = client(&[("KARU_IO_THREADS", "2")]);
        with_spawns(9, || {
            assert_eq!(c.read(&local, 0, 4).unwrap(), b"0123");
            refused(c.read(&remote, 0, 4), "karu-io-1");
        });
        assert_eq!(c.stat(&remote).unwrap_err().status(), Status::NoMem);
        // The same inside an async task, where the runtimes built for loops that never
        // started must be let go without blocking.
        let c = client(&[("KARU_IO_THREADS", "2")]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            SPAWNS_LEFT.with(|left| left.set(Some(9)));
            let read = c.read_async(&remote, 0, 4).await;
            SPAWNS_LEFT.with(|left| left.set(None));
            refused(read, "karu-io-1");
        });
        assert!(server.log().is_empty());
    }

    #[test]
    fn a_runtime_that_cannot_be_built_fails_reads_and_probes_with_nomem() {
        let server = RangeServer::start();
        let remote = Locator::parse(&server.url("/ok/rt?size=1000")).unwrap();
        let c = client(&[]);
        // On a thread of its own, so that a call that never returns fails the test.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            RUNTIME_FAILS.with(|f| f.set(true));
            let _ = tx.send(c.read(&remote, 0, 4).map(drop));
            let _ = tx.send(c.read(&remote, 0, 4).map(drop));
            let _ = tx.send(c.stat(&remote).map(drop));
        });
        for _ in 0..3 {
            let answer = rx.recv_timeout(Duration::from_secs(10));
            let e = answer.expect("a call still waits after 10 s").unwrap_err();
            assert_eq!(e.status(), Status::NoMem, "{e}");
            assert!(
                e.message()
                    .contains("cannot build an IO loop runtime: injected runtime failure"),
                "{e}"
            );
        }
        assert!(server.log().is_empty());
    }
}
