//! Time-driven upkeep of this shard's logs: retention by time and size, and compaction of the
//! log most in need of it.

use super::*;

impl Shard {
    /// Deletes old segments by `retention.ms` / `retention.bytes` on every partition of this
    /// shard (Kafka checks every `log.retention.check.interval.ms`, 5 minutes by default).
    pub fn apply_retention(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() as i64);
        let partitions: Vec<Rc<Partition>> = self.partitions.borrow().values().cloned().collect();
        for partition in partitions {
            // Producer expiry rides on the retention timer (Kafka checks every 10 minutes,
            // `producer.id.expiration.check.interval.ms`; retention's default is 5).
            let expired = partition.log.borrow_mut().remove_expired_producers(now);
            if expired > 0 {
                tracing::debug!(shard = self.id, expired, "idle producers expired");
            }
            if shard::log::cleaner::is_cleaning(partition.log.borrow().dir()) {
                continue; // never delete a segment a cleaner pass is rewriting
            }
            let result = partition.log.borrow_mut().apply_retention(now);
            match result {
                Ok(0) => {}
                Ok(deleted) => {
                    tracing::info!(shard = self.id, deleted, "retention deleted old segments")
                }
                Err(error) => tracing::warn!(shard = self.id, %error, "retention failed"),
            }
        }
    }

    /// One round of this shard's log cleaner (Kafka's `cleanFilthiestLog`): of the compacted
    /// partitions due for a pass, the one with the highest dirty ratio is cleaned (overdue by
    /// `max.compaction.lag.ms` first). True if a log was cleaned (the caller then loops
    /// without sleeping).
    pub async fn clean_filthiest_log(&self, cleaner: &mut shard::log::cleaner::Cleaner) -> bool {
        use shard::log::cleaner::Cleaner;
        let now = shard_now_ms();
        let compacted: Vec<Rc<Partition>> = self
            .partitions
            .borrow()
            .values()
            .filter(|p| p.log.borrow().config().cleanup_compact)
            .cloned()
            .collect();
        let mut best: Option<(Rc<Partition>, shard::log::cleaner::Cleanability)> = None;
        for partition in &compacted {
            match Cleaner::cleanability(&partition.log, now).await {
                Ok(Some(c)) if c.due() => {
                    let better = best
                        .as_ref()
                        .is_none_or(|(_, b)| (c.overdue, c.ratio()) > (b.overdue, b.ratio()));
                    if better {
                        best = Some((partition.clone(), c));
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(shard = self.id, %error, "log cleaner check failed"),
            }
        }
        let cleaned = best.is_some();
        if let Some((partition, c)) = best {
            if let Err(error) = cleaner.clean(&partition.log, now, &c).await {
                tracing::warn!(shard = self.id, dir = %partition.log.borrow().dir().display(), %error, "log cleaner pass failed");
            }
        }
        cleaned
    }
}
