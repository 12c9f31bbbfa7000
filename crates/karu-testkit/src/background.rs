//! A server's own thread and tokio runtime, stopped and joined when dropped.

use std::thread::JoinHandle;

use tokio::sync::oneshot;

/// A background thread running a current-thread runtime until dropped.
pub(crate) struct Background {
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Background {
    /// Starts a thread named `name` whose runtime first runs `start` (which spawns the
    /// server's tasks) and then idles until the `Background` is dropped.
    pub(crate) fn start(name: &str, start: impl FnOnce() + Send + 'static) -> Background {
        let (tx, rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(async move {
                    start();
                    let _ = rx.await;
                });
            })
            .expect("spawn background thread");
        Background {
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
