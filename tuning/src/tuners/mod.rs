//! The tuners. Each reads what it judges through the context's root and returns findings;
//! none writes: `apply` carries out the findings' actions.

pub mod cpu;
pub mod disk;
pub mod io;
pub mod limits;
pub mod memory;
pub mod net;
pub mod sysctl;

use crate::context::Context;
use crate::finding::Finding;

pub type Tuner = fn(&Context) -> Vec<Finding>;

/// Every tuner by name, in report order.
pub const TUNERS: &[(&str, Tuner)] = &[
    ("cpu_governor", cpu::governor),
    ("irq_affinity", cpu::irq_affinity),
    ("isolcpus", cpu::isolation),
    ("clocksource", cpu::clocksource),
    ("transparent_hugepages", memory::transparent_hugepages),
    ("swappiness", memory::swappiness),
    ("writeback", memory::writeback),
    ("listen_backlog", net::listen_backlog),
    ("socket_buffers", net::socket_buffers),
    ("ktls", net::ktls),
    ("aio", io::aio),
    ("io_uring", io::io_uring),
    ("rlimits", limits::rlimits),
    ("disk", disk::disk),
];
