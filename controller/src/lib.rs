//! The controller: the metadata quorum (`quorum`) over the network (`net::peer`), applying
//! the committed metadata log to the image (`state_machine`), driven by one loop per voter
//! on a glommio executor of its own (`runtime`); the CONTROLLER listener's Kafka requests
//! (`listener`, `describe`); a broker's registration and heartbeats (`agent`); and a
//! broker-only node's following of the committed image (`observer`). See ARCHITECTURE.md,
//! "The cluster".

pub mod agent;
pub mod describe;
pub mod listener;
pub mod observer;
pub mod runtime;
pub mod state_machine;

pub use runtime::{
    run, ClusterRole, Command, ElectionConfig, ProposeError, RuntimeConfig, RuntimeError, Status,
    Voter,
};
pub use state_machine::MetadataStateMachine;
