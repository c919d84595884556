//! The quorum simulation's pieces: `world` (network, client queues, the checker's records),
//! `voter` (one voter's task and its checked state machine), `cluster` (one seeded run).

/// `QUORUM_SIM_TRACE=1` prints the run's events (use with `QUORUM_SIM_SEED`).
pub(crate) fn trace_on() -> bool {
    std::env::var_os("QUORUM_SIM_TRACE").is_some()
}

pub(crate) mod cluster;
pub(crate) mod voter;
pub(crate) mod world;
