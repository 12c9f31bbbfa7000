//! Servers this program started are stopped however it ends: by the [`Drop`] of their
//! [`Server`](crate::servers::Server), by a panic hook (a panic anywhere, even one that then
//! aborts), and on SIGINT, SIGTERM and SIGHUP (a thread waits for them, the others have them
//! blocked). Progress goes through [`say!`](crate::say), which never panics on a closed
//! stderr (EPIPE), so a reader piping the output into `head` does not end the run halfway.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

/// The start scripts' env files of the servers still running, with the script that stops them.
static STARTED: Mutex<Vec<(&'static str, PathBuf)>> = Mutex::new(Vec::new());

/// Writes one line to stderr, ignoring a closed stream.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Records that `script` (relative to the repository root) is about to start servers described
/// by `env_file`; from now on they are stopped at exit. Recorded before the start, so that a
/// signal during a long start (an install) still stops what got started.
pub fn started(script: &'static str, env_file: &Path) {
    lock().push((script, env_file.to_path_buf()));
}

/// Stops the servers `env_file` describes (once: later calls do nothing).
pub fn stop(env_file: &Path) {
    let entry = {
        let mut list = lock();
        let i = list.iter().position(|(_, f)| f == env_file);
        i.map(|i| list.remove(i))
    };
    if let Some((script, file)) = entry {
        run_stop(script, &file);
    }
}

/// Stops every server still recorded.
fn stop_all() {
    let list = std::mem::take(&mut *lock());
    for (script, file) in list {
        run_stop(script, &file);
    }
}

fn run_stop(script: &str, env_file: &Path) {
    // Quiet: a stop script writing to a closed stderr would die of SIGPIPE before stopping.
    let _ = Command::new("bash")
        .arg(crate::repo_root().join(script))
        .arg("stop")
        .arg(env_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_file(env_file);
}

fn lock() -> std::sync::MutexGuard<'static, Vec<(&'static str, PathBuf)>> {
    STARTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Installs the panic hook and the signal thread. Call first in `main`, before any other thread
/// starts, so that every later thread inherits the blocked signals.
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        stop_all();
    }));
    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
    // SAFETY: the set is initialised by sigemptyset before use, and pthread_sigmask only reads
    // it; no other thread runs yet.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    let waiter = std::thread::Builder::new()
        .name("karu-bench-signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: `set` is an initialised signal set and `sig` a valid place to write.
            if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
                say!("karu-bench: signal {sig}, stopping the servers it started");
                stop_all();
                std::process::exit(128 + sig);
            }
        });
    if waiter.is_err() {
        // No thread to take them: let the signals act as before rather than be lost.
        // SAFETY: as above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
    }
}
