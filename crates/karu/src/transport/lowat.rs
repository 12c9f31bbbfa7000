//! Fewer wake-ups per long body: the receive low-water mark (`SO_RCVLOWAT`) of an HTTP/1
//! connection while a body streams through it.
//!
//! An IO loop that is idle when bytes arrive wakes for each burst the sender's segments
//! bring: about 32 KB from a loopback proxy, 18 KB from s3s-fs (4 KiB file reads), where
//! reqwest's reader, a thread hand-off away from its socket, found 300 KB waiting. Every
//! wake-up is an `epoll_wait`, a few `recvfrom`s and a pass through the body loop, on cores
//! that the server and proxy need too: a 3 MB body took 90 of them (`strace`, the Parquet
//! scan at 20 ms) against reqwest's 6. With a low-water mark the kernel signals the socket
//! readable only once that many bytes wait, so the loop wakes about once per [`WAKE`] of the
//! body's measured rate (at most [`CAP`] bytes), never later than those bytes' arrival: no
//! timer, and no pause on a link that delivers fast.
//!
//! The mark must never exceed the bytes still to come into the socket, or the reader would
//! wait for bytes that never arrive. What the reader still needs is known (the body's
//! remaining length), but up to [`MARGIN`] of it may already sit above the socket (hyper's
//! read buffer and body channel, rustls's buffers), so within [`MARGIN`] of the end the mark
//! goes back to one byte, as it does when the body ends or its reader stops. A mark is only
//! raised within a quarter of the socket's receive buffer: Linux grows the buffer (and
//! clamps the window to the mark) for a mark that does not fit, which would cap a long
//! link's window.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How much of a body's measured rate one wake-up should carry.
const WAKE: Duration = Duration::from_millis(2);
/// The highest mark: 256 KiB, four of a long-body connection's 64 KiB reads.
const CAP: u64 = 256 << 10;
/// Body bytes that may sit above the socket (hyper's buffer and channel, TLS buffers):
/// within this of the body's end the mark is one byte.
const MARGIN: u64 = 256 << 10;
/// Frames between two looks at the rate (each look may cost a `getsockopt` and a
/// `setsockopt`).
const EVERY: u32 = 8;

/// A connection's receive low-water mark, shared by the connection (which owns the socket)
/// and the responses served on it (found in their extensions).
#[derive(Clone, Debug)]
pub(crate) struct RecvLowat(Arc<Mutex<Socket>>);

/// The socket while it is open; `None` once its connection dropped it.
#[derive(Debug)]
struct Socket {
    #[cfg(unix)]
    fd: Option<std::os::fd::RawFd>,
    /// The mark last set (1 is the kernel's default).
    mark: u64,
}

impl RecvLowat {
    /// The mark of the socket `fd` (no socket: every call does nothing).
    #[cfg(unix)]
    pub(crate) fn new(fd: Option<std::os::fd::RawFd>) -> RecvLowat {
        RecvLowat(Arc::new(Mutex::new(Socket { fd, mark: 1 })))
    }

