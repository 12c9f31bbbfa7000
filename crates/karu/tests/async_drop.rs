//! Dropping unfinished async reads on an executor thread cancels them without blocking it;
//! only raw destinations (caller memory) still wait for the workers, as their contract says.

mod common;

use std::time::{Duration, Instant};

use common::client;
use karu::{Locator, Read};

/// Bytes of the sparse file read: large enough that a worker is mid-read for a while.
const LEN: u64 = 512 << 20;

/// A sparse file of `LEN` zero bytes.
fn sparse(dir: &tempfile::TempDir) -> Locator {
    let path = dir.path().join("sparse.bin");
    std::fs::File::create(&path).unwrap().set_len(LEN).unwrap();
    Locator::parse(path.to_str().unwrap()).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn dropping_an_unfinished_read_async_does_not_block_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let object = sparse(&dir);
    let c = client(&[]);
    runtime().block_on(async {
        let mut read = Box::pin(c.read_async(&object, 0, LEN));
        // A file worker is now filling the half-gigabyte buffer.
        let pending = tokio::time::timeout(Duration::from_millis(20), read.as_mut()).await;
        assert!(
            pending.is_err(),
            "the read finished too soon to test anything"
        );
        let t = Instant::now();
        drop(read);
        let took = t.elapsed();
        assert!(
            took < Duration::from_millis(50),
            "the drop blocked for {took:?}"
        );
        // The same goes for a batch dropped by an async task, and the client goes on.
        let batch = c.submit(vec![Read::new(&object, 0, LEN)]).unwrap();
        let pending = tokio::time::timeout(Duration::from_millis(20), batch.next_async()).await;
        assert!(pending.is_err());
        let t = Instant::now();
        drop(batch);
        assert!(t.elapsed() < Duration::from_millis(50), "{:?}", t.elapsed());
        assert_eq!(c.read_async(&object, 7, 3).await.unwrap(), [0, 0, 0]);
    });
}

#[test]
fn dropping_a_batch_with_raw_buffers_still_waits_for_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    let object = sparse(&dir);
    let mut buffer = vec![0xABu8; LEN as usize];
    let read = Read::new(&object, 0, LEN);
    // SAFETY: the buffer outlives the batch, which is dropped before the buffer is touched.
    let read = unsafe { read.with_raw_buffer(buffer.as_mut_ptr()) };
    let batch = client(&[]).submit(vec![read]).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    drop(batch);
    // No worker writes the buffer once the drop returned.
    buffer.fill(0xCD);
    std::thread::sleep(Duration::from_millis(500));
    assert!(buffer.iter().all(|&b| b == 0xCD));
}
