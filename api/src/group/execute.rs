//! The group calls on the coordinator that owns the group's partition (see `calls`): the
//! classic protocol's calls, KIP-848 heartbeats, describes and lists, each persisted before it
//! is answered.

use super::calls::{
    ConsumerDescribeReply, ConsumerHeartbeat, ConsumerHeartbeatReply, Heartbeat, HeartbeatReply,
    JoinFailed, JoinReply, LeaveReply, MemberLeft, OffsetFetch, OffsetFetchReply, Refused,
    SyncGroup, SyncReply,
};
use super::*;

impl Coordinator {
    /// JoinGroup: answered at once or when the group's join phase ends.
    pub(super) async fn join(
        shard: &Rc<Shard>,
        partition: i32,
        group_id: String,
        args: JoinArgs,
    ) -> JoinReply {
        let coordinator = &shard.coordinator;
        let now = coordinator.now();
        let config = &shard.config.groups;
        let member_id = args.member_id.clone();
        if let Err(code) = Self::retire_empty_consumer_group(shard, partition, &group_id).await {
            return Err(JoinFailed::new(&member_id, code));
        }
        let step = coordinator.with_groups(partition, |groups, _| {
            if groups
                .get(&group_id)
                .is_some_and(Group::has_consumer_members)
            {
                // Kafka refuses a classic member in a consumer group whose members do not
                // speak its protocol (no classic members to share one with).
                return Err(ErrorCode::InconsistentGroupProtocol);
            }
            let group = groups
                .entry(group_id.clone())
                .or_insert_with(|| Group::new(wall_ms()));
            let step = group.classic.join(
                args,
                now,
                config.max_size,
                config.initial_rebalance_delay_ms,
            );
            if group.classic.is_live() {
                coordinator.live.notify(usize::MAX);
            }
            Ok(step)
        });
        let reply = match step.and_then(|step| step) {
            Err(code) => return Err(JoinFailed::new(&member_id, code)),
            Ok(Step::Now(reply)) => {
                Self::persist_group(shard, partition, &group_id).await;
                reply
            }
            Ok(Step::Wait(receiver)) => match receiver.await {
                Ok(reply) => reply,
                Err(_) => return Err(JoinFailed::new(&member_id, ErrorCode::RebalanceInProgress)),
            },
        };
        reply.map_err(JoinFailed::from)
    }

    /// SyncGroup: the leader's assignments are persisted before anyone gets theirs.
    pub(super) async fn sync(shard: &Rc<Shard>, call: SyncGroup) -> SyncReply {
        let coordinator = &shard.coordinator;
        let now = coordinator.now();
        let SyncGroup {
            partition,
            group_id,
            member_id,
            group_instance_id,
            generation_id,
            protocol_type,
            protocol_name,
            assignments,
        } = call;
        let step = coordinator.with_groups(partition, |groups, topic_id| {
            let Some(group) = groups.get_mut(&group_id) else {
                return (Step::Now(Err(GroupError::UnknownMemberId)), None);
            };
            let step = group.classic.sync(
                &member_id,
                group_instance_id.as_deref(),
                generation_id,
                protocol_type.as_deref(),
                protocol_name.as_deref(),
                assignments,
                now,
            );
            let persist =
                (group.classic.leader_synced() && group.classic.take_dirty()).then(|| {
                    (
                        topic_id,
                        group.classic.generation,
                        Self::group_record(&group_id, group),
                    )
                });
            (step, persist)
        });
        let (step, persist) = step?;
        if let Some((topic_id, generation, record)) = persist {
            let ok = Self::append(shard, topic_id, partition, &[record])
                .await
                .is_ok();
            let now = coordinator.now();
            let _ = coordinator.with_groups(partition, |groups, _| {
                if let Some(group) = groups.get_mut(&group_id) {
                    group.classic.assignments_persisted(generation, ok, now);
                }
            });
        }
        let reply = match step {
            Step::Now(reply) => reply,
            Step::Wait(receiver) => receiver
                .await
                .unwrap_or(Err(GroupError::RebalanceInProgress)),
        };
        reply.map_err(GroupError::error_code)
    }

    /// A classic member's Heartbeat.
    pub(super) fn heartbeat(&self, call: Heartbeat) -> HeartbeatReply {
        let now = self.now();
        let result = self.with_groups(call.partition, |groups, _| {
            match groups.get_mut(&call.group_id) {
                Some(group) => group.classic.heartbeat(
                    &call.member_id,
                    call.group_instance_id.as_deref(),
                    call.generation_id,
                    now,
                ),
                None => Err(GroupError::UnknownMemberId),
            }
        })?;
        result.map_err(GroupError::error_code)
    }

