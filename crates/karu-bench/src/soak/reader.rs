//! The soak's reading process: batches of reads from the chaos route on one client, every
//! byte checked, a watchdog per batch; one `SOAK` line of figures at the end.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use karu::{Client, Config, Locator, Next, Read, Status};
use karu_testkit::content;
use karu_testkit::server::{etag, versioned_name};

use super::{
    BATCH, CHILD, MAX_READ, OBJECT_SIZE, OBJECTS, PER_MILLE, SLOT, WATCHDOG, WORKERS, object_name,
};
use crate::say;

#[derive(Default)]
struct Totals {
    reads: u64,
    ok: u64,
    new_version: u64,
    failed: u64,
    statuses: BTreeMap<String, u64>,
    wrong_reads: u64,
    wrong_bytes: u64,
    wrongs: Vec<String>,
    hung: u64,
    retries: u64,
    throttled: u64,
    resumed: u64,
    new_connections: u64,
    max_read: Duration,
    max_gap: Duration,
    max_batch: Duration,
    batches: u64,
    rss_early_kib: u64,
}

/// The child: `--soak-child BASE READS SEED`. Prints the `SOAK` line (and `WRONG` lines) and
/// exits non-zero on a hang.
pub fn child(args: &[String]) {
    let parsed = match args {
        [base, reads, seed] => reads
            .parse::<u64>()
            .ok()
            .zip(seed.parse::<u64>().ok())
            .map(|(r, s)| (base.clone(), r, s)),
        _ => None,
    };
    let Some((base, reads, seed)) = parsed else {
        say!("usage: {CHILD} BASE READS SEED");
        std::process::exit(2);
    };
    let started = Instant::now();
    let cpu0 = cpu_seconds();
    let mut config = Config::empty();
    let client = config
        .set("KARU_COALESCE_GAP", Some("0"))
        .map(|_| ())
        .and_then(|()| Client::new(&config));
    let client = match client {
        Ok(c) => Arc::new(c),
        Err(e) => {
            say!("soak: client: {e}");
            std::process::exit(2);
        }
    };
    let locators: Vec<Locator> = (0..OBJECTS)
        .map(|i| {
            let url = format!(
                "{base}/chaos/{}?size={OBJECT_SIZE}&seed={seed}&per_mille={PER_MILLE}",
                object_name(i)
            );
            Locator::parse(&url).unwrap_or_else(|e| {
                say!("soak: {url}: {e}");
                std::process::exit(2)
            })
        })
        .collect();
    let locators = Arc::new(locators);
    let totals = Arc::new(Mutex::new(Totals::default()));
    let next = Arc::new(AtomicU64::new(0));
    let batches = reads.div_ceil(BATCH);
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (client, locators, totals, next) = (
                client.clone(),
                locators.clone(),
                totals.clone(),
                next.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let b = next.fetch_add(1, Ordering::SeqCst);
                    if b >= batches {
                        return;
                    }
                    let n = BATCH.min(reads - b * BATCH);
                    let one = run_batch(&client, &locators, seed, b, n);
                    let hung = one.hung > 0;
                    let mut t = totals.lock().unwrap_or_else(|e| e.into_inner());
                    merge(&mut t, one);
                    if t.batches == WORKERS {
                        t.rss_early_kib = proc_status_kib("VmRSS:");
                    }
                    if hung {
                        // The batch cannot be dropped safely (its reads may never end): report
                        // and leave.
                        print_totals(&t, started, cpu0);
                        std::process::exit(3);
                    }
                }
            })
        })
        .collect();
    let mut lost = false;
    for w in workers {
        lost |= w.join().is_err();
    }
    let t = totals.lock().unwrap_or_else(|e| e.into_inner());
    print_totals(&t, started, cpu0);
    if lost {
        say!("soak: a reading thread panicked");
        std::process::exit(4);
    }
}

