//! Servers this program started are stopped however it ends: by the [`Drop`] of their
//! [`Server`](crate::servers::Server), by a panic hook (a panic anywhere, even one that then
//! aborts), and on SIGINT, SIGTERM and SIGHUP (a handler writes the signal to a pipe that a
//! thread waits on). Not a blocked signal mask with `sigwait`: a mask survives `exec`, so the
//! servers started by the scripts would inherit it and ignore the SIGTERM that stops them;
//! a handler is reset by `exec`. Progress goes through [`say!`](crate::say), which never panics
//! on a closed stderr (EPIPE), so a reader piping the output into `head` does not end the run
//! halfway.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, Ordering};

/// A start script's servers: the script (relative to the repository root), the env file that
/// describes them, and while the script still runs, its process group.
struct Started {
    script: &'static str,
    env_file: PathBuf,
    starting: Option<libc::pid_t>,
}

/// The servers still running (or starting).
static STARTED: Mutex<Vec<Started>> = Mutex::new(Vec::new());

/// Writes one line to stderr, ignoring a closed stream.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Runs `script start ENV_FILE` with `vars`, recorded so that what it starts is stopped at
/// exit. The script runs in a process group of its own, which a signal during the start ends
/// whole (the servers it started so far are in it, and no env file names them yet). Its output
/// comes through this process: a script writing to a closed stderr itself would die of
/// SIGPIPE halfway, leaving what it started running and unrecorded.
pub fn start(
    script: &'static str,
    env_file: &Path,
    vars: &[(&str, String)],
) -> std::io::Result<ExitStatus> {
    let mut list = lock();
    let mut child = Command::new("bash")
        .arg(crate::repo_root().join(script))
        .arg("start")
        .arg(env_file)
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    list.push(Started {
        script,
        env_file: env_file.to_path_buf(),
        starting: libc::pid_t::try_from(child.id()).ok(),
    });
    drop(list);
    let forward = [
        child.stdout.take().map(|o| forward(BufReader::new(o))),
        child.stderr.take().map(|e| forward(BufReader::new(e))),
    ];
    let status = child.wait();
    // Reaped: its group id may be reused once empty, so it is never signalled after this.
    if let Some(s) = lock().iter_mut().find(|s| s.env_file == env_file) {
        s.starting = None;
    }
    for f in forward.into_iter().flatten() {
        let _ = f.join();
    }
    status
}

/// Copies a child's output to stderr line by line, as [`say!`] does.
fn forward(from: impl BufRead + Send + 'static) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in from.lines().map_while(Result::ok) {
            say!("{line}");
        }
    })
}

/// Stops the servers `env_file` describes (once: later calls do nothing).
pub fn stop(env_file: &Path) {
    let entry = {
        let mut list = lock();
        let i = list.iter().position(|s| s.env_file == env_file);
        i.map(|i| list.remove(i))
    };
    if let Some(s) = entry {
        run_stop(s);
    }
}

/// Stops every server still recorded.
fn stop_all() {
    let list = std::mem::take(&mut *lock());
    for s in list {
        run_stop(s);
    }
}

fn run_stop(s: Started) {
    if let Some(group) = s.starting {
        // SAFETY: kill(2) with a negative id signals that process group: the start script's,
        // which is not reaped yet (see `start`), so the id is still its.
        unsafe {
            libc::kill(-group, libc::SIGTERM);
        }
    }
    // Quiet: a stop script writing to a closed stderr would die of SIGPIPE before stopping.
    let _ = Command::new("bash")
        .arg(crate::repo_root().join(s.script))
        .arg("stop")
        .arg(&s.env_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = std::fs::remove_file(&s.env_file);
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Started>> {
    STARTED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held by the signal thread from a signal to the exit.
static HANDLING: Mutex<()> = Mutex::new(());

/// Call at the end of `main`: when a signal is being handled, waits for its cleanup, which then
/// ends the process with the signal's exit status (not a success).
pub fn finish() {
    drop(HANDLING.lock());
}

/// The write end of the signal pipe (-1 before [`install`]).
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

/// The signal handler: only an async-signal-safe `write` of the signal's number.
extern "C" fn on_signal(sig: libc::c_int) {
    let byte = sig as u8;
    // SAFETY: write(2) is async-signal-safe; the buffer is one live byte. A failed write (no
    // pipe) loses the signal's cleanup, nothing else.
    unsafe {
        libc::write(
            SIGNAL_PIPE.load(Ordering::Relaxed),
            (&raw const byte).cast(),
            1,
        );
    }
}

/// Installs the panic hook, and the signal handlers with their thread. Call first in `main`.
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        stop_all();
    }));
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [read_end, write_end] = fds;
    let waiter = std::thread::Builder::new()
        .name("karu-bench-signals".into())
        .spawn(move || {
            let mut byte = 0u8;
            // SAFETY: reads one byte into a live local.
            let n = unsafe { libc::read(read_end, (&raw mut byte).cast(), 1) };
            if n == 1 {
                // Held until the exit, so that `finish` cannot end the process first.
                let _handling = HANDLING.lock();
                say!("karu-bench: signal {byte}, stopping the servers it started");
                stop_all();
                std::process::exit(128 + i32::from(byte));
            }
        });
    if waiter.is_err() {
        // No thread to act on them: leave the signals' default action in place.
        return;
    }
    SIGNAL_PIPE.store(write_end, Ordering::Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask; the handler only
        // calls write(2).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}
