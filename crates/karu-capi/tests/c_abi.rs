//! Compiles the C programs in `tests/c/` with gcc against `include/karu.h` and the freshly
//! built `libkaru`, and runs them. Each program prints one line per check and exits non-zero
//! when any check fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use karu_testkit::server::RangeServer;

/// `target/<profile>`: the directory holding `libkaru.so` and `libkaru.a`.
///
/// `cargo test` builds a crate's integration tests but not its `cdylib`/`staticlib`, so the
/// first caller builds them (once per test process) with the same cargo and profile.
fn lib_dir() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test executable path");
            // target/<profile>/deps/c_abi-<hash>
            let dir = exe
                .parent()
                .and_then(Path::parent)
                .expect("target dir")
                .to_path_buf();
            let mut cargo = Command::new(env!("CARGO"));
            cargo.args(["build", "-p", "karu-capi", "--lib"]);
            if dir.file_name().is_some_and(|n| n == "release") {
                cargo.arg("--release");
            }
            let status = cargo.status().expect("run cargo build -p karu-capi");
            assert!(status.success(), "cargo build -p karu-capi failed");
            assert!(
                dir.join("libkaru.so").exists() || dir.join("libkaru.dylib").exists(),
                "libkaru not built in {}",
                dir.display()
            );
            dir
        })
        .clone()
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

/// Runs a program and asserts success, printing its check lines; returns its stdout.
fn run(program: &Path, args: &[&str], wrapper: &[&str]) -> String {
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
    stdout.into_owned()
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
fn credentials() {
    let dir = scratch("credentials");
    let (_server, base, copy) = server(&dir);
    let program = compile("credentials", &dir);
    run(&program, &[&base, copy.to_str().unwrap()], &[]);
}

#[test]
fn buffers() {
    let dir = scratch("buffers");
    let (_server, base, copy) = server(&dir);
    let program = compile("buffers", &dir);
    run(&program, &[&base, copy.to_str().unwrap()], &[]);
}

/// The C++ standards the facade is built with: C++17 and the newest g++ knows as C++23.
fn cxx_standards() -> Vec<&'static str> {
    let knows = |std: &str| {
        Command::new("g++")
            .args([&format!("-std={std}"), "-x", "c++", "-fsyntax-only", "-"])
            .stdin(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let newest = ["c++23", "c++2b"].into_iter().find(|s| knows(s));
    assert!(
        newest.is_some(),
        "g++ knows neither -std=c++23 nor -std=c++2b"
    );
    ["c++17"].into_iter().chain(newest).collect()
}

/// Compiles `tests/cpp/<name>.cpp` with g++ as `std` against the shared library.
fn compile_cxx(name: &str, std: &str, dir: &Path) -> PathBuf {
    let lib = lib_dir();
    let out = dir.join(format!("{name}-{std}"));
    let output = Command::new("g++")
        .arg(format!("-std={std}"))
        .args([
            "-g",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-I",
        ])
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join(format!("tests/cpp/{name}.cpp")))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib.display()))
        .arg("-lkaru")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .output()
        .expect("run g++");
    assert!(
        output.status.success(),
        "g++ -std={std} failed for {name}.cpp:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// The C++ facade `karu/karu.hpp`, built as C++17 and as C++23, against the HTTP test server
/// and a local file.
#[test]
fn cxx_facade() {
    if !have("g++") {
        assert!(std::env::var_os("CI").is_none(), "g++ is required in CI");
        println!("skipped: g++ is not installed");
        return;
    }
    let dir = scratch("facade");
    let (_server, base, copy) = server(&dir);
    for std in cxx_standards() {
        let program = compile_cxx("facade", std, &dir);
        run(
            &program,
            &[&base, copy.to_str().unwrap(), dir.to_str().unwrap()],
            &[],
        );
    }
}

/// The ten-line example of README.md, compiled as written, against the shared library.
fn readme_example_source(dir: &Path) -> PathBuf {
    readme_block(dir, "c", "example.c")
}

/// The first ```` ```lang ```` block of README.md, written to `dir/file`.
fn readme_block(dir: &Path, lang: &str, file: &str) -> PathBuf {
    let readme = std::fs::read_to_string(crate_dir().join("README.md")).expect("README.md");
    let fence = format!("```{lang}\n");
    let start = readme.find(&fence).expect("a code block in README.md") + fence.len();
    let len = readme[start..].find("```").expect("closed code block");
    let source = &readme[start..start + len];
    assert!(
        source.lines().count() <= 12,
        "the README example stays about ten lines"
    );
    let path = dir.join(file);
    std::fs::write(&path, source).expect("write the example");
    path
}

#[test]
fn readme_example() {
    let dir = scratch("readme");
    let source = readme_example_source(&dir);
    let program = dir.join("example");
    let lib = lib_dir();
    let status = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir().join("include"))
        .arg(&source)
        .arg("-o")
        .arg(&program)
        .arg(format!("-L{}", lib.display()))
        .arg("-lkaru")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .status()
        .expect("run gcc");
    assert!(status.success(), "the README example compiles");
    let data = dir.join("hello.txt");
    std::fs::write(&data, b"hello, ranges").unwrap();
    let out = run(&program, &[data.to_str().unwrap()], &[]);
    assert_eq!(out.trim(), "read: ranges");
}

