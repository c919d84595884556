//! ConsumerGroupDescribe's view of a group.

use std::collections::HashMap;

use wire::generated::consumer_group_describe_response as describe;
use wire::primitives::Uuid;

use super::*;

impl ConsumerGroup {
    /// ConsumerGroupDescribe's entry for this group. `authorized_operations` is the handler's
    /// (i32::MIN when not asked for, as Kafka).
    pub fn describe(
        &self,
        config: &ConsumerGroupConfig,
        authorized_operations: i32,
    ) -> describe::DescribedGroup {
        let names: HashMap<TopicId, &str> = self
            .subscription_metadata
            .values()
            .map(|t| (t.id, t.name.as_str()))
            .collect();
        let to_wire = |assignment: &Assignment| describe::Assignment {
            topic_partitions: assignment
                .iter()
                .filter_map(|(topic, parts)| {
                    names.get(topic).map(|name| describe::TopicPartitions {
                        topic_id: Uuid(*topic),
                        topic_name: name.to_string(),
                        partitions: parts.iter().copied().collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        };
        describe::DescribedGroup {
            group_id: self.group_id.clone(),
            group_state: self.state().name().to_string(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.preferred_assignor(config).name().to_string(),
            members: self
                .members
                .values()
                .map(|m| describe::Member {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                    subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                    assignment: to_wire(&m.assigned),
                    target_assignment: to_wire(&self.target_assignment(&m.member_id)),
                    ..Default::default()
                })
                .collect(),
            authorized_operations,
            ..Default::default()
        }
    }
}
