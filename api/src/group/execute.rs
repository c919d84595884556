//! One group operation on the coordinator that owns its partition: the classic protocol's
//! calls, KIP-848 heartbeats, describes and lists, each persisted before it is answered.

use super::*;

impl Coordinator {
    /// Executes one group operation on this (the owning) shard.
    pub async fn execute(shard: &Rc<Shard>, partition: i32, op: GroupOp) -> GroupAnswer {
        let coordinator = &shard.coordinator;
        if partition >= 0 {
            Self::wait_known(shard, partition).await;
        }
        let now = coordinator.now();
        let config = &shard.config.groups;
        match op {
            GroupOp::Join { group_id, args } => {
                let member_id = args.member_id.clone();
                if let Err(code) =
                    Self::retire_empty_consumer_group(shard, partition, &group_id).await
                {
                    return GroupAnswer::Join(join_error(&member_id, code));
                }
                let step = coordinator.with_groups(partition, |groups, _| {
                    if groups
                        .get(&group_id)
                        .is_some_and(Group::has_consumer_members)
                    {
                        // Kafka refuses a classic member in a consumer group whose members do
                        // not speak its protocol (no classic members to share one with).
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
                let response = match step.and_then(|step| step) {
                    Err(code) => join_error(&member_id, code),
                    Ok(Step::Now(response)) => {
                        Self::persist_group(shard, partition, &group_id).await;
                        response
                    }
                    Ok(Step::Wait(receiver)) => receiver
                        .await
                        .unwrap_or_else(|_| join_error(&member_id, ErrorCode::RebalanceInProgress)),
                };
                GroupAnswer::Join(response)
            }
            GroupOp::Sync {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
                protocol_type,
                protocol_name,
                assignments,
            } => {
                let step = coordinator.with_groups(partition, |groups, topic_id| {
                    let Some(group) = groups.get_mut(&group_id) else {
                        return (Step::Now(sync_error(ErrorCode::UnknownMemberId)), None);
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
                    let persist = (group.classic.leader_synced() && group.classic.take_dirty())
                        .then(|| {
                            (
                                topic_id,
                                group.classic.generation,
                                Self::group_record(&group_id, group),
                            )
                        });
                    (step, persist)
                });
                let (step, persist) = match step {
                    Ok(parts) => parts,
                    Err(code) => return GroupAnswer::Sync(sync_error(code)),
                };
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
                let response = match step {
                    Step::Now(response) => response,
                    Step::Wait(receiver) => receiver
                        .await
                        .unwrap_or_else(|_| sync_error(ErrorCode::RebalanceInProgress)),
                };
                GroupAnswer::Sync(response)
            }
            GroupOp::Heartbeat {
                group_id,
                member_id,
                group_instance_id,
                generation_id,
            } => {
                let code = coordinator.with_groups(partition, |groups, _| {
                    match groups.get_mut(&group_id) {
                        Some(group) => group.classic.heartbeat(
                            &member_id,
                            group_instance_id.as_deref(),
                            generation_id,
                            now,
                        ),
                        None => ErrorCode::UnknownMemberId,
                    }
                });
                GroupAnswer::Code(code.unwrap_or_else(|code| code).code())
            }
            GroupOp::Leave(request) => {
                let members: Vec<(String, Option<String>)> = if request.members.is_empty() {
                    vec![(request.member_id.clone(), None)]
                } else {
                    request
                        .members
                        .iter()
                        .map(|m| (m.member_id.clone(), m.group_instance_id.clone()))
                        .collect()
                };
                let outcome = coordinator.with_groups(partition, |groups, _| {
                    let group = groups.get_mut(&request.group_id);
                    let mut responses = Vec::new();
                    match group {
                        Some(group) => {
                            for (member_id, instance) in &members {
                                let code = group.classic.leave(member_id, instance.as_deref(), now);
                                responses.push(MemberResponse {
                                    member_id: member_id.clone(),
                                    group_instance_id: instance.clone(),
                                    error_code: code.code(),
                                    ..Default::default()
                                });
                            }
                            if group.classic.member_count() == 0 {
                                group.empty_since = wall_ms();
                            }
                        }
                        None => {
                            for (member_id, instance) in &members {
                                responses.push(MemberResponse {
                                    member_id: member_id.clone(),
                                    group_instance_id: instance.clone(),
                                    error_code: ErrorCode::UnknownMemberId.code(),
                                    ..Default::default()
                                });
                            }
                        }
                    }
                    responses
                });
                let parts = match outcome {
                    Ok(members) => {
                        Self::persist_if_empty(shard, partition, &request.group_id).await;
                        LeaveGroupResponseParts {
                            error_code: 0,
                            members,
                        }
                    }
                    Err(code) => LeaveGroupResponseParts {
                        error_code: code.code(),
                        members: Vec::new(),
                    },
                };
                GroupAnswer::Leave(parts)
            }
            GroupOp::OffsetCommit { request, version } => GroupAnswer::OffsetCommit(
                Self::offset_commit(shard, partition, request, version).await,
            ),
            GroupOp::OffsetFetch {
                group_id,
                topics,
                member_id,
                member_epoch,
            } => {
                let checked = coordinator.with_groups(partition, |groups, _| {
                    let consumer = groups.get(&group_id).and_then(Group::consumer);
                    match consumer {
                        Some(c) => c.validate_offset_fetch(member_id.as_deref(), member_epoch),
                        None => Ok(()),
                    }
                });
                if let Ok(Err(code)) = checked {
                    return GroupAnswer::OffsetFetch {
                        error_code: code.code(),
                        topics: Vec::new(),
                    };
                }
                let answer = coordinator.with_groups(partition, |groups, _| {
                    let group = groups.get(&group_id);
                    let fetched = |topic: &str, p: i32| {
                        let committed = group.and_then(|g| g.offsets.get(&(topic.to_string(), p)));
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
                });
                match answer {
                    Ok(topics) => GroupAnswer::OffsetFetch {
                        error_code: 0,
                        topics,
                    },
                    Err(code) => GroupAnswer::OffsetFetch {
                        error_code: code.code(),
                        topics: Vec::new(),
                    },
                }
            }
            GroupOp::OffsetDelete(request) => {
                GroupAnswer::OffsetDelete(Self::offset_delete(shard, partition, request).await)
            }
            GroupOp::Describe { group_id } => {
                let described =
                    coordinator.with_groups(partition, |groups, _| match groups.get(&group_id) {
                        // Not a classic group: Kafka describes it as Dead (GROUP_ID_NOT_FOUND from
                        // DescribeGroups v6, which is not served).
                        Some(group) if group.consumer().is_some() => DescribedGroup {
                            error_code: 0,
                            group_id: group_id.clone(),
                            group_state: "Dead".into(),
                            ..Default::default()
                        },
                        Some(group) => describe(&group_id, group),
                        None => DescribedGroup {
                            error_code: 0,
                            group_id: group_id.clone(),
                            group_state: "Dead".into(),
                            ..Default::default()
                        },
                    });
                GroupAnswer::Describe(described.unwrap_or_else(|code| DescribedGroup {
                    error_code: code.code(),
                    group_id,
                    ..Default::default()
                }))
            }
            GroupOp::ConsumerHeartbeat {
                request,
                version,
                client_id,
                client_host,
            } => GroupAnswer::ConsumerHeartbeat(
                Self::consumer_heartbeat(
                    shard,
                    partition,
                    request,
                    version,
                    client_id,
                    client_host,
                )
                .await,
            ),
            GroupOp::ConsumerDescribe { group_id } => {
                let described = coordinator.with_groups(partition, |groups, _| {
                    let group = groups.get(&group_id);
                    match group.and_then(Group::consumer) {
                        Some(consumer) => consumer.describe(&config.consumer, i32::MIN),
                        None => {
                            let message = if group.is_some() {
                                format!("Group {group_id} is not a consumer group.")
                            } else {
                                format!("Group {group_id} not found.")
                            };
                            ConsumerDescribedGroup {
                                error_code: ErrorCode::GroupIdNotFound.code(),
                                error_message: Some(message),
                                group_id: group_id.clone(),
                                authorized_operations: i32::MIN,
                                ..Default::default()
                            }
                        }
                    }
                });
                GroupAnswer::ConsumerDescribe(described.unwrap_or_else(|code| {
                    ConsumerDescribedGroup {
                        error_code: code.code(),
                        group_id,
                        authorized_operations: i32::MIN,
                        ..Default::default()
                    }
                }))
            }
            GroupOp::Delete { group_id } => {
                GroupAnswer::Code(Self::delete_group(shard, partition, &group_id).await.code())
            }
            GroupOp::List => {
                let mut listed = Vec::new();
                for state in coordinator.partitions.borrow().values() {
                    if let PartitionState::Loaded { groups, .. } = state {
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
                                // "" for a group that only ever had commits (a simple
                                // group), as Kafka lists it.
                                protocol_type: group
                                    .classic
                                    .protocol_type
                                    .clone()
                                    .unwrap_or_default(),
                                group_state: group.state_name().into(),
                                group_type: "classic".into(),
                                ..Default::default()
                            });
                        }
                    }
                }
                GroupAnswer::List(listed)
            }
        }
    }

    /// KIP-848 ConsumerGroupHeartbeat on the owning shard: the state machine runs on the
    /// group, its records are written, and the answer goes out once they are durable (a failed
    /// write puts the group back as it was).
    pub(super) async fn consumer_heartbeat(
        shard: &Rc<Shard>,
        partition: i32,
        request: Box<ConsumerGroupHeartbeatRequest>,
        version: i16,
        client_id: String,
        client_host: String,
    ) -> ConsumerGroupHeartbeatResponse {
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
                return Err((
                    ErrorCode::GroupIdNotFound,
                    format!("Group {group_id} is not a consumer group."),
                ));
            }
            let consumer = group
                .consumer
                .get_or_insert_with(|| ConsumerGroup::new(&group_id));
            let before = consumer.clone();
            let (response, records) = consumer.heartbeat(&request, &context, now, &lookup, config);
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
            Ok((response, records, before, topic_id))
        });
        let error = |code: ErrorCode, message: Option<String>| ConsumerGroupHeartbeatResponse {
            error_code: code.code(),
            error_message: message,
            ..Default::default()
        };
        let (response, records, before, topic_id) = match outcome {
            Err(code) => return error(code, None),
            Ok(Err((code, message))) => return error(code, Some(message)),
            Ok(Ok(parts)) => parts,
        };
        if let Err(code) = Self::append(shard, topic_id, partition, &records).await {
            let _ = coordinator.with_groups(partition, |groups, _| {
                if let Some(group) = groups.get_mut(&group_id) {
                    group.consumer = Some(before);
                }
            });
            return error(code, None);
        }
        response
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
