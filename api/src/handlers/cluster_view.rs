//! What Metadata, DescribeCluster and FindCoordinator say about the cluster: a single node
//! names itself; a cluster node names the registered, unfenced brokers (by the endpoint of
//! the listener the request came through, as Kafka) and the active controller.

use std::rc::Rc;

use crate::metadata::image::PartitionImage;
use crate::shard::Shard;

pub struct BrokerView {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// The brokers clients may use, as reached through `listener`.
pub fn brokers(shard: &Rc<Shard>, listener: &str) -> Vec<BrokerView> {
    if shard.cluster.is_none() {
        let advertised = shard.config.advertised_for(listener);
        return vec![BrokerView {
            node_id: shard.config.node_id,
            host: advertised.host.clone(),
            port: i32::from(advertised.port),
            rack: None,
        }];
    }
    shard
        .image()
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let endpoint = b
                .endpoints
                .iter()
                .find(|e| e.name == listener)
                .or_else(|| b.endpoints.first())?;
            Some(BrokerView {
                node_id: b.broker_id,
                host: endpoint.host.clone(),
                port: i32::from(endpoint.port),
                rack: b.rack.clone(),
            })
        })
        .collect()
}

/// The active controller's id (-1 when none is known). Clients send admin requests to the
/// node named here, so an active controller that is no broker (`process.roles=controller`,
/// unreachable to clients) is replaced, as Kafka's KRaft brokers do, by an unfenced broker:
/// the lowest id (Kafka draws one at random; a fixed choice lets every broker name the same),
/// which forwards what it gets to the active controller.
pub fn controller_id(shard: &Shard) -> i32 {
    let Some(link) = &shard.cluster else {
        return shard.config.node_id;
    };
    let Some(leader) = link.leader() else {
        return -1;
    };
    let image = shard.image();
    let is_broker = |id: i32| {
        image
            .brokers
            .values()
            .any(|b| b.broker_id == id && !b.fenced)
    };
    if is_broker(leader) {
        return leader;
    }
    image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .map(|b| b.broker_id)
        .min()
        .unwrap_or(-1)
}

/// A partition's leader, replicas and ISR as Metadata reports them (a single node: itself).
pub fn placement(shard: &Shard, partition: &PartitionImage) -> (i32, Vec<i32>, Vec<i32>) {
    match &shard.cluster {
        None => {
            let node = shard.config.node_id;
            (node, vec![node], vec![node])
        }
        Some(_) => (
            partition.leader,
            partition.replicas.clone(),
            partition.isr.clone(),
        ),
    }
}

/// KIP-951: the current leader and leader epoch of `partition` of `topic` (None: unknown, or
/// no leader).
pub fn current_leader(
    topic: Option<&crate::metadata::image::TopicImage>,
    partition: i32,
) -> Option<(i32, i32)> {
    topic?
        .partition(partition)
        .filter(|p| p.leader >= 0)
        .map(|p| (p.leader, p.leader_epoch))
}

/// The brokers among `leaders`, as reached through `listener` (KIP-951's node endpoints).
pub fn endpoints_of(shard: &Rc<Shard>, listener: &str, leaders: &[i32]) -> Vec<BrokerView> {
    brokers(shard, listener)
        .into_iter()
        .filter(|b| leaders.contains(&b.node_id))
        .collect()
}
