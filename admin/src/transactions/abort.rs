//! `abort`: an ABORT marker written to a partition's leader for one producer.

use super::*;

/// The marker `abort` wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
}

/// The producer whose open transaction on the partition starts at `start_offset`.
pub fn marker_for_start_offset(
    producers: &[ProducerState],
    start_offset: i64,
) -> Option<AbortMarker> {
    let p = producers
        .iter()
        .find(|p| p.current_txn_start_offset >= 0 && p.current_txn_start_offset == start_offset)?;
    Some(AbortMarker {
        producer_id: p.producer_id,
        // DescribeProducers widens the epoch to an int32; a producer epoch is an int16.
        producer_epoch: i16::try_from(p.producer_epoch).unwrap_or(i16::MAX),
        coordinator_epoch: p.coordinator_epoch.max(0),
    })
}

/// Writes an ABORT marker for the transaction `args` names to the partition's leader.
pub fn abort(cluster: &mut Cluster, args: &AbortArgs) -> anyhow::Result<AbortMarker> {
    let (topic, partition) = (args.topic.as_str(), args.partition);
    let leader = leader_of(cluster, topic, partition)?;
    let marker = match (args.start_offset, args.producer_id) {
        (Some(start_offset), _) => {
            let producers =
                describe_producers(cluster, leader, topic, partition).with_context(|| {
                    format!("Failed to validate producer state for partition {topic}-{partition}")
                })?;
            let Some(marker) = marker_for_start_offset(&producers, start_offset) else {
                bail!(
                    "Could not find any open transactions starting at offset {start_offset} \
                     on partition {topic}-{partition}"
                );
            };
            marker
        }
        (None, Some(producer_id)) => AbortMarker {
            producer_id,
            producer_epoch: args
                .producer_epoch
                .context("Missing required argument --producer-epoch")?,
            // A transaction that hung before its producer's first marker reports -1; 0 is
            // no greater than any epoch a coordinator has used.
            coordinator_epoch: args
                .coordinator_epoch
                .context("Missing required argument --coordinator-epoch")?
                .max(0),
        },
        (None, None) => bail!(
            "The transaction to abort must be identified either with --start-offset or with \
             --producer-id, --producer-epoch, and --coordinator-epoch"
        ),
    };
    write_abort_marker(cluster, leader, topic, partition, marker).with_context(|| {
        format!(
            "Failed to abort transaction of producer {} (epoch {}, coordinator epoch {}) on \
             {topic}-{partition}",
            marker.producer_id, marker.producer_epoch, marker.coordinator_epoch
        )
    })?;
    Ok(marker)
}

fn write_abort_marker(
    cluster: &mut Cluster,
    leader: i32,
    topic: &str,
    partition: i32,
    marker: AbortMarker,
) -> anyhow::Result<()> {
    let client = cluster.node(leader)?;
    let version = client.version(ApiKey::WriteTxnMarkers, 0, 1)?;
    let request = WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: marker.producer_id,
            producer_epoch: marker.producer_epoch,
            // false: ABORT.
            transaction_result: false,
            topics: vec![WritableTxnMarkerTopic {
                name: topic.to_owned(),
                partition_indexes: vec![partition],
                ..Default::default()
            }],
            coordinator_epoch: marker.coordinator_epoch,
            ..Default::default()
        }],
        ..Default::default()
    };
    let resp: WriteTxnMarkersResponse =
        client.request(ApiKey::WriteTxnMarkers, version, &request)?;
    let code = resp
        .markers
        .iter()
        .filter(|m| m.producer_id == marker.producer_id)
        .flat_map(|m| &m.topics)
        .filter(|t| t.name == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition)
        .map(|p| p.error_code)
        .with_context(|| format!("WriteTxnMarkers answered nothing for {topic}-{partition}"))?;
    if code != 0 {
        return Err(kafka_error(format!("{topic}-{partition}"), code, None).into());
    }
    Ok(())
}
