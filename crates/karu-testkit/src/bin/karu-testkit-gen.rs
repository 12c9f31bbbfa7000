//! `karu-testkit-gen NAME SIZE PATH`: writes SIZE bytes of the deterministic content of object
//! NAME to the file PATH (see `karu_testkit::content`), e.g. to seed a real server's files.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [name, size, path] = args.as_slice() else {
        eprintln!("usage: karu-testkit-gen NAME SIZE PATH");
        return ExitCode::from(2);
    };
    let Ok(size) = size.parse::<u64>() else {
        eprintln!("karu-testkit-gen: SIZE must be a number of bytes, got {size:?}");
        return ExitCode::from(2);
    };
    match karu_testkit::content::write_file(Path::new(path), name, size) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("karu-testkit-gen: {path}: {e}");
            ExitCode::FAILURE
        }
    }
}