    /// LeaveGroup of some members; the group is persisted if it emptied.
    pub(super) async fn leave(
        shard: &Rc<Shard>,
        partition: i32,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> LeaveReply {
        let coordinator = &shard.coordinator;
        let now = coordinator.now();
        let left = coordinator.with_groups(partition, |groups, _| {
            let mut group = groups.get_mut(group_id);
            let left = members
                .into_iter()
                .map(|(member_id, group_instance_id)| {
                    let result = match group.as_deref_mut() {
                        Some(group) => group
                            .classic
                            .leave(&member_id, group_instance_id.as_deref(), now)
                            .map_err(GroupError::error_code),
                        None => Err(ErrorCode::UnknownMemberId),
                    };
                    MemberLeft {
                        member_id,
                        group_instance_id,
                        result,
                    }
                })
                .collect();
            if let Some(group) = group {
                if group.classic.member_count() == 0 {
                    group.empty_since = wall_ms();
                }
            }
            left
        })?;
        Self::persist_if_empty(shard, partition, group_id).await;
        Ok(left)
    }

    /// OffsetFetch of one group: its committed offsets of the named partitions, or all.
    pub(super) fn offset_fetch(&self, call: OffsetFetch) -> OffsetFetchReply {
        let OffsetFetch {
            partition,
            group_id,
            topics,
            member_id,
            member_epoch,
            require_stable,
        } = call;
        let checked = self.with_groups(partition, |groups, _| {
            let consumer = groups.get(&group_id).and_then(Group::consumer);
            match consumer {
                Some(c) => c.validate_offset_fetch(member_id.as_deref(), member_epoch),
                None => Ok(()),
            }
        });
        if let Ok(Err(error)) = checked {
            return Err(error.error_code());
        }
        self.with_groups(partition, |groups, _| {
            let group = groups.get(&group_id);
            let fetched = |topic: &str, p: i32| {
                let key = (topic.to_string(), p);
                if require_stable && group.is_some_and(|g| g.has_pending_txn_offset(&key)) {
                    let unstable = ErrorCode::UnstableOffsetCommit.code();
                    return (p, -1, -1, Some(String::new()), unstable);
                }
                let committed = group.and_then(|g| g.offsets.get(&key));
                match committed {
                    Some(c) => (p, c.offset, c.leader_epoch, Some(c.metadata.clone()), 0),
                    None => (p, -1, -1, Some(String::new()), 0),
                }
            };
            match topics {
                Some(topics) => topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        let parts = partitions.iter().map(|&p| fetched(&name, p)).collect();
                        (name, parts)
                    })
                    .collect(),
                None => {
                    let mut by_topic: BTreeMap<String, Vec<_>> = BTreeMap::new();
                    if let Some(group) = group {
                        for (topic, p) in group.offsets.keys() {
                            by_topic
                                .entry(topic.clone())
                                .or_default()
                                .push(fetched(topic, *p));
                        }
                    }
                    by_topic.into_iter().collect()
                }
            }
        })
    }

    /// DescribeGroups' entry for one group.
    pub(super) fn describe(&self, partition: i32, group_id: String) -> DescribedGroup {
        let dead = |group_id: &str| DescribedGroup {
            error_code: 0,
            group_id: group_id.to_string(),
            group_state: "Dead".into(),
            ..Default::default()
        };
        let described = self.with_groups(partition, |groups, _| match groups.get(&group_id) {
            // Not a classic group: Kafka describes it as Dead (GROUP_ID_NOT_FOUND from
            // DescribeGroups v6, which is not served).
            Some(group) if group.consumer().is_some() => dead(&group_id),
            Some(group) => describe(&group_id, group),
            None => dead(&group_id),
        });
        described.unwrap_or_else(|code| DescribedGroup {
            error_code: code.code(),
            group_id,
            ..Default::default()
        })
    }

    /// ConsumerGroupDescribe of one group.
    pub(super) fn consumer_describe(
        &self,
        partition: i32,
        group_id: &str,
        config: &consumer::ConsumerGroupConfig,
    ) -> ConsumerDescribeReply {
        let described = self.with_groups(partition, |groups, _| {
            let group = groups.get(group_id);
            match group.and_then(Group::consumer) {
                Some(consumer) => Ok(consumer.describe(config)),
                None => {
                    let message = if group.is_some() {
                        format!("Group {group_id} is not a consumer group.")
                    } else {
                        format!("Group {group_id} not found.")
                    };
                    Err(Refused {
                        code: ErrorCode::GroupIdNotFound,
                        message: Some(message),
                    })
                }
            }
        });
        described.map_err(Refused::code)?
    }

    /// ListGroups' entries for every group of this shard's partitions.
    pub(super) fn list(&self) -> Vec<ListedGroup> {
        let mut listed = Vec::new();
        for state in self.partitions.borrow().values() {
            let PartitionState::Loaded { groups, .. } = state else {
                continue;
            };
            for (id, group) in groups {
                if let Some(consumer) = group.consumer() {
                    listed.push(ListedGroup {
                        group_id: id.clone(),
                        protocol_type: consumer::PROTOCOL_TYPE.into(),
                        group_state: consumer.state().name().into(),
                        group_type: "consumer".into(),
                        ..Default::default()
                    });
                    continue;
                }
                if group.classic.state() == State::Dead {
                    continue;
                }
                listed.push(ListedGroup {
                    group_id: id.clone(),
                    // "" for a group that only ever had commits (a simple group), as Kafka
                    // lists it.
                    protocol_type: group.classic.protocol_type.clone().unwrap_or_default(),
                    group_state: group.state_name().into(),
                    group_type: "classic".into(),
                    ..Default::default()
                });
            }
        }
        listed
    }

    /// KIP-848 ConsumerGroupHeartbeat on the owning shard: the state machine runs on the
    /// group, its records are written, and the answer goes out once they are durable (a failed
    /// write puts the group back as it was).
    pub(super) async fn consumer_heartbeat(
        shard: &Rc<Shard>,
        call: ConsumerHeartbeat,
    ) -> ConsumerHeartbeatReply {
        let ConsumerHeartbeat {
            partition,
            request,
            version,
            client_id,
            client_host,
        } = call;
        let coordinator = &shard.coordinator;
        let now = coordinator.now() as i64;
        let image = shard.image();
        let lookup = topic_lookup(&image);
        let config = &shard.config.groups.consumer;
        let context = consumer::RequestContext {
            api_version: version,
            client_id: &client_id,
            client_host: &client_host,
        };
        let group_id = request.group_id.clone();
        let outcome = coordinator.with_groups(partition, |groups, topic_id| {
            let fresh = !groups.contains_key(&group_id);
            let group = groups
                .entry(group_id.clone())
                .or_insert_with(|| Group::new(wall_ms()));
            if group.consumer().is_none() && group.classic.member_count() > 0 {
                return Err(Refused {
                    code: ErrorCode::GroupIdNotFound,
                    message: Some(format!("Group {group_id} is not a consumer group.")),
                });
            }
            let consumer = group
                .consumer
                .get_or_insert_with(|| ConsumerGroup::new(&group_id));
            let before = consumer.clone();
            let (reply, records) = consumer.heartbeat(&request, &context, now, &lookup, config);
            let exists = consumer.exists();
            if consumer.members().is_empty() {
                group.empty_since = wall_ms();
            } else {
                coordinator.live.notify(usize::MAX);
            }
            if !exists {
                group.consumer = None;
                if fresh {
                    groups.remove(&group_id);
                }
            }
            Ok((reply, records, before, topic_id))
        });
        let (reply, records, before, topic_id) = outcome.map_err(Refused::code)??;
        // A refusal may come with the records made before it: they are written all the same
        // (the state already replayed them).
        if let Err(code) = Self::append(shard, topic_id, partition, &records).await {
            let _ = coordinator.with_groups(partition, |groups, _| {
                if let Some(group) = groups.get_mut(&group_id) {
                    group.consumer = Some(before);
                }
            });
            return Err(Refused::code(code));
        }
        reply.map_err(Refused::from)
    }

    /// A classic JoinGroup for an empty consumer group turns it back into a classic group, as
    /// Kafka does: the consumer group's records are tombstoned first.
    pub(super) async fn retire_empty_consumer_group(
        shard: &Rc<Shard>,
        partition: i32,
        group_id: &str,
    ) -> Result<(), ErrorCode> {
        let plan = shard
            .coordinator
            .with_groups(partition, |groups, topic_id| {
                let consumer = groups.get(group_id).and_then(Group::consumer)?;
                if !consumer.members().is_empty() {
                    return None;
                }
                consumer
                    .delete_records()
                    .ok()
                    .map(|records| (topic_id, records))
            });
        let Ok(Some((topic_id, records))) = plan else {
            return Ok(());
        };
        Self::append(shard, topic_id, partition, &records).await?;
        let _ = shard.coordinator.with_groups(partition, |groups, _| {
            if let Some(group) = groups.get_mut(group_id) {
                group.consumer = None;
            }
        });
        Ok(())
    }

    pub(super) async fn persist_if_empty(shard: &Rc<Shard>, partition: i32, group_id: &str) {
        let empty = shard
            .coordinator
            .with_groups(partition, |groups, _| {
                groups
                    .get(group_id)
                    .is_some_and(|g| g.classic.state() == State::Empty)
            })
            .unwrap_or(false);
        if empty {
            Self::persist_group(shard, partition, group_id).await;
        }
    }
}
