//! What this crate's tests share: karu's own test helpers (server variables, clients) and
//! s3s-fs reached through karu and through object_store.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

#[path = "../../../karu/tests/common/mod.rs"]
pub mod common;

use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::{ClientOptions, ObjectStore};

/// s3s-fs from `scripts/s3.sh`: a karu client for it, object_store's `AmazonS3` store of its
/// bucket, and the bucket.
pub struct S3s {
    pub client: karu::Client,
    pub s3: Arc<dyn ObjectStore>,
    pub bucket: String,
}

/// `None` (after a skip line) when s3s-fs does not run, outside CI.
pub fn s3s() -> Option<S3s> {
    let started = common::started("KARU_TEST_S3S_URL", "s3")?;
    let key = started.require("KARU_TEST_S3S_ACCESS_KEY_ID");
    let secret = started.require("KARU_TEST_S3S_SECRET_ACCESS_KEY");
    let bucket = started.require("KARU_TEST_S3_BUCKET");
    let client = common::client(&[
        ("AWS_S3_ENDPOINT", &started.url),
        ("AWS_VIRTUAL_HOSTING", "NO"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", &key),
        ("AWS_SECRET_ACCESS_KEY", &secret),
    ]);
    let s3 = AmazonS3Builder::new()
        .with_endpoint(&started.url)
        .with_bucket_name(&bucket)
        .with_region("us-east-1")
        .with_access_key_id(key)
        .with_secret_access_key(secret)
        .with_virtual_hosted_style_request(false)
        .with_client_options(ClientOptions::new().with_allow_http(true))
        .build()
        .unwrap();
    Some(S3s {
        client,
        s3: Arc::new(s3),
        bucket,
    })
}
