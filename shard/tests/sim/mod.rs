//! The simulation's shared pieces: tracing, drawn configurations, the data directory.
//! `log_model` is one partition's model and checks (the log workload), `compaction` its
//! cleaner checks, `group_commit` one shard's group commit over several partitions.

use std::rc::Rc;

use shard::storage::sim::SimRng;
use shard::storage::{Disk, SimClock, SimDisk};
use shard::LogConfig;

pub(crate) const LEADER_EPOCH: i32 = 3;
/// Bytes of one key-map slot (`offset_map`: 128-bit hash + offset): sizes small maps.
pub(crate) const KEY_MAP_SLOT_BYTES: usize = 24;

/// `SIM_TRACE=1` prints every operation of a run (use with `SIM_SEED`).
pub(crate) fn trace_on() -> bool {
    std::env::var_os("SIM_TRACE").is_some()
}
/// `eprintln!` when `SIM_TRACE` is set (defined before the modules that use it).
macro_rules! trace {
    ($($t:tt)*) => { if $crate::sim::trace_on() { eprintln!($($t)*) } };
}

/// A log configuration drawn from `rng` (segment sizes, index density, retention).
pub(crate) fn draw_config(rng: &mut SimRng) -> LogConfig {
    LogConfig {
        segment_bytes: 2048 + rng.below(16 << 10),
        segment_ms: 10_000 + rng.below(120_000),
        index_interval_bytes: 64 + rng.below(1024) as u32,
        segment_index_bytes: 96 + rng.below(1024) as u32,
        retention_ms: if rng.chance(1, 2) {
            60_000 + rng.below(600_000) as i64
        } else {
            -1
        },
        retention_bytes: if rng.chance(1, 2) {
            16_384 + rng.below(65_536) as i64
        } else {
            -1
        },
        ..LogConfig::default()
    }
}

/// The broker's log.dirs exist (durably) before any partition is created in them.
pub(crate) fn make_data_dir(disk: &Rc<SimDisk>, clock: &SimClock) {
    disk.set_trace(trace_on());
    let env_disk = Disk::Sim(disk.clone());
    env_disk.create_dir_all("/data".as_ref()).unwrap();
    clock.block_on(env_disk.sync_dir("/".as_ref())).unwrap();
}

pub(crate) mod compaction;
pub(crate) mod group_commit;
pub(crate) mod log_model;
