//! Hugging Face reads against the test kit's hub (`karu_testkit::HubServer`), whose resolve
//! endpoint redirects to a CDN on another origin: encoded revisions and paths, the token on
//! the hub only, range checks on the CDN's answer, 401/404 mapping, a token file read again
//! for every attempt, and the same-origin rule of `KARU_HTTP_HEADERS`. Every byte is checked.

mod common;

use std::path::Path;

use common::{client, client_plus, fails_alone, read_all};
use karu::{Client, Locator, Read, Status};
use karu_testkit::{HubServer, RangeServer, content};

fn hub_client(hub: &HubServer, options: &[(&str, &str)]) -> Client {
    client_plus(&[("HF_ENDPOINT", &hub.url())], options)
}

fn hf(uri: &str) -> Locator {
    Locator::parse(uri).unwrap()
}

#[test]
fn reads_follow_the_redirect_and_keep_the_token_on_the_hub() {
    let hub = HubServer::start();
    let name = "datasets/org/repo/resolve/v 1+x/dir/a b.bin";
    let size = 70_000;
    hub.add(name, size);
    hub.require_tokens(&["tok"]);
    let c = hub_client(&hub, &[("HF_TOKEN", "tok")]);
    let object = hf("hf://datasets/org/repo@v 1+x/dir/a b.bin");

    read_all(
        &c,
        &object,
        name,
        &[(0, 100), (size - 1, 1), (12_345, 40_000), (500, 1)],
    );
    let info = c.stat(&object).unwrap();
    assert_eq!(info.size, size);
    assert!(info.etag.is_some());
    let ends = c.read_ends(&object, 10, 20).unwrap();
    content::check(name, 0, &ends.head).unwrap();
    content::check(name, size - 20, &ends.tail).unwrap();

    // The revision and the path are percent-encoded; the token reached the hub only.
    let asked = hub.log();
    assert!(!asked.is_empty());
    for a in &asked {
        assert_eq!(a.path, "/datasets/org/repo/resolve/v%201%2Bx/dir/a%20b.bin");
        assert_eq!(a.header("authorization"), Some("Bearer tok"));
        assert_eq!(a.status, 302);
    }
    let cdn = hub.cdn().log();
    assert_eq!(cdn.len(), asked.len(), "one CDN request per redirect");
    for l in &cdn {
        assert_eq!(l.header("authorization"), None, "{l:?}");
        assert_eq!(l.name, name);
    }
}

#[test]
fn models_and_spaces_resolve_under_the_default_revision() {
    let hub = HubServer::start();
    hub.add("org/model/resolve/main/weights/f.bin", 300);
    hub.add("spaces/org/app/resolve/dev/app.py", 50);
    let c = hub_client(&hub, &[]);
    let got = c
        .read(&hf("hf://org/model/weights/f.bin"), 10, 290)
        .unwrap();
    content::check("org/model/resolve/main/weights/f.bin", 10, &got).unwrap();
    let got = c
        .read(&hf("/vsihf/spaces/org/app@dev/app.py"), 0, 50)
        .unwrap();
    content::check("spaces/org/app/resolve/dev/app.py", 0, &got).unwrap();
    // Anonymous: no Authorization anywhere.
    assert!(
        hub.log()
            .iter()
            .all(|a| a.header("authorization").is_none())
    );
}

#[test]
fn ranges_are_validated_on_the_cdn_answer() {
    let hub = HubServer::start();
    hub.add_routed("o/m/resolve/main/shifted.bin", 1000, "wrong-content-range");
    hub.add_routed("o/m/resolve/main/gone.bin", 1000, "416");
    hub.add_routed("o/m/resolve/main/short.bin", 1000, "short-object");
    let c = hub_client(&hub, &[]);
    let e = c.read(&hf("hf://o/m/shifted.bin"), 100, 10).unwrap_err();
    assert_eq!(e.status(), Status::Http, "{e}");
    assert!(e.message().starts_with("/vsihf/o/m/shifted.bin: "), "{e}");
    assert!(
        e.message()
            .contains("does not satisfy requested [100, 109]"),
        "{e}"
    );
    let e = c.read(&hf("hf://o/m/gone.bin"), 0, 10).unwrap_err();
    assert_eq!(e.status(), Status::Range, "{e}");
    // The object ends inside the read: the valid prefix arrives, the rest is RANGE.
    let batch = c
        .submit(vec![Read::new(&hf("hf://o/m/short.bin"), 990, 20)])
        .unwrap();
    let done = batch.next().unwrap();
    assert_eq!(done.status(), Status::Range);
    assert_eq!(done.got, 10);
    content::check("o/m/resolve/main/short.bin", 990, &done.bytes()[..10]).unwrap();
}

