//! HDF5 files through `karu::Reader` and `karu::h5` from nginx, with the request budgets of
//! issue 14 counted in nginx's access log (1 MiB blocks), and every dataset's SHA-256 equal to
//! h5py's. The files come from `scripts/h5files.py` (its directory in `KARU_TEST_H5_DIR`, set
//! by `scripts/test.sh`), linked into nginx's document root.

mod common;

use std::path::{Path, PathBuf};

use common::client;
use karu::h5::{self, Kind};
use karu::{Locator, Reader, ReaderOptions};
use serde_json::Value;

/// nginx's URL and temp dir, and the test files' directory; `None` after a skip line (a panic
/// under CI).
struct Setup {
    url: String,
    nginx_dir: PathBuf,
    expected: Value,
    /// The files' directory as nginx serves it (a link under its document root).
    served: String,
}

fn setup() -> Option<Setup> {
    let env = common::started("KARU_TEST_NGINX_URL", "nginx")?;
    let nginx_dir = PathBuf::from(env.require("KARU_TEST_NGINX_DIR"));
    let Some(h5_dir) = std::env::var_os("KARU_TEST_H5_DIR").filter(|v| !v.is_empty()) else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "KARU_TEST_H5_DIR is not set but CI is: run the tests through \
                 `bash scripts/test.sh`, which generates the files with scripts/h5files.py"
            );
        }
        eprintln!("skipped: KARU_TEST_H5_DIR is not set (run `bash scripts/test.sh`)");
        return None;
    };
    let h5_dir = PathBuf::from(h5_dir);
    let expected: Value = serde_json::from_slice(
        &std::fs::read(h5_dir.join("expected.json")).expect("expected.json of h5files.py"),
    )
    .unwrap();
    let served = format!("h5-{}", std::process::id());
    let link = nginx_dir.join("www").join(&served);
    // Tests run in parallel threads: one makes the link, the others wait for it.
    static LINKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    {
        let _one = LINKING.lock().unwrap_or_else(|e| e.into_inner());
        if std::fs::read_link(&link).ok().as_deref() != Some(h5_dir.as_path()) {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&h5_dir, &link).unwrap();
        }
    }
    Some(Setup {
        url: env.url,
        nginx_dir,
        expected,
        served,
    })
}

impl Setup {
    /// A URL path for `file` with a query no other test uses (nginx ignores it), so that its
    /// access-log lines can be counted.
    fn path(&self, file: &str, test: &str) -> String {
        format!("{}/{file}?test={test}", self.served)
    }

    fn open(&self, path: &str) -> Reader {
        let locator = Locator::parse(&format!("{}/{path}", self.url)).unwrap();
        Reader::open(&client(&[]), &locator, ReaderOptions::default()).unwrap()
    }

    /// The requests nginx logged for `path`.
    fn requests(&self, path: &str) -> usize {
        let log = std::fs::read_to_string(self.nginx_dir.join("access.log")).unwrap();
        let needle = format!("GET /{path} ");
        log.lines().filter(|l| l.contains(&needle)).count()
    }

    fn file(&self, name: &str) -> &Value {
        &self.expected[name]
    }
}

fn sha256(data: &[u8]) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, data);
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The listing equals h5py's: same paths, kinds, shapes and dtypes.
fn check_listing(listed: &[h5::Object], expected: &Value) {
    let mut want: Vec<(String, String, Vec<u64>, String)> = expected["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let shape = o["shape"].as_array().map_or(Vec::new(), |s| {
                s.iter().map(|d| d.as_u64().unwrap()).collect()
            });
            (
                o["path"].as_str().unwrap().to_owned(),
                o["kind"].as_str().unwrap().to_owned(),
                shape,
                o["dtype"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    want.sort();
    let got: Vec<(String, String, Vec<u64>, String)> = listed
        .iter()
        .map(|o| {
            let kind = match o.kind {
                Kind::Group => "group",
                Kind::Dataset => "dataset",
            };
            (
                o.path.clone(),
                kind.to_owned(),
                o.shape.clone(),
                o.dtype.clone(),
            )
        })
        .collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "listing differs from h5py's");
}

