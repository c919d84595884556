//! ConsumerGroupDescribe's view of a group.

use std::collections::HashMap;

use super::*;

/// Partitions of one topic, with the topic's name (ConsumerGroupDescribe names them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPartitions {
    pub topic_id: TopicId,
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

/// One member as ConsumerGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Vec<NamedPartitions>,
    pub target_assignment: Vec<NamedPartitions>,
}

/// A consumer group as ConsumerGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub group_id: String,
    pub state: GroupState,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<DescribedMember>,
}

impl ConsumerGroup {
    /// ConsumerGroupDescribe's entry for this group (a topic the group's subscription
    /// metadata does not name is left out of the assignments).
    pub fn describe(&self, config: &ConsumerGroupConfig) -> Description {
        let names: HashMap<TopicId, &str> = self
            .subscription_metadata
            .values()
            .map(|t| (t.id, t.name.as_str()))
            .collect();
        let named = |assignment: &Assignment| -> Vec<NamedPartitions> {
            assignment
                .iter()
                .filter_map(|(topic, parts)| {
                    names.get(topic).map(|name| NamedPartitions {
                        topic_id: *topic,
                        topic_name: name.to_string(),
                        partitions: parts.iter().copied().collect(),
                    })
                })
                .collect()
        };
        Description {
            group_id: self.group_id.clone(),
            state: self.state(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.preferred_assignor(config).name().to_string(),
            members: self
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                    subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                    assignment: named(&m.assigned),
                    target_assignment: named(&self.target_assignment(&m.member_id)),
                })
                .collect(),
        }
    }
}