/// Installs header, library and karu.pc into a scratch prefix the way README.md says, and
/// builds the README example with `pkg-config --cflags --libs karu`, both include spellings.
#[test]
fn pkg_config_install() {
    if !have("pkg-config") {
        assert!(
            std::env::var_os("CI").is_none(),
            "pkg-config is required in CI"
        );
        println!("skipped: pkg-config is not installed");
        return;
    }
    let dir = scratch("pkgconfig");
    let prefix = dir.join("prefix");
    let lib = lib_dir();
    for sub in ["include/karu", "lib/pkgconfig"] {
        std::fs::create_dir_all(prefix.join(sub)).unwrap();
    }
    for (from, to) in [("karu.h", "karu.h"), ("karu/karu.hpp", "karu.hpp")] {
        std::fs::copy(
            crate_dir().join("include").join(from),
            prefix.join("include/karu").join(to),
        )
        .unwrap();
    }
    std::fs::copy(lib.join("libkaru.so"), prefix.join("lib/libkaru.so")).unwrap();
    let pc = std::fs::read_to_string(crate_dir().join("karu.pc")).unwrap();
    let pc = pc.replace("prefix=/usr/local", &format!("prefix={}", prefix.display()));
    std::fs::write(prefix.join("lib/pkgconfig/karu.pc"), pc).unwrap();
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "karu"])
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .output()
        .expect("run pkg-config");
    assert!(flags.status.success(), "pkg-config knows karu");
    let flags = String::from_utf8(flags.stdout).unwrap();
    let source = readme_example_source(&dir);
    let spelled = dir.join("example-karu-karu.c");
    let text = std::fs::read_to_string(&source).unwrap();
    std::fs::write(&spelled, text.replace("<karu.h>", "<karu/karu.h>")).unwrap();
    for (i, src) in [source, spelled].iter().enumerate() {
        let program = dir.join(format!("example-{i}"));
        let status = Command::new("gcc")
            .arg(src)
            .arg("-o")
            .arg(&program)
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
            .status()
            .expect("run gcc");
        assert!(status.success(), "example {i} builds with pkg-config flags");
        let data = dir.join("hello.txt");
        std::fs::write(&data, b"hello, ranges").unwrap();
        assert_eq!(
            run(&program, &[data.to_str().unwrap()], &[]).trim(),
            "read: ranges"
        );
    }
    // The C++ example, through the installed karu/karu.hpp.
    if !have("g++") {
        assert!(std::env::var_os("CI").is_none(), "g++ is required in CI");
        return;
    }
    let source = readme_block(&dir, "cpp", "example.cpp");
    for std in cxx_standards() {
        let program = dir.join(format!("example-cpp-{std}"));
        let status = Command::new("g++")
            .arg(format!("-std={std}"))
            .args(["-Wall", "-Wextra", "-Werror"])
            .arg(&source)
            .arg("-o")
            .arg(&program)
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", prefix.join("lib").display()))
            .status()
            .expect("run g++");
        assert!(status.success(), "the C++ example builds as {std}");
        let data = dir.join("hello.txt");
        assert_eq!(
            run(&program, &[data.to_str().unwrap()], &[]).trim(),
            "read: ranges"
        );
    }
}

