//! The metadata quorum's core (KRaft's role): a Raft group of controller voters on TiKV's
//! `raft` crate (raft-rs 0.7), with its log on the `storage` seam so that the same code runs
//! on the real disk and on the simulated one.
//!
//! - `log_store`: the durable Raft log (entries, hard state, conf state, snapshot) and the
//!   `raft::Storage` it answers from memory;
//! - `node`: `QuorumNode`, the Ready loop (persist before acking, apply in order, compact by
//!   snapshot) and the leader's view for DescribeQuorum;
//! - `codec`: raft messages to and from bytes, bounded and typed on garbage;
//! - `tracing_logger`: raft-rs's slog records into `tracing`.
//!
//! Not here: the network transport and the broker's wiring (they drive `QuorumNode` through
//! `tick`, `step`, `propose`, `advance` and an `Outbox`). `tests/sim_quorum.rs` is the
//! deterministic simulation that checks it: voters on simulated disks, a lossy partitioned
//! network, crashes and power losses.

pub mod codec;
pub mod log_store;
pub mod node;
pub mod tracing_logger;

pub use node::{
    Outbox, Proposed, QuorumConfig, QuorumError, QuorumNode, RestoreError, StateMachine,
    VoterProgress,
};
pub use raft::eraftpb::Message;
pub use raft::StateRole;
