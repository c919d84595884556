//! The partitions of one request grouped by the shard that owns them, so that a request
//! costs one call per target shard (one mesh message, or one local call), not one per
//! partition, however many partitions it lists. Runs on the shard serving the connection.
//!
//! Bounds: one group per shard (indexed by shard, so adding a part is O(1)); the parts are
//! what the request listed after its handler merged repeated partitions, so a request that
//! names one partition a million times becomes one part.
//!
//! Inline capacities: a request of a few partitions on one or two shards (most fetches and
//! offset lookups) groups without allocating, besides each shard's parts list, and a request
//! for one shard makes its call without a join.

use std::rc::Rc;

use smallvec::SmallVec;

use crate::forward::Serve;
use crate::shard::Shard;

/// Parts for each target shard, with the slot (a position in the handler's result list)
/// each part's answer goes to.
pub struct ByShard<P> {
    /// Index into `groups` by target shard.
    index_by_target: SmallVec<[Option<usize>; 16]>,
    /// In order of each shard's first part.
    groups: SmallVec<[ShardParts<P>; 2]>,
}

struct ShardParts<P> {
    target: usize,
    /// Result slots of `parts`, in the same order.
    slots: SmallVec<[usize; 4]>,
    parts: Vec<P>,
}

impl<P> ByShard<P> {
    pub fn new(shard_count: usize) -> Self {
        ByShard {
            index_by_target: smallvec::smallvec![None; shard_count],
            groups: SmallVec::new(),
        }
    }

    /// Adds `part`, owned by shard `target`, whose answer goes to result slot `slot`.
    pub fn add(&mut self, target: usize, slot: usize, part: P) {
        let index = *self.index_by_target[target].get_or_insert_with(|| {
            self.groups.push(ShardParts {
                target,
                slots: SmallVec::new(),
                parts: Vec::new(),
            });
            self.groups.len() - 1
        });
        let group = &mut self.groups[index];
        group.slots.push(slot);
        group.parts.push(part);
    }

    /// Makes one call per target shard (`call` builds it from that shard's parts), all at
    /// once, remote shards first so their messages are on the rings before this shard works
    /// on its own parts; puts each answer at its part's slot of `results`.
    pub async fn run<C, R>(
        self,
        shard: &Rc<Shard>,
        results: &mut [Option<R>],
        call: impl Fn(Vec<P>) -> C,
    ) where
        C: Serve<Shard, Reply = Vec<R>>,
    {
        let mut groups = self.groups;
        if groups.len() == 1 {
            let group = groups.pop().expect("one group");
            let answers = shard.call(group.target, call(group.parts)).await;
            fill(results, &group.slots, answers);
            return;
        }
        groups.sort_by_key(|group| group.target == shard.id);
        let calls = groups.into_iter().map(|group| {
            let request = call(group.parts);
            async move { (group.slots, shard.call(group.target, request).await) }
        });
        for (slots, answers) in futures::future::join_all(calls).await {
            fill(results, &slots, answers);
        }
    }
}

/// Puts each answer at its part's slot.
fn fill<R>(results: &mut [Option<R>], slots: &[usize], answers: Vec<R>) {
    // Each serving function answers one result per part, in order.
    assert_eq!(slots.len(), answers.len(), "one answer per part");
    for (&slot, answer) in slots.iter().zip(answers) {
        results[slot] = Some(answer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_group_by_target_in_first_seen_order() {
        let mut by_shard = ByShard::new(3);
        by_shard.add(2, 0, 'a');
        by_shard.add(0, 1, 'b');
        by_shard.add(2, 2, 'c');
        let groups: Vec<(usize, Vec<usize>, Vec<char>)> = by_shard
            .groups
            .into_iter()
            .map(|g| (g.target, g.slots.to_vec(), g.parts))
            .collect();
        assert_eq!(
            groups,
            vec![(2, vec![0, 2], vec!['a', 'c']), (0, vec![1], vec!['b'])]
        );
    }
}
