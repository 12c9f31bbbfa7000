use proptest::prelude::*;

use super::*;

/// Parses and asserts the parts every locator has.
#[track_caller]
fn parts(uri: &str, backend: Backend, identity: &str, target: &str, container: &str, key: &str) {
    let l = Locator::parse(uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    assert_eq!(l.backend(), backend, "{uri}");
    assert_eq!(l.identity(), identity, "{uri}");
    assert_eq!(l.target(), target, "{uri}");
    assert_eq!(l.container(), container, "{uri}");
    assert_eq!(l.key(), key, "{uri}");
}

#[track_caller]
fn window(uri: &str, offset: u64, length: Option<u64>) {
    let l = Locator::parse(uri).unwrap_or_else(|e| panic!("{uri}: {e}"));
    assert_eq!(l.window(), Window { offset, length }, "{uri}");
}

#[track_caller]
fn fails(uri: &str, status: Status, message: &str) {
    match Locator::parse(uri) {
        Ok(l) => panic!("{uri} parsed as {l:?}"),
        Err(e) => {
            assert_eq!(e.status(), status, "{uri}: {e}");
            assert_eq!(e.message(), message, "{uri}");
        }
    }
}

#[track_caller]
fn uri_fails(uri: &str, message: &str) {
    fails(uri, Status::Uri, message);
}

fn nested(levels: usize, terminal: &str) -> String {
    "/vsisubfile/0,".repeat(levels) + terminal
}

#[test]
fn local_paths_and_file_urls() {
    use Backend::File;
    parts("/tmp/a.bin", File, "/tmp/a.bin", "/tmp/a.bin", "", "");
    parts("rel/a b.bin", File, "rel/a b.bin", "rel/a b.bin", "", "");
    parts(
        "C:\\data\\x.h5",
        File,
        "C:\\data\\x.h5",
        "C:\\data\\x.h5",
        "",
        "",
    );
    parts("/tmp/é", File, "/tmp/é", "/tmp/é", "", "");
    // Case matters: this is not a VSI prefix, so it is a path.
    parts("/VSIS3/b/k", File, "/VSIS3/b/k", "/VSIS3/b/k", "", "");
    parts("file:///tmp/a", File, "file:///tmp/a", "/tmp/a", "", "");
    // No host part: everything after the scheme is the path.
    parts("file://rel/a", File, "file://rel/a", "rel/a", "", "");
    let l = Locator::parse("/tmp/a").unwrap();
    assert!(!l.is_remote());
    assert_eq!(l.window(), Window::default());
    assert_eq!(l.display(), "/tmp/a");
}

#[test]
fn http_urls_are_kept_as_written() {
    use Backend::Http;
    let u = "https://h.example:8443/a%20b/c?x=1&y=2";
    parts(u, Http, u, u, "", "");
    parts("http://h/x", Http, "http://h/x", "http://h/x", "", "");
    parts("http://h", Http, "http://h", "http://h", "", "");
    // /vsicurl/ names the URL; the identity is the bare URL.
    parts(
        "/vsicurl/https://h/x?q",
        Http,
        "https://h/x?q",
        "https://h/x?q",
        "",
        "",
    );
    parts(
        "/vsicurl/http://h/x#bytes=1-2",
        Http,
        "http://h/x",
        "http://h/x",
        "",
        "",
    );
    window("/vsicurl/http://h/x#bytes=1-2", 1, Some(2));
    assert!(Locator::parse("http://h/x").unwrap().is_remote());
}

#[test]
fn cloud_schemes_and_vsi_aliases() {
    use Backend::*;
    let cases = [
        ("s3://b/k", "/vsis3/b/k", S3),
        ("/vsis3/b/k", "/vsis3/b/k", S3),
        ("gs://b/k", "/vsigs/b/k", Gcs),
        ("/vsigs/b/k", "/vsigs/b/k", Gcs),
        ("az://b/k", "/vsiaz/b/k", Azure),
        ("/vsiaz/b/k", "/vsiaz/b/k", Azure),
        ("abfs://b/k", "/vsiadls/b/k", AzureDataLake),
        ("/vsiadls/b/k", "/vsiadls/b/k", AzureDataLake),
    ];
    for (uri, id, backend) in cases {
        parts(uri, backend, id, id, "b", "k");
    }
    // Source: container = account, key = product/key.
    let id = "/vsisource/acct/prod/dir/k.tif";
    parts(
        "source://acct/prod/dir/k.tif",
        Source,
        id,
        id,
        "acct",
        "prod/dir/k.tif",
    );
    parts(id, Source, id, id, "acct", "prod/dir/k.tif");
}

#[test]
fn cloud_keys_are_verbatim() {
    use Backend::S3;
    parts(
        "s3://b/a//b",
        S3,
        "/vsis3/b/a//b",
        "/vsis3/b/a//b",
        "b",
        "a//b",
    );
    parts(
        "s3://b/./x/../y",
        S3,
        "/vsis3/b/./x/../y",
        "/vsis3/b/./x/../y",
        "b",
        "./x/../y",
    );
    parts(
        "s3://b/ a b ",
        S3,
        "/vsis3/b/ a b ",
        "/vsis3/b/ a b ",
        "b",
        " a b ",
    );
    parts(
        "s3://b/a%20b",
        S3,
        "/vsis3/b/a%20b",
        "/vsis3/b/a%20b",
        "b",
        "a%20b",
    );
    parts("s3://b//", S3, "/vsis3/b//", "/vsis3/b//", "b", "/");
    parts(
        "s3://b/ключ",
        S3,
        "/vsis3/b/ключ",
        "/vsis3/b/ключ",
        "b",
        "ключ",
    );
    // A `#` that is not a bytes window is part of the key.
    parts(
        "s3://b/k#v2",
        S3,
        "/vsis3/b/k#v2",
        "/vsis3/b/k#v2",
        "b",
        "k#v2",
    );
}

#[test]
fn hugging_face_forms() {
    use Backend::HuggingFace as Hf;
    parts(
        "hf://org/repo/dir/f.bin",
        Hf,
        "/vsihf/org/repo/dir/f.bin",
        "/org/repo/resolve/main/dir/f.bin",
        "org/repo",
        "dir/f.bin",
    );
    parts(
        "hf://datasets/org/repo@v1/path/a b.bin",
        Hf,
        "/vsihf/datasets/org/repo@v1/path/a b.bin",
        "/datasets/org/repo/resolve/v1/path/a%20b.bin",
        "datasets/org/repo",
        "path/a b.bin",
    );
    parts(
        "/vsihf/spaces/org/app@dev%x/f",
        Hf,
        "/vsihf/spaces/org/app@dev%x/f",
        "/spaces/org/app/resolve/dev%25x/f",
        "spaces/org/app",
        "f",
    );
    // A bytes window leaves the identity and target alone.
    parts(
        "hf://org/repo@main/f#bytes=0-9",
        Hf,
        "/vsihf/org/repo@main/f",
        "/org/repo/resolve/main/f",
        "org/repo",
        "f",
    );
    window("hf://org/repo@main/f#bytes=0-9", 0, Some(10));
    uri_fails(
        "hf://datasets/org/repo@/file",
        "hf:// has an empty repository or revision",
    );
    uri_fails(
        "hf://org/@v1/f",
        "hf:// has an empty repository or revision",
    );
    uri_fails("hf://org//f", "hf:// has an empty repository or revision");
    uri_fails(
        "hf://org/repo",
        "expected hf://owner/name/path in 'org/repo'",
    );
    uri_fails(
        "hf://org/repo/",
        "expected hf://owner/name/path in 'org/repo'",
    );
    uri_fails("hf:///repo/f", "expected hf://owner/name/path in '/repo/f'");
    uri_fails(
        "hf://datasets/org",
        "expected hf://owner/name/path in 'datasets/org'",
    );
    uri_fails("/vsihf/", "/vsihf/ has no target");
}

#[test]
fn rejections_of_the_spec() {
    uri_fails("", "empty URI");
    let unsupported = |handler: &str| {
        format!(
            "unsupported virtual filesystem '{handler}'; Karu supports /vsisubfile/, \
             /vsicurl/, /vsis3/, /vsigs/, /vsiaz/, /vsiadls/, /vsihf/ and /vsisource/ \
             (no *_streaming aliases)"
        )
    };
    for (uri, handler) in [
        ("/vsizip/a.zip/m", "/vsizip/"),
        ("/vsis3_streaming/b/k", "/vsis3_streaming/"),
        ("/vsicurl_streaming/http://h/x", "/vsicurl_streaming/"),
        ("/vsimem/x", "/vsimem/"),
        ("/vsitar/a.tar/x#bytes=x", "/vsitar/"),
        ("/vsis3", "/vsis3"),
        ("/vsi", "/vsi"),
        ("/vsisubfile/0,/vsigzip/a.gz", "/vsigzip/"),
    ] {
        fails(uri, Status::Unsupported, &unsupported(handler));
    }
    uri_fails("s3://bucket", "expected s3://bucket/key in 'bucket'");
    uri_fails("s3://bucket/", "expected s3://bucket/key in 'bucket'");
    uri_fails("/vsis3/bucket", "expected s3://bucket/key in 'bucket'");
    uri_fails("s3:///key", "expected s3://bucket/key in '/key'");
    uri_fails("s3://", "expected s3://bucket/key in ''");
    uri_fails("gs://b", "expected gs://bucket/key in 'b'");
    uri_fails("/vsiaz/c", "expected az://container/blob in 'c'");
    uri_fails("abfs://c/", "expected abfs://container/blob in 'c'");
    uri_fails(
        "source://acct",
        "expected source://account/product/key in 'acct'",
    );
    for prefix in [
        "/vsis3/",
        "/vsigs/",
        "/vsiaz/",
        "/vsiadls/",
        "/vsihf/",
        "/vsisource/",
        "/vsicurl/",
    ] {
        uri_fails(prefix, &format!("{prefix} has no target"));
    }
    uri_fails("ftp://host/x", "unknown scheme in 'ftp://host/x'");
    uri_fails("S3://b/k", "unknown scheme in 'S3://b/k'");
    uri_fails("HTTPS://h/x", "unknown scheme in 'HTTPS://h/x'");
    uri_fails(
        "ftp://u:pw@host/x?sig=1",
        "unknown scheme in 'ftp://<redacted>@host/x?<redacted>'",
    );
    uri_fails("https://", "HTTP URL has no authority");
    uri_fails("https:///x", "HTTP URL has no authority");
    uri_fails("http://?q", "HTTP URL has no authority");
    uri_fails("/vsicurl/s3://b/k", "/vsicurl/ target must be an HTTP URL");
    uri_fails("/vsicurl/ftp://h/x", "/vsicurl/ target must be an HTTP URL");
    uri_fails("/vsicurl//tmp/a", "/vsicurl/ target must be an HTTP URL");
    uri_fails(
        "/vsisubfile/1_2",
        "/vsisubfile/ wants OFFSET[_LENGTH],<uri>",
    );
    uri_fails("/vsisubfile/", "/vsisubfile/ wants OFFSET[_LENGTH],<uri>");
    uri_fails("/vsisubfile/10_20,", "/vsisubfile/ has no inner URI");
    uri_fails("/vsisubfile/abc,/tmp/a", "'abc' is not a byte count");
    uri_fails("/vsisubfile/1_x,/tmp/a", "'x' is not a byte count");
    uri_fails("/vsisubfile/,/tmp/a", "'' is not a byte count");
    uri_fails("/vsisubfile/+1,/tmp/a", "'+1' is not a byte count");
    uri_fails(
        "/vsisubfile/18446744073709551616,/tmp/a",
        "'18446744073709551616' is not a byte count",
    );
    uri_fails("#bytes=10", "#bytes= wants FIRST-LAST");
    uri_fails("/tmp/a#bytes=", "#bytes= wants FIRST-LAST");
    uri_fails("/tmp/a#bytes=-5", "#bytes= wants FIRST-LAST");
    uri_fails("#bytes=20-10", "#bytes= ends before it starts");
    uri_fails("#bytes=x-10", "'x' is not a byte count");
    uri_fails("#bytes=10-y", "'y' is not a byte count");
    uri_fails("/tmp/a#bytes=1-2-3", "'2-3' is not a byte count");
    uri_fails(
        "#bytes=0-18446744073709551615",
        "#bytes= range is too large",
    );
    uri_fails("#bytes=0-9", "empty URI");
    uri_fails("file://", "file:// has no path");
    uri_fails("file://#bytes=0-1", "file:// has no path");
    uri_fails(
        &nested(17, "/tmp/a"),
        "/vsisubfile/ nesting exceeds 16 levels",
    );
}

#[test]
fn bytes_fragments() {
    window("/tmp/a#bytes=0-0", 0, Some(1));
    window("/tmp/a#bytes=10-19", 10, Some(10));
    window("/tmp/a#bytes=10-", 10, None);
    window("s3://b/k#bytes=100-199", 100, Some(100));
    window("#bytes=1-1#bytes=5-6", 5, Some(2));
    window(
        "/tmp/a#bytes=18446744073709551614-18446744073709551614",
        u64::MAX - 1,
        Some(1),
    );
    window("/tmp/a#bytes=18446744073709551615-", u64::MAX, None);
    // The window is removed from identity and target, on every terminal form.
    parts(
        "/tmp/a#bytes=1-2",
        Backend::File,
        "/tmp/a",
        "/tmp/a",
        "",
        "",
    );
    parts(
        "file:///x#bytes=1-",
        Backend::File,
        "file:///x",
        "/x",
        "",
        "",
    );
    parts(
        "https://h/x?a=b#bytes=1-2",
        Backend::Http,
        "https://h/x?a=b",
        "https://h/x?a=b",
        "",
        "",
    );
    // Only the last `#`, and only a `bytes=` fragment, is a window.
    parts(
        "/tmp/a#bytes=1-2#x",
        Backend::File,
        "/tmp/a#bytes=1-2#x",
        "/tmp/a#bytes=1-2#x",
        "",
        "",
    );
    window("/tmp/a#bytes=1-2#x", 0, None);
    parts(
        "https://h/x#frag",
        Backend::Http,
        "https://h/x#frag",
        "https://h/x#frag",
        "",
        "",
    );
    parts(
        "/tmp/a#x#bytes=3-4",
        Backend::File,
        "/tmp/a#x",
        "/tmp/a#x",
        "",
        "",
    );
    window("/tmp/a#x#bytes=3-4", 3, Some(2));
    parts(
        "/tmp/a#BYTES=1-2",
        Backend::File,
        "/tmp/a#BYTES=1-2",
        "/tmp/a#BYTES=1-2",
        "",
        "",
    );
}

#[test]
fn subfile_windows_and_composition() {
    window("/vsisubfile/5_10,/tmp/a", 5, Some(10));
    window("/vsisubfile/5,/tmp/a", 5, None);
    window("/vsisubfile/5_-1,/tmp/a", 5, None);
    window("/vsisubfile/5_-0,/tmp/a", 5, None);
    window("/vsisubfile/5_0,/tmp/a", 5, Some(0));
    uri_fails(
        "/vsisubfile/5_-,/tmp/a",
        "negative subfile length is malformed",
    );
    uri_fails(
        "/vsisubfile/5_-x,/tmp/a",
        "negative subfile length is malformed",
    );
    uri_fails(
        "/vsisubfile/5_--1,/tmp/a",
        "negative subfile length is malformed",
    );

    // The example of the spec: the fragment applies to the terminal, inside the subfile.
    let l = Locator::parse("/vsisubfile/5_10,s3://bucket/key#bytes=100-199").unwrap();
    assert_eq!(l.identity(), "/vsis3/bucket/key");
    assert_eq!((l.container(), l.key()), ("bucket", "key"));
    assert_eq!(
        l.window(),
        Window {
            offset: 105,
            length: Some(10)
        }
    );
    assert_eq!(l.window().end(), Some(115));

    // Offsets add through levels; lengths clip to what the parent has left.
    window("/vsisubfile/1_100,/vsisubfile/2_3,/tmp/a", 3, Some(2));
    window("/vsisubfile/2_100,/vsisubfile/10_20,/tmp/a", 12, Some(18));
    window("/vsisubfile/2,/vsisubfile/10_20,/tmp/a", 12, Some(18));
    window("/vsisubfile/20_5,/vsisubfile/10_20,/tmp/a", 30, Some(0));
    window("/vsisubfile/5_-3,/tmp/a#bytes=0-9", 5, Some(5));
    window("/vsisubfile/3_4,/tmp/a#bytes=10-", 13, Some(4));
    uri_fails(
        "/vsisubfile/21_1,/vsisubfile/10_20,/tmp/a",
        "window starts past the end of its parent",
    );
    uri_fails(
        "/vsisubfile/11,/tmp/a#bytes=0-9",
        "window starts past the end of its parent",
    );
    uri_fails(
        "/vsisubfile/18446744073709551615,/vsisubfile/1,/tmp/a",
        "window offset overflows",
    );
    uri_fails(
        "/vsisubfile/2,/tmp/a#bytes=18446744073709551614-",
        "window offset overflows",
    );
    // A bounded window's end must fit in a u64 too.
    uri_fails(
        "/vsisubfile/18446744073709551615_1,/tmp/a",
        "window offset overflows",
    );
    window(
        "/vsisubfile/18446744073709551615_0,/tmp/a",
        u64::MAX,
        Some(0),
    );

    // The inner URI may hold commas; only the first one ends the offset and length.
    parts(
        "/vsisubfile/1_2,/tmp/a,b",
        Backend::File,
        "/tmp/a,b",
        "/tmp/a,b",
        "",
        "",
    );
    parts(
        "/vsisubfile/0,hf://o/n/f",
        Backend::HuggingFace,
        "/vsihf/o/n/f",
        "/o/n/resolve/main/f",
        "o/n",
        "f",
    );
    // Windows are not part of the identity.
    let a = Locator::parse("/vsisubfile/0_1,s3://b/k").unwrap();
    let b = Locator::parse("s3://b/k#bytes=7-").unwrap();
    assert_eq!(a.identity(), b.identity());
    assert_ne!(a, b);
}

#[test]
fn nesting_limit() {
    window(&nested(16, "/tmp/a#bytes=4-5"), 4, Some(2));
    let l = Locator::parse(&nested(16, "s3://b/k")).unwrap();
    assert_eq!(l.identity(), "/vsis3/b/k");
    uri_fails(
        &nested(17, "s3://b/k"),
        "/vsisubfile/ nesting exceeds 16 levels",
    );
    uri_fails(
        &nested(100, "s3://b/k"),
        "/vsisubfile/ nesting exceeds 16 levels",
    );
}

#[test]
fn encoding() {
    assert_eq!(encode_key("a%20b"), "a%2520b");
    assert_eq!(encode_key("dir/a b.bin"), "dir/a%20b.bin");
    assert_eq!(encode_key("AZaz09-_.~/"), "AZaz09-_.~/");
    assert_eq!(
        encode_key("a+b=c&d?e#f:g@h,i;j*k'l!(m)\"n"),
        "a%2Bb%3Dc%26d%3Fe%23f%3Ag%40h%2Ci%3Bj%2Ak%27l%21%28m%29%22n"
    );
    assert_eq!(encode_key("é€"), "%C3%A9%E2%82%AC");
    assert_eq!(encode_key("\u{0}\n\u{7f}"), "%00%0A%7F");
    assert_eq!(encode_key(""), "");
}

#[test]
fn redaction() {
    let cases = [
        ("https://h/x", "https://h/x"),
        ("https://user:pw@h:443/x", "https://<redacted>@h:443/x"),
        ("https://user@h", "https://<redacted>@h"),
        ("https://u:p@ss@h/x", "https://<redacted>@h/x"),
        ("https://h/x?sig=abc&x=1", "https://h/x?<redacted>"),
        ("https://h/x#frag", "https://h/x#<redacted>"),
        ("https://h/x?q#f?g", "https://h/x?<redacted>#<redacted>"),
        ("https://h/x#f?g", "https://h/x#<redacted>"),
        ("https://h?q@x", "https://h?<redacted>"),
        ("https://h/a@b/c", "https://h/a@b/c"),
        ("https://u@h/a@b?q", "https://<redacted>@h/a@b?<redacted>"),
        ("/tmp/a?b#c", "/tmp/a?b#c"),
        ("", ""),
    ];
    for (url, want) in cases {
        assert_eq!(redact_url(url), want, "{url}");
    }
    let l = Locator::parse("https://u:pw@h/x?sig=s#frag").unwrap();
    assert_eq!(l.identity(), "https://u:pw@h/x?sig=s#frag");
    assert_eq!(l.display(), "https://<redacted>@h/x?<redacted>#<redacted>");
    let l = Locator::parse("/vsicurl/https://h/x?sig=s#bytes=0-1").unwrap();
    assert_eq!(l.display(), "https://h/x?<redacted>");
    // Other backends show their identity: keys and paths are not secrets.
    let l = Locator::parse("s3://b/k?x#y").unwrap();
    assert_eq!(l.display(), "/vsis3/b/k?x#y");
}

#[test]
fn clones_share() {
    let a = Locator::parse("s3://b/k").unwrap();
    let b = a.clone();
    assert!(a.ptr_eq(&b));
    assert!(!a.ptr_eq(&Locator::parse("s3://b/k").unwrap()));
}

/// Pieces that steer random strings into the parser's interesting corners.
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/vsisubfile/".to_string()),
        Just("/vsis3/".to_string()),
        Just("/vsicurl/".to_string()),
        Just("/vsihf/".to_string()),
        Just("/vsizip/".to_string()),
        Just("s3://".to_string()),
        Just("hf://".to_string()),
        Just("https://".to_string()),
        Just("file://".to_string()),
        Just("datasets/".to_string()),
        Just("#bytes=".to_string()),
        Just("18446744073709551615".to_string()),
        "[0-9]{1,20}",
        "[-_,/@#?:a-z%é ]{1,3}",
    ]
}