/// One batch's reads: `(object, offset, length)`, each in its own slot.
fn plan_batch(seed: u64, b: u64, n: u64) -> Vec<(u64, u64, u64)> {
    let mut rng = fastrand::Rng::with_seed(seed ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let slots_per_object = OBJECT_SIZE / SLOT;
    let mut slots: Vec<u64> = (0..OBJECTS * slots_per_object).collect();
    // A partial Fisher-Yates shuffle: the first n slots, all distinct.
    for i in 0..n as usize {
        let j = rng.usize(i..slots.len());
        slots.swap(i, j);
    }
    slots[..n as usize]
        .iter()
        .map(|&slot| {
            let offset = (slot % slots_per_object) * SLOT + rng.u64(0..SLOT - MAX_READ);
            (slot / slots_per_object, offset, rng.u64(1..=MAX_READ))
        })
        .collect()
}

fn run_batch(client: &Client, locators: &[Locator], seed: u64, b: u64, n: u64) -> Totals {
    let plan = plan_batch(seed, b, n);
    let pinned = b.is_multiple_of(2);
    let reads: Vec<Read> = plan
        .iter()
        .enumerate()
        .map(|(tag, &(o, offset, len))| {
            let r = Read::new(&locators[o as usize], offset, len).tag(tag as u64);
            if pinned {
                r.if_match(&etag(&object_name(o), OBJECT_SIZE, 0))
            } else {
                r
            }
        })
        .collect();
    let mut t = Totals {
        reads: n,
        batches: 1,
        ..Totals::default()
    };
    let submitted = Instant::now();
    let batch = match client.submit(reads) {
        Ok(batch) => batch,
        Err(e) => {
            *t.statuses.entry(format!("{:?}", e.status())).or_default() += n;
            t.failed = n;
            return t;
        }
    };
    let deadline = submitted + WATCHDOG;
    let mut last = submitted;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let done = match batch.next_timeout(left) {
            Next::Done(done) => done,
            Next::End => break,
            Next::Timeout => {
                t.hung = batch.pending() as u64;
                say!("soak: batch {b}: {} reads hung", t.hung);
                std::mem::forget(batch);
                return t;
            }
        };
        let now = Instant::now();
        t.max_gap = t.max_gap.max(now - last);
        t.max_read = t.max_read.max(now - submitted);
        last = now;
        let Some(&(o, offset, len)) = plan.get(done.tag as usize) else {
            t.wrong_reads += 1;
            t.wrongs
                .push(format!("batch {b}: unknown tag {}", done.tag));
            continue;
        };
        let name = object_name(o);
        let got = done.bytes();
        let status = done.status();
        match check(&name, offset, len, pinned, status, got) {
            Outcome::Version(v) => {
                t.ok += 1;
                t.new_version += u64::from(v > 0);
            }
            Outcome::Failed => {
                t.failed += 1;
                *t.statuses.entry(format!("{status:?}")).or_default() += 1;
            }
            Outcome::Wrong(differing) => {
                if status != Status::Ok {
                    t.failed += 1;
                    *t.statuses.entry(format!("{status:?}")).or_default() += 1;
                }
                t.wrong_reads += 1;
                t.wrong_bytes += differing;
                if t.wrongs.len() < 5 {
                    t.wrongs.push(format!(
                        "batch {b}: {name} [{offset}, +{len}) {status:?}: {} bytes back, \
                         {differing} wrong",
                        got.len()
                    ));
                }
            }
        }
    }
    t.max_batch = submitted.elapsed();
    let stats = batch.stats();
    t.retries = stats.retries;
    t.throttled = stats.throttled;
    t.resumed = stats.resumed;
    t.new_connections = stats.new_connections;
    t
}

/// What one completed read proved.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Success with exactly the bytes of this version of the object.
    Version(u64),
    /// A failure whose kept prefix (if any) is right.
    Failed,
    /// Bytes that are not the content: this many wrong (at least 1).
    Wrong(u64),
}

/// Checks one read of `len` bytes at `offset` of object `name` that ended with `status` and
/// `got` bytes. A read pinned to version 0 must return version 0; an unpinned one may return
/// version 1, but whole: a splice of both is wrong.
fn check(name: &str, offset: u64, len: u64, pinned: bool, status: Status, got: &[u8]) -> Outcome {
    let v0 = content::bytes(name, offset, got.len());
    if status != Status::Ok {
        return match differing(got, &v0) {
            0 => Outcome::Failed,
            n => Outcome::Wrong(n),
        };
    }
    let short = len.abs_diff(got.len() as u64);
    match differing(got, &v0) + short {
        0 => return Outcome::Version(0),
        _ if pinned || short > 0 => {}
        _ => {
            let v1 = content::bytes(&versioned_name(name, 1), offset, got.len());
            if got == v1.as_slice() {
                return Outcome::Version(1);
            }
        }
    }
    Outcome::Wrong((differing(got, &v0) + short).max(1))
}

fn differing(a: &[u8], b: &[u8]) -> u64 {
    a.iter().zip(b).filter(|(x, y)| x != y).count() as u64
}

