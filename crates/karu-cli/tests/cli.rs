//! The `karu` command end to end: output bytes, messages and exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use karu_testkit::content;

const NAME: &str = "cli-object";
const SIZE: u64 = 20 << 20;

fn karu(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_karu"))
        .arg("--hermetic")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin
        && let Err(e) = input.write_all(s.as_bytes())
    {
        // A child that fails before reading its input (a usage error) may close it first.
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn fixture() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("object.bin");
    content::write_file(&path, NAME, SIZE).unwrap();
    let p = path.to_str().unwrap().to_owned();
    (dir, p)
}

#[test]
fn read_writes_exact_bytes_to_stdout_and_file() {
    let (dir, p) = fixture();
    let out = karu(&["read", &p, "1000", "5000"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, content::bytes(NAME, 1000, 5000));

    let file = dir.path().join("out.bin");
    let out = karu(
        &[
            "read",
            &format!("{p}#bytes=100-"),
            "7",
            "64",
            "-o",
            file.to_str().unwrap(),
            "--stats",
        ],
        None,
    );
    assert!(out.status.success());
    assert_eq!(std::fs::read(&file).unwrap(), content::bytes(NAME, 107, 64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("requested_bytes=64"));
}

#[test]
fn stat_and_cat() {
    let (_dir, p) = fixture();
    let out = karu(&["stat", &format!("/vsisubfile/10,{p}")], None);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("size: {}\netag: \n", SIZE - 10)
    );
    let out = karu(&["cat", &p], None);
    assert!(out.status.success());
    assert_eq!(out.stdout.len() as u64, SIZE);
    content::check(NAME, 0, &out.stdout).unwrap();
}

#[test]
fn plan_prints_transfers_and_amplification() {
    let ranges: String = (0..1000u64)
        .map(|i| format!("{},{}\n", i << 20, 64 << 10))
        .collect();
    // The guards plan of the spec's planner table.
    let out = karu(
        &[
            "-c",
            "KARU_COALESCE_MODE=guards",
            "plan",
            "https://example.com/data.bin",
            "--ranges",
            "-",
        ],
        Some(&ranges),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("transfers: 16 "), "{text}");
    assert!(text.contains("fetched/requested: 15.76"), "{text}");
    // The cost model on a 1 Gbit/s link with a 20 ms round trip: a 960 KiB gap costs 8 ms,
    // more than the slot it would save, so every read is its own request.
    let out = karu(
        &[
            "plan",
            "https://example.com/data.bin",
            "--ranges",
            "-",
            "--rtt",
            "20ms",
            "--bandwidth",
            "1Gbit",
        ],
        Some(&ranges),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("transfers: 1000 "), "{text}");
    assert!(text.contains("priors for --per-request"), "{text}");
    assert!(!text.contains("--rtt,"), "{text}");
    assert!(
        text.contains("predicted: 640.6 ms  (guards plan: 8.25 s"),
        "{text}"
    );
    // One 256 MiB read at 20 ms. With both rates given the model cuts it where pieces pay
    // (on 64 slots of 100 MB/s each); with one of them it is a guess of the other, so the
    // plan cuts at the cold cap instead, as the engine does until it has measured both.
    let big = "0,268435456\n";
    let link = ["--rtt", "20ms", "--per-connection", "100MB/s"];
    let plan_for = |more: &[&str]| {
        let mut args = vec!["plan", "https://example.com/big.bin", "--ranges", "-"];
        args.extend(link);
        args.extend(more);
        let out = karu(&args, Some(big));
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let one = plan_for(&[]);
    assert!(one.contains("transfers: 8 "), "{one}");
    assert!(one.contains("over 32 MiB cut"), "{one}");
    let both = plan_for(&["--bandwidth", "10Gbit"]);
    assert!(!both.contains("over 32 MiB cut"), "{both}");
    assert!(!both.contains("transfers: 8 "), "{both}");
    // No link given: the priors, named.
    let out = karu(
        &["plan", "https://example.com/data.bin", "--ranges", "-"],
        Some(&ranges),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("rtt 20.0 ms") && text.contains("(priors for --rtt, --bandwidth"),
        "{text}"
    );
    let out = karu(
        &[
            "plan",
            "https://example.com/x",
            "--ranges",
            "-",
            "--rtt",
            "soon",
        ],
        Some("0,10\n"),
    );
    assert_eq!(out.status.code(), Some(2)); // a usage error
    let out = karu(
        &[
            "plan",
            "https://example.com/data.bin",
            "--ranges",
            "-",
            "--gap",
            "0",
        ],
        Some(&ranges),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("transfers: 1000 "));
    let out = karu(
        &[
            "-c",
            "KARU_COALESCE_GAP=0",
            "plan",
            "https://example.com/x",
            "--ranges",
            "-",
        ],
        Some("0,10\n20,10\n"),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("transfers: 2 "));
}

#[test]
fn errors_are_one_line_on_stderr_with_distinct_exit_codes() {
    let (_dir, p) = fixture();
    let cases: [(&[&str], i32, &str); 6] = [
        (&["read", "", "0", "1"], 11, "empty URI"),
        (
            &["read", "/vsizip/a.zip/m", "0", "1"],
            12,
            "unsupported virtual filesystem",
        ),
        (&["read", &p, "0", "0"], 13, "empty"),
        (&["read", "/nonexistent/karu", "0", "1"], 15, "No such file"),
        (&["read", &p, &SIZE.to_string(), "1"], 18, "passes the end"),
        (
            &["-c", "KARU_CONCURRENCY=0", "stat", &p],
            21,
            "KARU_CONCURRENCY must be an integer",
        ),
    ];
    for (args, code, text) in cases {
        let out = karu(args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.starts_with("karu: ") && err.contains(text),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(out.stdout.is_empty());
    }
}

/// A timeout and an unsupported locator once both exited 12 (10 + |status|).
#[test]
fn timeout_and_unsupported_exit_with_different_codes() {
    let server = karu_testkit::server::RangeServer::start();
    let slow = server.url("/ok/slow?size=100&delay_ms=3000");
    let out = karu(
        &["-c", "KARU_REQUEST_TIMEOUT=1", "read", &slow, "0", "10"],
        None,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(32), "{err}");
    assert!(err.contains("request timeout"), "{err}");
    let out = karu(&["read", "/vsizip/a.zip/m", "0", "1"], None);
    assert_eq!(out.status.code(), Some(12));
}

#[test]
fn read_stat_cat_and_plan_work_on_http_urls() {
    let server = karu_testkit::server::RangeServer::start();
    let url = server.url("/ok/web?size=3000000");
    let out = karu(&["read", &url, "12345", "1000", "--stats"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, content::bytes("web", 12345, 1000));
    let stats = String::from_utf8_lossy(&out.stderr);
    assert!(
        stats.contains("transfers=1 ") && stats.contains("new_connections=1 "),
        "{stats}"
    );
    let out = karu(&["stat", &url], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("size: 3000000\netag: \""), "{text}");
    let out = karu(&["cat", &url], None);
    assert_eq!(out.stdout.len(), 3_000_000);
    content::check("web", 0, &out.stdout).unwrap();
    let out = karu(&["plan", &url, "--ranges", "-"], Some("0,10\n100,10\n"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("transfers: 1 "));
    let out = karu(&["read", &server.url("/ok/missing"), "0", "1"], None);
    assert_eq!(out.status.code(), Some(23));
}

/// `cat` once learnt only the size, so no chunk carried `If-Match`: an object replaced
/// mid-read came out as version 0 then version 1, with exit 0. Every chunk is now pinned to
/// the first answer's ETag.
#[test]
fn cat_never_splices_two_versions() {
    let server = karu_testkit::server::RangeServer::start();
    let size = 20u64 << 20; // three 8 MiB chunks
    // Unchanged: every chunk carries the ETag of the first answer, and the bytes are v0.
    let url = server.url(&format!("/ok/cat-same?size={size}"));
    let out = karu(&["cat", &url], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len() as u64, size);
    content::check("cat-same", 0, &out.stdout).unwrap();
    let etag = karu_testkit::server::etag("cat-same", size, 0);
    // Three 8 MiB reads; the cost planner may cut each into pieces, each pinned alike.
    let chunks: Vec<_> = server.log().into_iter().skip(1).collect();
    assert!(chunks.len() >= 3, "{chunks:?}");
    for c in &chunks {
        assert_eq!(c.header("if-match"), Some(etag.as_str()), "{c:?}");
    }

    // Replaced after the first two requests: at least one chunk meets version 1.
    let url = server.url(&format!("/etag-change/cat-swap?size={size}&at=2"));
    let out = karu(&["cat", &url], None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(24), "{err}");
    assert!(err.contains("HTTP 412"), "{err}");
    assert!((out.stdout.len() as u64) < size);
    // Whatever was written before the failure is version 0, and only whole chunks.
    content::check("cat-swap", 0, &out.stdout).unwrap();
    assert_eq!(out.stdout.len() % (8 << 20), 0);
}

#[test]
fn get_downloads_with_plain_progress_lines_and_a_summary() {
    let server = karu_testkit::server::RangeServer::start();
    let size = 3_000_000u64;
    let url = server.url(&format!("/ok/get-object?size={size}"));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("got.bin");
    let d = dest.to_str().unwrap();
    let args = [
        "get",
        &url,
        d,
        "--chunk-size",
        "262144",
        "--parallelism",
        "4",
    ];
    let out = karu(&args, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    content::check("get-object", 0, &std::fs::read(&dest).unwrap()).unwrap();
    assert_eq!(std::fs::metadata(&dest).unwrap().len(), size);
    // Not a terminal: plain lines, the last one the total.
    assert_eq!(stderr.lines().last(), Some("3000000/3000000 bytes"));
    assert!(stderr.lines().count() <= 11, "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{d}: 3000000 bytes in ")),
        "{stdout}"
    );
    // One measured stream from the first byte, whose answer is the probe (joined by chunks
    // only if it ran slow): the summary counts what the server saw.
    let log = server.log();
    let requests = log.len();
    assert_eq!(log[0].range.as_deref(), Some("bytes=0-"));
    assert!(
        stdout.contains(&format!(", {requests} requests, 0 retries, 0 throttled")),
        "{stdout}"
    );

    // The destination exists now: refused (exit 15, file error) unless --overwrite.
    let again = karu(&args, None);
    assert_eq!(again.status.code(), Some(15));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("destination already exists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let mut overwrite = args.to_vec();
    overwrite.push("--overwrite");
    assert!(karu(&overwrite, None).status.success());
    let bad = karu(&["get", &url, d, "--overwrite", "--parallelism", "0"], None);
    assert_eq!(bad.status.code(), Some(13));
}

/// Starts `karu get` on a slow object, interrupts it with SIGINT once its temporary file
/// exists, and returns its output.
fn interrupted_get(url: &str, dest: &std::path::Path, extra: &[&str]) -> Output {
    let dir = dest.parent().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_karu"))
        .args(["--hermetic", "get", url, dest.to_str().unwrap()])
        .args(["--chunk-size", "1048576", "--parallelism", "2"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let has_part = || {
        std::fs::read_dir(dir).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".karu.part.")
        })
    };
    while !has_part() {
        assert!(
            started.elapsed().as_secs() < 10,
            "no temporary file appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Some chunks land first, so a resume has something to keep.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    // SAFETY: signals our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed().as_secs() < 20);
    out
}

fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn sigint_stops_get_with_130_and_cleans_up_or_keeps_a_resumable_part() {
    let server = karu_testkit::server::RangeServer::start();
    let size = 16u64 << 20;
    // 2 MB/s per request: 16 MiB in 1 MiB chunks two at a time takes about 4 s.
    let url = server.url(&format!("/trickle/sigint?size={size}&rate=2000000"));
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.bin");

    let out = interrupted_get(&url, &dest, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        names_in(dir.path()).is_empty(),
        "{:?}",
        names_in(dir.path())
    );

    let out = interrupted_get(&url, &dest, &["--resume"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume` to continue"), "{stderr}");
    let left = names_in(dir.path());
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter().any(|n| n.starts_with("out.bin.karu.part.")),
        "{left:?}"
    );
    assert!(left.contains(&"out.bin.karu.resume".to_owned()), "{left:?}");
    let sidecar = std::fs::read_to_string(dir.path().join("out.bin.karu.resume")).unwrap();
    let kept = sidecar.lines().filter(|l| l.starts_with("done ")).count();
    assert!(kept >= 1, "{sidecar}");

    let out = karu(
        &[
            "get",
            &url,
            dest.to_str().unwrap(),
            "--chunk-size",
            "1048576",
            "--resume",
            "--stats",
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("resumed_chunks={kept}")),
        "{stderr}"
    );
    // --stats gives the window's history: no throttling, the default 8 throughout.
    assert!(
        stderr.contains("parallelism: lowest=8 final=8 highest=8 cuts=0"),
        "{stderr}"
    );
    assert_eq!(names_in(dir.path()), ["out.bin"]);
    let data = std::fs::read(&dest).unwrap();
    assert_eq!(data.len() as u64, size);
    content::check("sigint", 0, &data).unwrap();
}
