//! `find-hanging`: Kafka's search for transactions no coordinator tracks any more.

use super::*;

/// Where find-hanging looks and how old a transaction must be to be a candidate.
#[derive(Debug, Clone)]
pub struct Search {
    pub broker_id: Option<i32>,
    pub topic: Option<String>,
    pub partition: Option<i32>,
    pub max_transaction_timeout_ms: i64,
}

/// An open transaction on one partition: the producer that holds it there.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenTransaction {
    pub topic: String,
    pub partition: i32,
    pub producer: ProducerState,
}

/// The partitions to search, each with the broker to ask: `--broker-id` where given (only
/// partitions it holds a replica of), else each partition's leader.
pub fn partitions_to_search(md: &MetadataResponse, search: &Search) -> Vec<((String, i32), i32)> {
    let mut found = Vec::new();
    for t in &md.topics {
        let Some(name) = t.name.as_deref() else {
            continue;
        };
        if t.error_code != 0 || search.topic.as_deref().is_some_and(|want| want != name) {
            continue;
        }
        for p in &t.partitions {
            if search
                .partition
                .is_some_and(|want| want != p.partition_index)
            {
                continue;
            }
            let node = match search.broker_id {
                Some(b) if p.replica_nodes.contains(&b) => b,
                Some(_) => continue,
                None if p.leader_id >= 0 => p.leader_id,
                None => continue,
            };
            found.push(((name.to_owned(), p.partition_index), node));
        }
    }
    found.sort();
    found
}

/// Kafka's candidates: producers with an open transaction whose last write is older than
/// the maximum transaction timeout (a live transaction would have been timed out by now).
pub fn candidates(
    producers: &BTreeMap<(String, i32), Vec<ProducerState>>,
    max_transaction_timeout_ms: i64,
    now_ms: i64,
) -> Vec<OpenTransaction> {
    let mut open = Vec::new();
    for ((topic, partition), states) in producers {
        for p in states {
            if p.current_txn_start_offset >= 0
                && now_ms - p.last_timestamp > max_transaction_timeout_ms
            {
                open.push(OpenTransaction {
                    topic: topic.clone(),
                    partition: *partition,
                    producer: p.clone(),
                });
            }
        }
    }
    open
}

/// Kafka's filter: a candidate is hanging unless its producer id still belongs to a
/// transactional id (`transactional_ids`, from ListTransactions) whose coordinator still
/// names this partition in the transaction of that producer (`descriptions`: `None` where
/// the coordinator no longer knows the id). A partition still named is one the coordinator
/// will write a marker to.
pub fn filter_hanging(
    candidates: Vec<OpenTransaction>,
    transactional_ids: &BTreeMap<i64, String>,
    descriptions: &BTreeMap<String, Option<Described>>,
) -> Vec<OpenTransaction> {
    candidates
        .into_iter()
        .filter(|c| {
            let Some(id) = transactional_ids.get(&c.producer.producer_id) else {
                return true;
            };
            let Some(Some(d)) = descriptions.get(id) else {
                return true;
            };
            d.producer_id != c.producer.producer_id
                || !d.topic_partitions.contains(&(c.topic.clone(), c.partition))
        })
        .collect()
}

/// Runs the search over the cluster.
pub fn find_hanging(
    cluster: &mut Cluster,
    search: &Search,
    now_ms: i64,
) -> anyhow::Result<Vec<OpenTransaction>> {
    let topics = search.topic.as_ref().map(|t| vec![t.clone()]);
    let md = cluster.metadata(topics.as_deref())?;
    if let Some(topic) = &search.topic {
        // A named topic that does not exist is an error, not an empty search.
        leaders(&md, topic)?;
    }
    let mut by_node: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for (key, node) in partitions_to_search(&md, search) {
        by_node.entry(node).or_default().push(key);
    }
    let mut producers = BTreeMap::new();
    for (node, partitions) in by_node {
        for batch in partitions.chunks(BATCH_MAX) {
            let found = describe_producers_at(cluster, node, batch).with_context(|| {
                format!(
                    "Failed to describe producers for {} partitions on broker {node}",
                    batch.len()
                )
            })?;
            producers.extend(found);
        }
    }
    let open = candidates(&producers, search.max_transaction_timeout_ms, now_ms);
    if open.is_empty() {
        return Ok(open);
    }
    let producer_ids: Vec<i64> = open
        .iter()
        .map(|o| o.producer.producer_id)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let transactional_ids: BTreeMap<i64, String> = list(cluster, &producer_ids)?
        .into_iter()
        .filter(|l| producer_ids.contains(&l.producer_id))
        .map(|l| (l.producer_id, l.transactional_id))
        .collect();
    let mut descriptions = BTreeMap::new();
    for id in transactional_ids.values() {
        let described = match describe(cluster, id)? {
            Ok(d) => Some(d),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(e),
        };
        descriptions.insert(id.clone(), described);
    }
    Ok(filter_hanging(open, &transactional_ids, &descriptions))
}

fn is_not_found(error: &anyhow::Error) -> bool {
    error
        .downcast_ref::<crate::routing::KafkaError>()
        .is_some_and(|k| k.name == ErrorCode::TransactionalIdNotFound.kafka_name())
}
