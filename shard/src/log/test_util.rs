//! Test helpers: batches built with wire's `BatchBuilder`, and a glommio executor to run in.

use bytes::Bytes;
use wire::record_batch::{validate_batch, BatchBuilder, BatchHeader, Compression};

/// A valid batch of `records` records with values of `value_len` bytes, all with timestamp
/// `ts`.
pub(crate) fn batch(records: usize, value_len: usize, ts: i64) -> (Bytes, BatchHeader) {
    let value = vec![0xabu8; value_len];
    let mut b = BatchBuilder::new(Compression::None);
    for i in 0..records {
        b = b.push(Some(format!("k{i}").as_bytes()), Some(&value), &[], ts);
    }
    let bytes = b.build();
    let h = validate_batch(&bytes).expect("builder makes valid batches");
    (bytes, h)
}

/// Runs `f` to completion on a fresh glommio executor on this thread.
pub(crate) fn run<F: std::future::Future>(f: F) -> F::Output {
    glommio::LocalExecutorBuilder::default()
        .make()
        .expect("glommio executor")
        .run(f)
}

pub(crate) fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}
