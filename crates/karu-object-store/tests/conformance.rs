//! `KaruStore` against real servers: object_store's own integration suites (reads through
//! karu, writes through an inner `AmazonS3`) over s3s-fs, and a read-side suite of every
//! `GetOptions` field over nginx and s3s-fs, every byte checked.

mod support;

use std::sync::Arc;

use futures::StreamExt;
use karu_object_store::KaruStore;
use karu_testkit::content;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{Error, GetOptions, GetRange, ObjectStore, ObjectStoreExt, integration};
use support::{common, s3s};

const LARGE: u64 = 16_777_219;

/// A prefix of its own, so that the suites' deletes touch nothing else in the bucket.
fn scratch(test: &str) -> String {
    format!("karu-object-store/{test}-{}", std::process::id())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn object_stores_own_suites_pass_over_s3s_fs() {
    let Some(s) = s3s() else { return };
    let prefix = scratch("suites");
    let inner: Arc<dyn ObjectStore> =
        Arc::new(PrefixStore::new(Arc::clone(&s.s3), prefix.as_str()));
    let store = KaruStore::new(s.client, &format!("s3://{}/{prefix}", s.bucket))
        .unwrap()
        .with_inner(inner);
    runtime().block_on(async {
        // Not `put_get_delete_list`: s3s-fs answers a GET of a "directory" key with 500
        // where the suite wants NotFound, and fails object_store's own AmazonS3 the same way.
        // Nor `copy_if_not_exists`: s3s-fs has no conditional copy (a write, not karu's).
        // Each suite expects a clean prefix.
        integration::get_opts(&store).await;
        clean(&store).await;
        integration::stream_get(&store).await;
        clean(&store).await;
        let missing = integration::get_nonexistent_object(&store, None).await;
        assert!(
            matches!(missing, Err(Error::NotFound { .. })),
            "{missing:?}"
        );
        integration::rename_and_copy(&store).await;
        clean(&store).await;
        integration::list_with_delimiter(&store).await;
        clean(&store).await;
    });
}

/// Deletes every object below the store (through its inner store).
async fn clean(store: &KaruStore) {
    let listed: Vec<_> = store
        .list(None)
        .map(|m| m.unwrap().location)
        .collect()
        .await;
    for path in listed {
        store.delete(&path).await.unwrap();
    }
}

#[test]
fn reads_follow_every_get_option_over_nginx() {
    let Some(started) = common::started("KARU_TEST_NGINX_URL", "nginx") else {
        return;
    };
    let store = KaruStore::new(common::client(&[]), &started.url).unwrap();
    runtime().block_on(read_side(&store, "large.bin", "large.bin", LARGE));
    runtime().block_on(read_side(&store, "small.bin", "small.bin", 1000));
}

#[test]
fn reads_follow_every_get_option_over_s3s_fs() {
    let Some(s) = s3s() else { return };
    let prefix = scratch("reads");
    let store = KaruStore::new(s.client, &format!("s3://{}/{prefix}", s.bucket))
        .unwrap()
        .with_inner(Arc::new(PrefixStore::new(
            Arc::clone(&s.s3),
            prefix.as_str(),
        )));
    let rt = runtime();
    let path = Path::from("dir/large.bin");
    let data = content::bytes("large.bin", 0, LARGE as usize);
    rt.block_on(store.put(&path, data.into())).unwrap();
    rt.block_on(read_side(&store, "dir/large.bin", "large.bin", LARGE));
    rt.block_on(store.delete(&path)).unwrap();
}

#[test]
fn without_an_inner_store_writes_and_listing_are_not_implemented_by_name() {
    let store = KaruStore::new(common::client(&[]), "https://example.invalid/data").unwrap();
    let rt = runtime();
    let path = Path::from("a.bin");
    let named = |e: Error, op: &str| match e {
        Error::NotImplemented { operation, .. } => {
            assert!(operation.starts_with(op), "{operation}")
        }
        other => panic!("{op}: {other:?}"),
    };
    named(
        rt.block_on(store.put(&path, "x".into())).unwrap_err(),
        "put",
    );
    named(
        rt.block_on(store.put_multipart(&path)).err().unwrap(),
        "put_multipart",
    );
    named(rt.block_on(store.delete(&path)).unwrap_err(), "delete");
    named(rt.block_on(store.copy(&path, &path)).unwrap_err(), "copy");
    named(
        rt.block_on(store.rename(&path, &path)).unwrap_err(),
        "rename",
    );
    named(
        rt.block_on(store.list_with_delimiter(None)).unwrap_err(),
        "list_with_delimiter",
    );
    let listed = rt.block_on(store.list(None).next()).unwrap();
    named(listed.unwrap_err(), "list");
    let versioned = GetOptions::new().with_version(Some("v1"));
    named(
        rt.block_on(store.get_opts(&path, versioned)).unwrap_err(),
        "get_opts with a version",
    );
    // Each segment as object_store's HttpStore puts it in a URL (the `%` of its own
    // encoding included).
    assert_eq!(
        store.uri(&Path::from("a b/c#d.bin")),
        "https://example.invalid/data/a%20b/c%2523d.bin"
    );
}

/// Every byte of `result`, checked against `name`'s content at `range`; the number of
/// pieces the payload came in.
async fn check_get(
    result: object_store::GetResult,
    name: &str,
    range: std::ops::Range<u64>,
) -> usize {
    assert_eq!(result.range, range);
    let mut s = result.into_stream();
    let (mut at, mut pieces) = (range.start, 0);
    while let Some(piece) = s.next().await {
        let piece = piece.unwrap();
        content::check(name, at, &piece).unwrap();
        at += piece.len() as u64;
        pieces += 1;
    }
    assert_eq!(at, range.end);
    pieces
}

/// The read side of object_store's contract over `store`, for object `path` holding
/// `content::bytes(name, 0, size)`.
async fn read_side(store: &KaruStore, path: &str, name: &str, size: u64) {
    let path = Path::from(path);
    let get = |o: GetOptions| store.get_opts(&path, o);

    // Whole object, streamed in pieces; its description.
    let whole = get(GetOptions::new()).await.unwrap();
    let meta = whole.meta.clone();
    assert_eq!(meta.size, size);
    assert_eq!(meta.location, path);
    let etag = meta.e_tag.clone().expect("a strong ETag");
    assert!(meta.last_modified.timestamp() > 1_600_000_000, "{meta:?}");
    let pieces = check_get(whole, name, 0..size).await;
    assert_eq!(pieces as u64, size.div_ceil(8 << 20));
    assert_eq!(store.head(&path).await.unwrap(), meta);

    // Bounded, offset and suffix ranges, small and past one piece, and clamped.
    let cases = [
        (GetRange::Bounded(5..17), 5..17),
        (GetRange::Bounded(size - 3..size + 100), size - 3..size),
        (GetRange::Offset(size - 10), size - 10..size),
        (GetRange::Offset(1), 1..size),
        (GetRange::Suffix(7), size - 7..size),
        (GetRange::Suffix(size + 5), 0..size),
    ];
    for (r, want) in cases {
        let got = get(GetOptions::new().with_range(Some(r.clone())))
            .await
            .unwrap();
        assert_eq!(got.meta, meta, "{r:?}");
        check_get(got, name, want).await;
    }
    let got = store.get_range(&path, 3..9).await.unwrap();
    content::check(name, 3, &got).unwrap();
    assert_eq!(got.len(), 6);
    let past = get(GetOptions::new().with_range(Some(size + 1..size + 2)))
        .await
        .unwrap_err();
    assert!(matches!(past, Error::Generic { .. }), "{past:?}");

    // get_ranges: one batch, in the order given.
    let ranges = [size - 50..size, 0..10, size / 2..size / 2 + size / 4];
    let parts = store.get_ranges(&path, &ranges).await.unwrap();
    for (r, p) in ranges.iter().zip(&parts) {
        assert_eq!(p.len() as u64, r.end - r.start);
        content::check(name, r.start, p).unwrap();
    }

    // Conditions, judged on the answer the bytes come from.
    let hour = chrono::Duration::try_hours(1).unwrap();
    let ok = [
        GetOptions::new().with_if_match(Some(etag.clone())),
        GetOptions::new().with_if_none_match(Some("\"other\"")),
        GetOptions::new().with_if_modified_since(Some(meta.last_modified - hour)),
        GetOptions::new().with_if_unmodified_since(Some(meta.last_modified)),
    ];
    for o in ok {
        let r = o.range.clone();
        let got = get(o.with_range(r.or(Some(GetRange::Bounded(0..4)))))
            .await
            .unwrap();
        check_get(got, name, 0..4).await;
    }
    let refused = get(GetOptions::new().with_if_match(Some("\"other\"")))
        .await
        .unwrap_err();
    assert!(matches!(refused, Error::Precondition { .. }), "{refused:?}");
    let old = GetOptions::new().with_if_unmodified_since(Some(meta.last_modified - hour));
    assert!(matches!(
        get(old).await.unwrap_err(),
        Error::Precondition { .. }
    ));
    let same = GetOptions::new().with_if_none_match(Some(etag.clone()));
    assert!(matches!(
        get(same).await.unwrap_err(),
        Error::NotModified { .. }
    ));
    let since = GetOptions::new().with_if_modified_since(Some(meta.last_modified));
    assert!(matches!(
        get(since).await.unwrap_err(),
        Error::NotModified { .. }
    ));
    let head = GetOptions::new()
        .with_head(true)
        .with_if_none_match(Some(etag));
    assert!(matches!(
        get(head).await.unwrap_err(),
        Error::NotModified { .. }
    ));

    // A missing object.
    let missing = Path::from("no/such/object.bin");
    let e = store.head(&missing).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
    let e = store.get(&missing).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
    let e = store
        .get_ranges(&missing, &[0..1, 1 << 30..(1 << 30) + 1])
        .await
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
}
