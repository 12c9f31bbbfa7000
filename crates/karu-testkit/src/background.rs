//! A server's own thread and tokio runtime, stopped and joined when dropped.

use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::thread::JoinHandle;

use tokio::net::TcpListener;
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

    /// Binds a free port of 127.0.0.1 and runs `serve` with the listener on a thread named
    /// `name`; returns the bound address.
    ///
    /// Panics if the port cannot be bound (this is a test kit).
    pub(crate) fn listen<F, Fut>(name: &str, serve: F) -> (SocketAddr, Background)
    where
        F: FnOnce(TcpListener) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = StdListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).expect("set_nonblocking");
        let addr = listener.local_addr().expect("local_addr");
        let background = Background::start(name, move || {
            let listener = TcpListener::from_std(listener).expect("listener");
            tokio::spawn(serve(listener));
        });
        (addr, background)
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
