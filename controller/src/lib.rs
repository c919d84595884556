//! The controller: the metadata quorum (`quorum`) over the network (`net::peer`), applying
//! the committed metadata log to the image (`state_machine`), driven by one loop per voter
//! on a glommio executor of its own (`runtime`).
//!
//! Not yet here: the broker's side (registration and heartbeats over the network, the
//! brokers following the committed log), the controller's Kafka APIs on the CONTROLLER
//! listener, and the broker binary starting it from `process.roles`; see ARCHITECTURE.md,
//! "The cluster".

pub mod agent;
pub mod describe;
pub mod listener;
pub mod observer;
pub mod runtime;
pub mod state_machine;

pub use runtime::{
    run, ClusterRole, Command, ProposeError, RuntimeConfig, RuntimeError, Status, Voter,
};
pub use state_machine::MetadataStateMachine;