#[test]
fn unauthorized_and_missing_files() {
    let hub = HubServer::start();
    hub.add("o/m/resolve/main/f.bin", 100);
    hub.require_tokens(&["good"]);
    let object = hf("hf://o/m/f.bin");
    for options in [&[("HF_TOKEN", "bad")][..], &[]] {
        let e = hub_client(&hub, options).read(&object, 0, 10).unwrap_err();
        assert_eq!(e.status(), Status::Auth, "{e}");
        assert!(e.message().contains("HTTP 401"), "{e}");
    }
    let c = hub_client(&hub, &[("HF_TOKEN", "good")]);
    let batch = c
        .submit(vec![
            Read::new(&hf("hf://o/m/missing.bin"), 0, 10).tag(1),
            Read::new(&hf("hf://o/m@other/f.bin"), 0, 10).tag(2),
            Read::new(&object, 0, 10).tag(3),
        ])
        .unwrap();
    let mut done: Vec<_> = (&batch).into_iter().collect();
    done.sort_by_key(|d| d.tag);
    assert_eq!(done[0].status(), Status::NotFound, "{:?}", done[0].result);
    assert_eq!(done[1].status(), Status::NotFound, "{:?}", done[1].result);
    assert!(done[2].result.is_ok(), "{:?}", done[2].result);
    content::check("o/m/resolve/main/f.bin", 0, done[2].bytes()).unwrap();
    assert_eq!(
        c.stat(&hf("hf://o/m/missing.bin")).unwrap_err().status(),
        Status::NotFound
    );
}

#[test]
fn the_token_file_is_read_again_for_every_attempt() {
    let hub = HubServer::start();
    hub.add("o/m/resolve/main/f.bin", 100);
    hub.require_tokens(&["one", "two"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "one\n").unwrap();
    // The first attempt fails with 503; before answering it, the token is rotated.
    hub.fail_next(1, 503);
    let rotate = file.clone();
    hub.on_request(move |i| {
        if i == 0 {
            std::fs::write(&rotate, " two ").unwrap();
        }
    });
    let c = hub_client(&hub, &[("HF_TOKEN_PATH", file.to_str().unwrap())]);
    let batch = c
        .submit(vec![Read::new(&hf("hf://o/m/f.bin"), 5, 50)])
        .unwrap();
    let done = batch.next().unwrap();
    assert!(done.result.is_ok(), "{:?}", done.result);
    content::check("o/m/resolve/main/f.bin", 5, done.bytes()).unwrap();
    assert_eq!(batch.stats().retries, 1);
    let auth: Vec<_> = hub
        .log()
        .iter()
        .map(|a| a.header("authorization").unwrap_or("").to_owned())
        .collect();
    assert_eq!(auth, ["Bearer one", "Bearer two"]);
}

#[test]
fn home_token_and_missing_files() {
    let hub = HubServer::start();
    hub.add("o/m/resolve/main/f.bin", 100);
    hub.require_tokens(&["from-home"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), "from-home\n").unwrap();
    let missing = dir.path().join("missing");
    let home = dir.path().to_str().unwrap();
    // A missing HF_TOKEN_PATH file is no token: HF_HOME's comes next.
    let c = hub_client(
        &hub,
        &[
            ("HF_TOKEN_PATH", missing.to_str().unwrap()),
            ("HF_HOME", home),
        ],
    );
    let got = c.read(&hf("hf://o/m/f.bin"), 0, 100).unwrap();
    content::check("o/m/resolve/main/f.bin", 0, &got).unwrap();
}

#[test]
fn bad_token_files_and_endpoints_fail_only_their_reads() {
    let hub = HubServer::start();
    hub.add("o/m/resolve/main/f.bin", 100);
    let server = RangeServer::start();
    let plain = Locator::parse(&server.url("ok/plain.bin?size=100")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let unreadable: &Path = dir.path();
    let cases = [
        (
            vec![
                ("HF_ENDPOINT", hub.url()),
                ("HF_TOKEN_PATH", unreadable.to_str().unwrap().to_owned()),
            ],
            Status::Credentials,
            format!(
                "/vsihf/o/m/f.bin: cannot read Hugging Face token file '{}': ",
                unreadable.display()
            ),
        ),
        (
            vec![("HF_ENDPOINT", format!("{}/?a=1", hub.url()))],
            Status::Config,
            "/vsihf/o/m/f.bin: HF_ENDPOINT cannot contain a query".to_owned(),
        ),
    ];
    for (options, status, message) in cases {
        let options: Vec<(&str, &str)> = options.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let c = client(&options);
        let e = fails_alone(&c, &hf("hf://o/m/f.bin"), &plain, "plain.bin");
        assert_eq!(e.status(), status, "{e}");
        assert!(e.message().starts_with(&message), "{e}");
    }
}

#[test]
fn configured_headers_block_the_cross_origin_cdn_redirect() {
    let hub = HubServer::start();
    hub.add("o/m/resolve/main/f.bin", 100);
    let c = hub_client(&hub, &[("KARU_HTTP_HEADERS", "X-Trace: 1")]);
    let e = c.read(&hf("hf://o/m/f.bin"), 0, 10).unwrap_err();
    assert_eq!(e.status(), Status::Http, "{e}");
    assert!(
        e.message()
            .contains("cross-origin redirect blocked because KARU_HTTP_HEADERS is set"),
        "{e}"
    );
    assert_eq!(hub.log()[0].header("x-trace"), Some("1"));
    assert!(hub.cdn().log().is_empty());
    // Managed headers cannot be configured.
    let c = hub_client(&hub, &[("KARU_HTTP_HEADERS", "Authorization: Bearer x")]);
    let e = c.read(&hf("hf://o/m/f.bin"), 0, 10).unwrap_err();
    assert_eq!(e.status(), Status::Config);
    assert_eq!(
        e.message(),
        "KARU_HTTP_HEADERS cannot override Karu-managed header 'Authorization'"
    );
}
