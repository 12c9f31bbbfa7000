//! `--instructions`: instructions per request, counted by valgrind's callgrind (deterministic,
//! unlike CPU time on a shared machine), for one plain HTTP GET (the test kit server) and one
//! signed S3 GET (s3s-fs), karu beside object_store's `get_range`.
//!
//! Each reader runs in a child of this same release binary under
//! `valgrind --tool=callgrind`, once with 1 request and once with 1 + [`MEASURED`] requests,
//! one after another on one connection; the difference divided by [`MEASURED`] is the cost of
//! one request on a warm client (start-up, the connection and the first credential lookup
//! cancel out). karu gets its reads as one batch, as in the R rows, with
//! `KARU_CONCURRENCY=1` so that they too go one after another on one connection; object_store
//! gets one `get_range` after another. Every read's bytes are checked. With
//! `KARU_BENCH_CALLGRIND_DIR` set, the profiles are kept there for `callgrind_annotate`.

use std::io::Write as _;
use std::path::Path as FsPath;
use std::process::Command;

use karu::{Client, Locator, Read, Status};
use object_store::ObjectStoreExt as _;

use crate::readers::{self, Target};
use crate::servers::Server;
use crate::sigv4::S3Access;
use crate::workload::{KIB, Kind, MIB, Workload};

/// The internal mode of a measured child.
pub const CHILD: &str = "--instructions-child";

/// Requests whose cost is measured (after one warm-up request): enough that the odd timer
/// or wake-up that lands in one run is spread thin (10 moved the figure by up to 15 %).
const MEASURED: u64 = 50;

/// Bytes per read: small, so the figure is the per-request work, not copying.
const READ: u64 = 4 * KIB;

/// The object read (content by name, from `karu_testkit::content`).
const OBJECT: &str = "instructions-1m.bin";

/// The readers compared.
const READERS: [&str; 2] = ["karu", "object_store get_range"];

/// Runs the comparison and prints a Markdown table.
pub fn main() {
    let w = Workload {
        id: 'I',
        title: "instructions per request".into(),
        objects: vec![(OBJECT.into(), MIB)],
        reads: Vec::new(),
        kind: Kind::Reads,
    };
    let mut servers = vec![Server::testkit(std::slice::from_ref(&w))];
    match Server::s3(std::slice::from_ref(&w)) {
        Ok(s) => servers.push(s),
        Err(e) => eprintln!("s3s-fs: not run ({e})"),
    }
    let mut lines = vec![
        "| request | server | karu | object_store `get_range` | karu / object_store |".to_owned(),
        "|---|---|--:|--:|--:|".to_owned(),
    ];
    for server in &servers {
        let target = server.target(server.base());
        let per: Vec<u64> = READERS
            .iter()
            .map(|&reader| {
                let at = |n: u64| instructions(reader, &target, n);
                (at(1 + MEASURED).saturating_sub(at(1))) / MEASURED
            })
            .collect();
        let what = if target.s3.is_some() {
            "signed S3 GET"
        } else {
            "plain HTTP GET"
        };
        lines.push(format!(
            "| {what} | {} | {} | {} | {:.2} |",
            server.name(),
            group(per[0]),
            group(per[1]),
            per[0] as f64 / per[1].max(1) as f64
        ));
    }
    // The table is the program's output; a closed stdout leaves no one to tell.
    let _ = writeln!(std::io::stdout(), "{}", lines.join("\n"));
}

/// `n` with thousands separators.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Instructions the whole child (every thread) executed for `n` requests by `reader`.
fn instructions(reader: &str, target: &Target, n: u64) -> u64 {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("callgrind.out");
    let mut cmd = Command::new("valgrind");
    if let Some(s3) = &target.s3 {
        cmd.envs(s3.env());
    }
    let status = cmd
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg("--quiet")
        .arg(std::env::current_exe().expect("this program"))
        .args([CHILD, reader, &n.to_string(), &target.base, &target.prefix])
        .status()
        .expect("valgrind runs (apt-get install valgrind)");
    assert!(status.success(), "{reader} under callgrind: {status}");
    if let Some(keep) = std::env::var_os("KARU_BENCH_CALLGRIND_DIR") {
        let server = if target.s3.is_some() { "s3" } else { "http" };
        let name = format!("callgrind.{}.{server}.{n}", reader.replace(' ', "_"));
        // Keeping a profile is a convenience: the figure stands without it.
        let _ = std::fs::copy(&out, std::path::Path::new(&keep).join(name));
    }
    totals(&out).unwrap_or_else(|| panic!("no totals in {}", out.display()))
}

/// The `totals:` (or `summary:`) line of a callgrind output file: instructions executed.
fn totals(file: &FsPath) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The measured child: `n` reads of [`READ`] bytes, one after another.
pub fn child(args: &[String]) {
    let [reader, n, base, prefix] = args else {
        panic!("{CHILD} READER N BASE PREFIX");
    };
    let n: u64 = n.parse().expect("a count");
    let target = Target {
        base: base.clone(),
        prefix: prefix.clone(),
        s3: S3Access::from_env(),
    };
    // Distinct offsets: no reader may answer one from another's bytes.
    let offsets = (0..n).map(|i| i * 16 * KIB);
    match reader.as_str() {
        "karu" => {
            let client: Client = target.karu_client_with(Some(0), Some(1), None);
            let locator = Locator::parse(&target.url(OBJECT)).expect("a locator");
            let reads = offsets
                .map(|offset| Read::new(&locator, offset, READ).tag(offset))
                .collect();
            let mut done = 0;
            for read in &client.submit(reads).expect("a batch") {
                let offset = read.tag;
                assert_eq!(read.status(), Status::Ok, "{offset}: {:?}", read.result);
                readers::check(OBJECT, offset, read.bytes(), READ);
                done += 1;
            }
            assert_eq!(done, n, "every read completes");
        }
        "object_store get_range" => {
            let store = readers::store(&target);
            let path = object_store::path::Path::from(format!("{}{OBJECT}", target.prefix));
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            rt.block_on(async {
                for offset in offsets {
                    let got = store
                        .get_range(&path, offset..offset + READ)
                        .await
                        .expect("a get_range");
                    readers::check(OBJECT, offset, &got, READ);
                }
            });
        }
        other => panic!("unknown reader {other:?}"),
    }
}
