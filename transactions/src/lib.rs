//! Kafka's transaction coordinator as a state machine: no I/O, no shard, time passed in.