/// The header compiles as C++ too (`extern "C"`), where a C++ compiler is installed.
#[test]
fn header_compiles_as_cxx() {
    if !have("g++") {
        println!("skipped: g++ is not installed");
        return;
    }
    let dir = scratch("cxx");
    let source = dir.join("use.cpp");
    std::fs::write(
        &source,
        "#include \"karu.h\"\nstatic_assert(sizeof(karu_req) == 48, \"req\");\n\
         int main() { karu_object_info i = KARU_OBJECT_INFO_INIT; return karu_api_version() - 1 + (int)i.size; }\n",
    )
    .unwrap();
    let lib = lib_dir();
    let status = Command::new("g++")
        .args(["-std=c++17", "-Wall", "-Werror", "-I"])
        .arg(crate_dir().join("include"))
        .arg(&source)
        .arg("-o")
        .arg(dir.join("use"))
        .arg(format!("-L{}", lib.display()))
        .arg("-lkaru")
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .status()
        .expect("run g++");
    assert!(status.success(), "karu.h compiles and links as C++");
    run(&dir.join("use"), &[], &[]);
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
    let api = compile("api", &dir);
    run(&api, &[dir.to_str().unwrap()], &MEMCHECK);
    let http = compile("http", &dir);
    run(
        &http,
        &[&base, copy.to_str().unwrap(), dir.to_str().unwrap()],
        &MEMCHECK,
    );
    let buffers = compile("buffers", &dir);
    run(&buffers, &[&base, copy.to_str().unwrap()], &MEMCHECK);
    if have("g++") {
        let newest = cxx_standards().pop().expect("a C++ standard");
        let facade = compile_cxx("facade", newest, &dir);
        run(
            &facade,
            &[&base, copy.to_str().unwrap(), dir.to_str().unwrap()],
            &MEMCHECK,
        );
    }
}

/// valgrind's memcheck: no invalid access, no definite leak.
const MEMCHECK: [&str; 6] = [
    "valgrind",
    "--quiet",
    "--error-exitcode=1",
    "--leak-check=full",
    "--errors-for-leak-kinds=definite",
    "--show-leak-kinds=definite",
];

/// The C ABI's fault soak (`tests/c/soak.c`) under valgrind: batched reads from two threads
/// against the chaos route with 5 % of requests faulted by every kind of fault, every byte
/// checked, no hang. `KARU_C_SOAK_READS` sets the count (default 2,000, quick enough for CI;
/// RELIABILITY.md gives a longer run).
#[test]
fn soak_under_valgrind() {
    let wrapper: &[&str] = if have("valgrind") {
        &MEMCHECK
    } else {
        assert!(
            std::env::var_os("CI").is_none(),
            "valgrind is required in CI"
        );
        println!("valgrind is not installed: the soak runs without it");
        &[]
    };
    let dir = scratch("soak");
    for o in 0..4 {
        let name = format!("csoak/obj-{o}.bin");
        let v1 = karu_testkit::server::versioned_name(&name, 1);
        karu_testkit::content::write_file(&dir.join(format!("obj-{o}.bin")), &name, 1 << 20)
            .expect("version 0 copy");
        karu_testkit::content::write_file(&dir.join(format!("obj-{o}.v1.bin")), &v1, 1 << 20)
            .expect("version 1 copy");
    }
    let reads = std::env::var("KARU_C_SOAK_READS").unwrap_or_else(|_| "2000".into());
    let server = RangeServer::start();
    let base = server.url("");
    let program = compile("soak", &dir);
    let started = std::time::Instant::now();
    run(
        &program,
        &[
            base.trim_end_matches('/'),
            dir.to_str().unwrap(),
            &reads,
            "1",
            "50",
        ],
        wrapper,
    );
    let counts = server.chaos_counts();
    println!(
        "{} s; faults drawn by the server: {}",
        started.elapsed().as_secs(),
        counts
            .iter()
            .map(|(k, n)| format!("{} {n}", k.label()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (kind, n) in counts {
        assert!(n > 0, "the soak met no {} fault", kind.label());
    }
}
