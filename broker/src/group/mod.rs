//! Consumer groups: the records of `__consumer_offsets` and KIP-848's consumer groups.

pub mod assignor;
pub mod consumer;
pub mod records;
