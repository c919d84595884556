//! What the tuners need to know about the deployment: the root to read through, the data
//! directory and the cores the shards run on.

use std::path::PathBuf;

use crate::cpuset::CpuSet;
use crate::root::Root;

#[derive(Debug, Clone)]
pub struct Context {
    pub root: Root,
    /// The broker's data directory (`log.dirs`), as a path on the checked system.
    pub data_dir: PathBuf,
    /// The cores shards are pinned to; None means every online core (the broker's default).
    pub shard_cores: Option<CpuSet>,
}

impl Context {
    pub fn new(root: Root, data_dir: impl Into<PathBuf>) -> Context {
        Context {
            root,
            data_dir: data_dir.into(),
            shard_cores: None,
        }
    }

    pub fn online_cpus(&self) -> CpuSet {
        self.root
            .read("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|text| CpuSet::parse(&text).ok())
            .filter(|set| !set.is_empty())
            .unwrap_or_else(|| CpuSet::from_cpus([0]))
    }

    /// The shard cores, bounded to the online ones.
    pub fn shards(&self) -> CpuSet {
        let online = self.online_cpus();
        match &self.shard_cores {
            Some(cores) => CpuSet::from_cpus(cores.iter().filter(|c| online.contains(*c))),
            None => online,
        }
    }

    /// Online cores no shard runs on: where interrupts and the OS belong.
    pub fn spare_cores(&self) -> CpuSet {
        self.online_cpus().difference(&self.shards())
    }
}