/// Reads `dataset` and checks shape, dtype and SHA-256 against h5py's.
fn check_dataset(file: &h5::hdf5_reader::Hdf5File, dataset: &str, expected: &Value) {
    let data = h5::read(file, dataset).unwrap();
    let want = &expected["datasets"][dataset];
    let shape: Vec<u64> = want["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap())
        .collect();
    assert_eq!(data.shape, shape, "{dataset}");
    assert_eq!(data.dtype, want["dtype"].as_str().unwrap(), "{dataset}");
    assert_eq!(
        sha256(&data.bytes),
        want["sha256"].as_str().unwrap(),
        "{dataset}"
    );
}

/// Lists `name` (budget `list_budget`), then reads `dataset` (budget `total_budget` in all);
/// returns the measured counts.
fn budget(
    s: &Setup,
    name: &str,
    test: &str,
    dataset: &str,
    list_budget: usize,
    total_budget: usize,
) -> (usize, usize) {
    let path = s.path(name, test);
    let reader = s.open(&path);
    let file = h5::open(&reader).unwrap();
    check_listing(&h5::list(&file).unwrap(), s.file(name));
    let listed = s.requests(&path);
    check_dataset(&file, dataset, s.file(name));
    let total = s.requests(&path);
    eprintln!("{name}: open and list {listed} requests, with {dataset} {total} in all");
    assert!(
        listed <= list_budget,
        "{name}: open and list took {listed} requests"
    );
    assert!(
        total <= total_budget,
        "{name}: {dataset} took {total} requests in all"
    );
    assert_eq!(
        reader.stats().requests,
        total as u64,
        "the reader counts what nginx saw"
    );
    (listed, total)
}

#[test]
fn a_lists_in_3_requests_and_reads_its_chunked_dataset_in_5_more() {
    let Some(s) = setup() else { return };
    assert_eq!(s.file("a.h5")["superblock"], 0);
    assert_eq!(s.file("a.h5")["objects"].as_array().unwrap().len(), 21);
    let (listed, total) = budget(&s, "a.h5", "budget-a", "/data", 3, 3 + 5);
    assert!(total - listed <= 5);
}

#[test]
fn b_lists_in_3_requests_and_reads_all_780_chunks_in_20_in_all() {
    let Some(s) = setup() else { return };
    assert_eq!(s.file("b.h5")["superblock"], 2);
    budget(&s, "b.h5", "budget-b", "/var", 3, 20);
}

#[test]
fn b_repacked_with_paged_aggregation_keeps_b_budgets() {
    let Some(s) = setup() else { return };
    budget(&s, "bp.h5", "budget-bp", "/var", 3, 20);
}

#[test]
fn c_opens_and_reads_dataset_name_in_10_requests() {
    let Some(s) = setup() else { return };
    assert_eq!(s.file("c.h5")["superblock"], 3);
    let path = s.path("c.h5", "budget-c");
    let reader = s.open(&path);
    let file = h5::open(&reader).unwrap();
    check_dataset(&file, "/DATASET_NAME", s.file("c.h5"));
    let n = s.requests(&path);
    eprintln!("c.h5: open and read /DATASET_NAME {n} requests");
    assert!(n <= 10, "c.h5: {n} requests");
}

#[test]
fn every_dataset_equals_h5py_and_c_lists_its_35001_groups() {
    let Some(s) = setup() else { return };
    for name in ["a.h5", "b.h5", "bp.h5", "c.h5"] {
        let path = s.path(name, "every-dataset");
        let reader = s.open(&path);
        let file = h5::open(&reader).unwrap();
        if name == "c.h5" {
            let listed = h5::list(&file).unwrap();
            assert_eq!(listed.len(), 35_003, "root, 35,001 groups, one dataset");
            check_listing(&listed, s.file(name));
        }
        for dataset in s.file(name)["datasets"].as_object().unwrap().keys() {
            check_dataset(&file, dataset, s.file(name));
        }
        eprintln!("{name}: every dataset in {} requests", s.requests(&path));
    }
}

#[test]
fn a_local_file_reads_the_same() {
    let Some(s) = setup() else { return };
    let dir = std::fs::read_link(s.nginx_dir.join("www").join(&s.served)).unwrap();
    let local = Path::new(&dir).join("a.h5");
    let locator = Locator::parse(local.to_str().unwrap()).unwrap();
    let reader = Reader::open(&client(&[]), &locator, ReaderOptions::default()).unwrap();
    let file = h5::open(&reader).unwrap();
    check_listing(&h5::list(&file).unwrap(), s.file("a.h5"));
    check_dataset(&file, "/data", s.file("a.h5"));
}
