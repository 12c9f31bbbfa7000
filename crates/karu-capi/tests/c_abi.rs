//! Compiles the C programs in `tests/c/` with gcc against `include/karu.h` and the freshly
//! built `libkaru`, and runs them. Each program prints one line per check and exits non-zero
//! when any check fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use karu_testkit::server::RangeServer;

/// `target/<profile>`: the directory holding `libkaru.so` and `libkaru.a`.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/c_abi-<hash>
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    assert!(
        dir.join("libkaru.so").exists() || dir.join("libkaru.dylib").exists(),
        "libkaru not built in {}",
        dir.display()
    );
    dir
}

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("c-abi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Compiles `tests/c/<name>.c` (plus extra arguments) into `out`, panicking with gcc's output.
fn compile_with(name: &str, out: &Path, link: &[String]) {
    let lib = lib_dir();
    let mut cmd = Command::new("gcc");
    cmd.args([
        "-std=c11",
        "-D_GNU_SOURCE",
        "-g",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
    ])
    .arg("-I")
    .arg(crate_dir().join("include"))
    .arg(crate_dir().join(format!("tests/c/{name}.c")))
    .arg("-o")
    .arg(out)
    .args(link)
    .arg("-lpthread");
    let _ = lib;
    let output = cmd.output().expect("run gcc");
    assert!(
        output.status.success(),
        "gcc failed for {name}.c:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Compiles against the shared library (with an rpath to it).
fn compile(name: &str, dir: &Path) -> PathBuf {
    let lib = lib_dir();
    let out = dir.join(name);
    compile_with(
        name,
        &out,
        &[
            format!("-L{}", lib.display()),
            "-lkaru".into(),
            format!("-Wl,-rpath,{}", lib.display()),
        ],
    );
    out
}

/// Runs a program and asserts success, printing its check lines.
fn run(program: &Path, args: &[&str], wrapper: &[&str]) {
    let mut cmd = if let Some((first, rest)) = wrapper.split_first() {
        let mut c = Command::new(first);
        c.args(rest).arg(program);
        c
    } else {
        Command::new(program)
    };
    let output = cmd.args(args).output().expect("run C test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "{} failed ({}):\n{}\n{}",
        program.display(),
        output.status,
        stdout
            .lines()
            .filter(|l| l.starts_with("FAIL"))
            .collect::<Vec<_>>()
            .join("\n"),
        stderr
    );
}

/// The HTTP test server with the objects the C programs read, and a local copy of
/// `obj.bin` for comparison.
fn server(dir: &Path) -> (RangeServer, String, PathBuf) {
    let server = RangeServer::start();
    let copy = dir.join("obj.bin");
    karu_testkit::content::write_file(&copy, "obj.bin", 1 << 20).expect("local copy");
    server.register("obj.bin", 1 << 20);
    let base = server.url("");
    (server, base.trim_end_matches('/').to_string(), copy)
}

#[test]
fn layout() {
    let dir = scratch("layout");
    let program = compile("layout", &dir);
    run(&program, &[], &[]);
}

#[test]
fn layout_static_link() {
    let dir = scratch("static");
    let out = dir.join("layout-static");
    let lib = lib_dir();
    compile_with(
        "layout",
        &out,
        &[
            lib.join("libkaru.a").display().to_string(),
            "-ldl".into(),
            "-lm".into(),
            "-lrt".into(),
        ],
    );
    run(&out, &[], &[]);
}

#[test]
fn api_local() {
    let dir = scratch("api");
    let program = compile("api", &dir);
    run(&program, &[dir.to_str().unwrap()], &[]);
}

#[test]
fn http() {
    let dir = scratch("http");
    let (_server, base, copy) = server(&dir);
    let program = compile("http", &dir);
    run(
        &program,
        &[&base, copy.to_str().unwrap(), dir.to_str().unwrap()],
        &[],
    );
}

#[test]
fn fork() {
    let dir = scratch("fork");
    let (_server, base, copy) = server(&dir);
    let program = compile("fork", &dir);
    run(&program, &[&base, copy.to_str().unwrap()], &[]);
}

#[test]
fn readme_example() {
    let dir = scratch("readme");
    let program = compile("readme_example", &dir);
    let data = dir.join("hello.txt");
    std::fs::write(&data, b"hello, ranges").unwrap();
    run(&program, &[data.to_str().unwrap()], &[]);
}

/// One run of the C tests under valgrind: no invalid access, no definite leak.
#[test]
fn valgrind() {
    if !have("valgrind") {
        assert!(
            std::env::var_os("CI").is_none(),
            "valgrind is required in CI"
        );
        println!("skipped: valgrind is not installed");
        return;
    }
    let dir = scratch("valgrind");
    let (_server, base, copy) = server(&dir);
    let memcheck = [
        "valgrind",
        "--quiet",
        "--error-exitcode=1",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "--show-leak-kinds=definite",
    ];
    let api = compile("api", &dir);
    run(&api, &[dir.to_str().unwrap()], &memcheck);
    let http = compile("http", &dir);
    run(
        &http,
        &[&base, copy.to_str().unwrap(), dir.to_str().unwrap()],
        &memcheck,
    );
    let _ = Duration::ZERO;
}