fn merge(t: &mut Totals, one: Totals) {
    t.reads += one.reads;
    t.ok += one.ok;
    t.new_version += one.new_version;
    t.failed += one.failed;
    for (k, v) in one.statuses {
        *t.statuses.entry(k).or_default() += v;
    }
    t.wrong_reads += one.wrong_reads;
    t.wrong_bytes += one.wrong_bytes;
    t.wrongs.extend(one.wrongs);
    t.wrongs.truncate(5);
    t.hung += one.hung;
    t.retries += one.retries;
    t.throttled += one.throttled;
    t.resumed += one.resumed;
    t.new_connections += one.new_connections;
    t.max_read = t.max_read.max(one.max_read);
    t.max_gap = t.max_gap.max(one.max_gap);
    t.max_batch = t.max_batch.max(one.max_batch);
    t.batches += one.batches;
    if t.batches.is_multiple_of(20) {
        say!(
            "soak: {} batches, {} reads, {} failed, {} wrong bytes",
            t.batches,
            t.reads,
            t.failed,
            t.wrong_bytes
        );
    }
}

fn print_totals(t: &Totals, started: Instant, cpu0: f64) {
    let mut line = format!(
        "SOAK reads={} ok={} new_version={} failed={} wrong_reads={} wrong_bytes={} hung={} \
         retries={} throttled={} resumed={} new_connections={} max_read_ms={} max_gap_ms={} \
         max_batch_ms={} batches={} hwm_kib={} rss_early_kib={} rss_end_kib={} wall_s={:.1} \
         cpu_s={:.1}",
        t.reads,
        t.ok,
        t.new_version,
        t.failed,
        t.wrong_reads,
        t.wrong_bytes,
        t.hung,
        t.retries,
        t.throttled,
        t.resumed,
        t.new_connections,
        t.max_read.as_millis(),
        t.max_gap.as_millis(),
        t.max_batch.as_millis(),
        t.batches,
        proc_status_kib("VmHWM:"),
        t.rss_early_kib,
        proc_status_kib("VmRSS:"),
        started.elapsed().as_secs_f64(),
        cpu_seconds() - cpu0,
    );
    for (status, count) in &t.statuses {
        let _ = write!(line, " status:{status}={count}");
    }
    let mut out = std::io::stdout().lock();
    for w in &t.wrongs {
        let _ = writeln!(out, "WRONG {w}");
    }
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A `VmHWM:`/`VmRSS:` line of /proc/self/status, in KiB (0 when unreadable).
fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// User plus system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given, which is zero-initialised.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return 0.0;
        }
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_checked_byte_by_byte_and_splices_are_wrong() {
        let name = "soak/obj-00.bin";
        let v0 = content::bytes(name, 100, 50);
        let v1 = content::bytes(&versioned_name(name, 1), 100, 50);
        assert_eq!(
            check(name, 100, 50, true, Status::Ok, &v0),
            Outcome::Version(0)
        );
        assert_eq!(
            check(name, 100, 50, false, Status::Ok, &v1),
            Outcome::Version(1)
        );
        // Version 1 where version 0 was pinned.
        assert!(matches!(
            check(name, 100, 50, true, Status::Ok, &v1),
            Outcome::Wrong(n) if n > 40
        ));
        // A splice: version 0's first half, version 1's second.
        let mut splice = v0.clone();
        splice[25..].copy_from_slice(&v1[25..]);
        assert!(matches!(
            check(name, 100, 50, false, Status::Ok, &splice),
            Outcome::Wrong(n) if (1..=25).contains(&n)
        ));
        // One flipped byte; a short success.
        let mut flipped = v0.clone();
        flipped[7] ^= 1;
        assert_eq!(
            check(name, 100, 50, true, Status::Ok, &flipped),
            Outcome::Wrong(1)
        );
        assert_eq!(
            check(name, 100, 50, false, Status::Ok, &v0[..49]),
            Outcome::Wrong(1)
        );
        // Failures: nothing kept, a right prefix, a wrong prefix.
        assert_eq!(
            check(name, 100, 50, true, Status::Http, &[]),
            Outcome::Failed
        );
        assert_eq!(
            check(name, 100, 50, true, Status::Range, &v0[..10]),
            Outcome::Failed
        );
        assert_ne!(
            check(name, 100, 50, true, Status::Range, &v1[..10]),
            Outcome::Failed
        );
    }

    #[test]
    fn plans_are_distinct_slots_and_reproducible() {
        let a = plan_batch(3, 7, BATCH);
        assert_eq!(a, plan_batch(3, 7, BATCH));
        assert_ne!(a, plan_batch(3, 8, BATCH));
        let mut slots: Vec<(u64, u64)> = a.iter().map(|&(o, off, _)| (o, off / SLOT)).collect();
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), BATCH as usize);
        for (o, off, len) in a {
            assert!(o < OBJECTS && (1..=MAX_READ).contains(&len));
            assert!(off % SLOT + len < SLOT, "a gap to the next slot");
        }
    }
}
