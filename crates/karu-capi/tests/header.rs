//! The checked-in `include/karu.h` must equal a fresh cbindgen run (CI fails when stale).
//! `KARU_BLESS_HEADER=1` rewrites it instead.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut fresh = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("UTF-8 header");
    let path = crate_dir.join("include/karu.h");
    if std::env::var_os("KARU_BLESS_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("write include/karu.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "include/karu.h is stale; regenerate with KARU_BLESS_HEADER=1 cargo test -p karu-capi --test header"
    );
}
