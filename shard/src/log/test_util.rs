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

/// A simulated disk (seeded) with `/sim` made durable, and an environment on it whose clock
/// starts at `SIM_NOW`.
pub(crate) fn sim_env(seed: u64) -> (std::rc::Rc<crate::storage::SimDisk>, crate::storage::Env) {
    use crate::storage::{Clock, Disk, Env, SimClock, SimDisk};
    use std::path::Path;
    let disk = SimDisk::new(seed);
    disk.create_dir_all(Path::new("/sim")).expect("sim dir");
    disk.sync_dir(Path::new("/")).expect("sim sync");
    let env = Env {
        disk: Disk::Sim(disk.clone()),
        clock: Clock::Sim(SimClock::new(SIM_NOW)),
    };
    (disk, env)
}

/// Where `sim_env`'s clock starts (ms since the epoch).
pub(crate) const SIM_NOW: i64 = 1_700_000_000_000;