/// A subfile spec with offsets near zero and near the top of the range.
fn count() -> impl Strategy<Value = u64> {
    prop_oneof![0..64u64, any::<u64>(), (u64::MAX - 64)..=u64::MAX]
}

fn inner_uri() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just(String::new()),
        (count(), count()).prop_map(|(a, b)| format!("#bytes={}-{}", a.min(b), a.max(b))),
        count().prop_map(|a| format!("#bytes={a}-")),
    ];
    let terminal = fragment.prop_map(|f| format!("s3://b/k{f}"));
    terminal.prop_recursive(4, 8, 1, |inner| {
        (count(), proptest::option::of(count()), inner).prop_map(|(o, l, inner)| match l {
            Some(l) => format!("/vsisubfile/{o}_{l},{inner}"),
            None => format!("/vsisubfile/{o},{inner}"),
        })
    })
}

proptest! {
    #[test]
    fn parse_never_panics(s in ".*") {
        let _ = Locator::parse(&s);
    }

    #[test]
    fn parse_never_panics_on_tokens(parts in proptest::collection::vec(token(), 0..12)) {
        let s = parts.concat();
        if let Ok(l) = Locator::parse(&s) {
            // Every parsed window has a representable end.
            prop_assert!(l.window().length.is_none() || l.window().end().is_some());
        }
    }

    #[test]
    fn subfile_stays_inside_its_parent(
        offset in count(),
        length in proptest::option::of(count()),
        inner in inner_uri(),
    ) {
        let spec = match length {
            Some(l) => format!("{offset}_{l}"),
            None => offset.to_string(),
        };
        let Ok(child) = Locator::parse(&format!("/vsisubfile/{spec},{inner}")) else {
            return Ok(());
        };
        let parent = Locator::parse(&inner).expect("a parsed child has a parsed parent");
        let (c, p) = (child.window(), parent.window());
        prop_assert_eq!(child.identity(), parent.identity());
        prop_assert_eq!(c.offset, p.offset + offset);
        match p.end() {
            Some(p_end) => {
                let c_end = c.end().expect("a bounded parent bounds its child");
                prop_assert!(c_end <= p_end);
                if let Some(l) = length {
                    prop_assert!(c.length.unwrap() <= l);
                }
            }
            None => {
                prop_assert_eq!(c.length, length);
                prop_assert!(c.length.is_none() || c.end().is_some());
            }
        }
    }
}