    /// A mark that does nothing: no socket option to set here.
    #[cfg(not(unix))]
    pub(crate) fn new() -> RecvLowat {
        RecvLowat(Arc::new(Mutex::new(Socket { mark: 1 })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Socket> {
        // A plain value: a panic cannot leave it inconsistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection dropped its socket: no more calls reach it (its number may be reused).
    pub(crate) fn close(&self) {
        #[cfg(unix)]
        {
            self.lock().fd = None;
        }
    }

    /// The mark last set.
    fn mark(&self) -> u64 {
        self.lock().mark
    }

    /// Sets the mark to `bytes` (at least 1), if the socket is open and not already there.
    /// With `fit`, only within a quarter of the socket's receive buffer (see the module).
    fn set(&self, bytes: u64, fit: bool) {
        let mut s = self.lock();
        let bytes = bytes.max(1);
        if bytes == s.mark {
            return;
        }
        #[cfg(unix)]
        if let Some(fd) = s.fd {
            let bytes = if fit {
                let room = option(fd, libc::SO_RCVBUF).map_or(0, |b| b / 4);
                bytes.min(room).max(1)
            } else {
                bytes
            };
            if bytes != s.mark && set_lowat(fd, bytes) {
                s.mark = bytes;
            }
        }
    }
}

/// The socket-level integer option `name` of `fd` (`SO_RCVBUF`: what the kernel gives the
/// socket now, which autotuning grows).
#[cfg(unix)]
fn option(fd: std::os::fd::RawFd, name: libc::c_int) -> Option<u64> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `fd` is open (its connection clears it under the same lock before closing),
    // and `value` and `len` are valid for the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    (r == 0).then(|| u64::try_from(value).unwrap_or(0))
}

/// Sets `SO_RCVLOWAT` of `fd`; false if the kernel refused it.
#[cfg(unix)]
fn set_lowat(fd: std::os::fd::RawFd, bytes: u64) -> bool {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: as in `option`; `value` lives across the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    r == 0
}

/// The mark one body reader keeps: raised from the body's measured rate, back to one byte
/// near its end and when dropped.
#[derive(Debug)]
pub(crate) struct BodyWakes {
    lowat: RecvLowat,
    /// When the first frame came, with the body bytes seen by then.
    first: Option<(Instant, u64)>,
    frames: u32,
}

impl BodyWakes {
    /// The reader of a body served on the connection of `lowat`.
    pub(crate) fn new(lowat: RecvLowat) -> BodyWakes {
        BodyWakes {
            lowat,
            first: None,
            frames: 0,
        }
    }

    /// A frame arrived: `seen` body bytes so far, `remaining` bytes the reader still needs.
    pub(crate) fn frame(&mut self, seen: u64, remaining: u64) {
        let mark = self.lowat.mark();
        if mark > 1 && remaining < MARGIN + mark {
            self.lowat.set(1, false);
            return;
        }
        self.frames = self.frames.wrapping_add(1);
        let Some((start, before)) = self.first else {
            self.first = Some((Instant::now(), seen));
            return;
        };
        if !self.frames.is_multiple_of(EVERY) {
            return;
        }
        let want = mark_for(seen.saturating_sub(before), start.elapsed(), remaining);
        // Raised only to at least twice the mark (each step a system call or two), lowered
        // when the rate fell to under half of what the mark was set for.
        if want >= 2 * mark || want < mark / 2 {
            self.lowat.set(want, want > mark);
        }
    }

    /// At a low-speed check: back to one byte, so that the next window counts bytes as they
    /// arrive, and the rate is measured afresh. Whether the mark was above one (bytes may
    /// then have been waiting in the socket, not missing).
    pub(crate) fn relax(&mut self) -> bool {
        let raised = self.lowat.mark() > 1;
        self.lowat.set(1, false);
        self.first = None;
        raised
    }
}

impl Drop for BodyWakes {
    fn drop(&mut self) {
        // The next answer on this connection starts with a few hundred bytes of headers.
        self.lowat.set(1, false);
    }
}

/// The mark for a body that brought `bytes` in `elapsed` and of which `remaining` bytes are
/// still needed: [`WAKE`] of its rate, at most [`CAP`], and one byte within [`MARGIN`] of
/// its end.
fn mark_for(bytes: u64, elapsed: Duration, remaining: u64) -> u64 {
    let rate = bytes as f64 / elapsed.as_secs_f64().max(1e-6);
    let want = (rate * WAKE.as_secs_f64()).min(CAP as f64) as u64;
    want.min(remaining.saturating_sub(MARGIN)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_follows_the_rate_up_to_its_cap_and_drops_near_the_end() {
        let ms = Duration::from_millis;
        // 700 MB/s: capped at 256 KiB.
        assert_eq!(mark_for(70_000_000, ms(100), 1 << 30), CAP);
        // 20 MB/s: 40 KB a wake-up.
        assert_eq!(mark_for(2_000_000, ms(100), 1 << 30), 40_000);
        // 1 KB/s: every byte wakes.
        assert_eq!(mark_for(100, ms(100), 1 << 30), 2);
        // Near the end the mark never waits for bytes that may already sit above the socket.
        assert_eq!(mark_for(70_000_000, ms(100), MARGIN + 1000), 1000);
        assert_eq!(mark_for(70_000_000, ms(100), MARGIN), 1);
        assert_eq!(mark_for(70_000_000, Duration::ZERO, 0), 1);
    }

    #[cfg(unix)]
    #[test]
    fn a_socket_gets_the_mark_and_a_closed_one_is_left_alone() {
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let lowat = RecvLowat::new(Some(client.as_raw_fd()));
        let fd = client.as_raw_fd();
        lowat.set(4096, false);
        assert_eq!(lowat.mark(), 4096);
        assert_eq!(option(fd, libc::SO_RCVLOWAT), Some(4096));
        // Within a quarter of the receive buffer when raised with `fit`.
        lowat.set(1 << 30, true);
        assert!(lowat.mark() <= option(fd, libc::SO_RCVBUF).unwrap() / 4);
        // A body reader puts it back to one byte when it ends.
        drop(BodyWakes::new(lowat.clone()));
        assert_eq!(lowat.mark(), 1);
        lowat.close();
        lowat.set(8192, false);
        assert_eq!(lowat.mark(), 1);
    }
}
