//! Workload P's readers (issue 16): the test kit's Parquet file read through a Parquet async
//! reader three ways, as the adapter's tests read it, each as the projection (2 columns of 5
//! row groups) and as a full scan. What a reader decoded is summed as it arrives (rows and a
//! checksum, the same work for every reader) and checked, once the timing is over, against
//! the values written, so a wrong read fails the run.

// `ParquetObjectReader` is what object_store users run today, deprecated or not: the peer.
#![allow(deprecated)]

use std::sync::Arc;

use futures::TryStreamExt as _;
use karu_object_store::{KaruParquetReader, KaruStore};
use karu_testkit::parquet::{COLUMNS, SELECTED, Summary};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetObjectReader};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};

use crate::readers::{Target, runtime, store};
use crate::workload::{Kind, Workload};

/// Which reader opens the file.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Via {
    /// karu's own `AsyncFileReader`, `KaruParquetReader`.
    Own,
    /// `ParquetObjectReader` over `KaruStore`.
    KaruStore,
    /// `ParquetObjectReader` over object_store's `HttpStore` or `AmazonS3`.
    ObjectStore,
}

/// Reads P's file through `via` (all of it with `scan`, else the projection) and sums what
/// was decoded.
pub fn read(w: &Workload, target: &Target, via: Via, scan: bool) -> Summary {
    let name = &w.objects[0].0;
    runtime().block_on(async {
        match via {
            Via::Own => {
                let file = target.locators(&w.objects).remove(0);
                decode(KaruParquetReader::new(target.karu_client(None), file), scan).await
            }
            Via::KaruStore => {
                let base = match &target.s3 {
                    Some(s3) => format!("s3://{}/{}", s3.bucket, target.prefix),
                    None => format!("{}/{}", target.base, target.prefix),
                };
                let store = KaruStore::new(target.karu_client(None), &base).expect("a KaruStore");
                let path = object_store::path::Path::from(name.as_str());
                decode(ParquetObjectReader::new(Arc::new(store), path), scan).await
            }
            Via::ObjectStore => {
                let path = target.store_path(name);
                decode(ParquetObjectReader::new(store(target), path), scan).await
            }
        }
    })
}

async fn decode<R: AsyncFileReader + Unpin + Send + 'static>(reader: R, scan: bool) -> Summary {
    let mut builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .expect("the file's metadata");
    if !scan {
        let mask = ProjectionMask::roots(builder.parquet_schema(), COLUMNS);
        builder = builder
            .with_projection(mask)
            .with_row_groups(SELECTED.to_vec());
    }
    let mut stream = builder.build().expect("a stream");
    let mut summary = Summary::default();
    while let Some(batch) = stream.try_next().await.expect("a record batch") {
        summary.add(&batch);
    }
    summary
}

/// Fails unless `got` is what the file holds for the projection (or, with `scan`, all of it).
pub fn check(w: &Workload, scan: bool, got: Summary) {
    let Kind::Parquet(rows) = w.kind else {
        unreachable!("P's readers read P")
    };
    let want = if scan {
        Summary::expected(rows, None, None)
    } else {
        Summary::expected(rows, Some(&COLUMNS), Some(&SELECTED))
    };
    assert_eq!(got, want, "decoded values differ from the written ones");
}
