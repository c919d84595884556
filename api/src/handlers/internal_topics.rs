//! Kafka's internal topics created on first use: `__consumer_offsets` by the first
//! FindCoordinator for a group, `__transaction_state` by the first for a transactional id.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use wire::ErrorCode;

use crate::forward::{self, TopicSpec};
use crate::shard::Shard;

/// Kafka's default replication factor of its internal topics
/// (`offsets.topic.replication.factor`, `transaction.state.log.replication.factor`).
const INTERNAL_TOPIC_REPLICATION_FACTOR: usize = 3;

/// How long FindCoordinator waits for its shard to adopt an internal topic it just had
/// created (opening 50 partitions; seconds only on a very slow disk). Past it the client gets
/// the retriable COORDINATOR_NOT_AVAILABLE and asks again.
const ADOPT_WAIT: Duration = Duration::from_secs(10);

/// Creates the compacted internal topic `name` if it does not exist, replicated over as many
/// brokers as the cluster has, up to Kafka's default of 3. Answers only once this shard
/// routes to the new partitions: the client's next request comes on this connection, and
/// librdkafka gives up on a COORDINATOR_NOT_AVAILABLE there instead of asking again.
pub(super) async fn ensure(
    shard: &Rc<Shard>,
    name: &str,
    partitions: i32,
    segment_bytes: u64,
) -> Result<(), ErrorCode> {
    if shard.image().topic(name).is_some() {
        return Ok(());
    }
    let configs = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), segment_bytes.to_string()),
    ]);
    let spec = TopicSpec {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: match &shard.cluster {
            None => 1,
            Some(_) => shard
                .image()
                .brokers
                .values()
                .filter(|b| !b.fenced)
                .count()
                .clamp(1, INTERNAL_TOPIC_REPLICATION_FACTOR) as i16,
        },
        configs,
        assignments: Vec::new(),
    };
    let create = forward::CreateTopics {
        topics: vec![spec],
        validate_only: false,
    };
    for outcome in shard.call(0, create).await {
        if outcome.error_code == 0 {
            tracing::info!(partitions = outcome.num_partitions, "created {name}");
        } else if outcome.error_code != ErrorCode::TopicAlreadyExists.code() {
            tracing::warn!(error_code = outcome.error_code, message = ?outcome.error_message, "creating {name} failed");
            return Err(ErrorCode::CoordinatorNotAvailable);
        }
    }
    if !shard
        .wait_for_image(|image| image.topic(name).is_some(), ADOPT_WAIT)
        .await
    {
        return Err(ErrorCode::CoordinatorNotAvailable);
    }
    Ok(())
}
