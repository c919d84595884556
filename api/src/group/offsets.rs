//! Committed offsets: OffsetCommit, OffsetDelete and DeleteGroups, each appended to
//! `__consumer_offsets` before the in-memory state changes.

use super::*;

/// OffsetCommit's code for a group that does not exist, with a generation given.
fn unknown_group_commit_error(version: i16) -> ErrorCode {
    if version >= 9 {
        ErrorCode::GroupIdNotFound
    } else {
        ErrorCode::IllegalGeneration
    }
}

/// A partition's code when the group refused the commit with `code`: an unknown topic or
/// partition is answered so first (Kafka's order).
fn member_error_or_unknown(code: ErrorCode, exists: bool) -> ErrorCode {
    if exists {
        code
    } else {
        ErrorCode::UnknownTopicOrPartition
    }
}

impl Coordinator {
    pub(super) async fn offset_commit(
        shard: &Rc<Shard>,
        partition: i32,
        request: OffsetCommitRequest,
        version: i16,
    ) -> OffsetCommitResponse {
        let coordinator = &shard.coordinator;
        let image = shard.image();
        let max_metadata = shard.config.groups.offset_metadata_max_bytes;
        let respond = offset_commit_response;
        let now_wall = wall_ms();
        // Validate the member (Kafka's ClassicGroup.validateOffsetCommit).
        let checked = coordinator.with_groups(partition, |groups, topic_id| {
            let group = groups.get(&request.group_id);
            let generation = request.generation_id_or_member_epoch;
            let verdict = match group {
                Some(group) if group.consumer().is_some() => group
                    .consumer()
                    .expect("checked")
                    .validate_offset_commit(&request.member_id, generation, version, false)
                    .map_err(GroupError::error_code),
                None if generation < 0 => Ok(()),
                // Kafka's `GroupMetadataManager.validateOffsetCommit`: no such group and a
                // generation given is GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION before.
                None => Err(unknown_group_commit_error(version)),
                Some(group) => group
                    .classic
                    .validate_offset_commit(&request.member_id, generation)
                    .map_err(GroupError::error_code),
            };
            (verdict, topic_id)
        });
        // Kafka's KafkaApis answers an unknown topic or partition before the coordinator
        // sees the request: those keep UNKNOWN_TOPIC_OR_PARTITION whatever the member's fate.
        let exists = |t: usize, p: usize| {
            let topic = &request.topics[t];
            image.topic(&topic.name).is_some_and(|image| {
                image
                    .partition(topic.partitions[p].partition_index)
                    .is_some()
            })
        };
        let topic_id = match checked {
            Err(code) | Ok((Err(code), _)) => {
                return respond(&request, &|t, p| {
                    member_error_or_unknown(code, exists(t, p))
                })
            }
            Ok((Ok(()), topic_id)) => topic_id,
        };
        let partition_error = |topic: &str, p: i32, metadata: Option<&String>| -> ErrorCode {
            if metadata.is_some_and(|m| m.len() > max_metadata) {
                return ErrorCode::OffsetMetadataTooLarge;
            }
            match image.topic(topic) {
                Some(t) if t.partition(p).is_some() => ErrorCode::None,
                _ => ErrorCode::UnknownTopicOrPartition,
            }
        };
        let mut records = Vec::new();
        let mut accepted: Vec<((String, i32), Committed)> = Vec::new();
        // Each partition's own verdict, in request order (the answer reuses it).
        let mut verdicts: Vec<Vec<ErrorCode>> = Vec::with_capacity(request.topics.len());
        for topic in &request.topics {
            let mut topic_verdicts = Vec::with_capacity(topic.partitions.len());
            for p in &topic.partitions {
                let verdict = partition_error(
                    &topic.name,
                    p.partition_index,
                    p.committed_metadata.as_ref(),
                );
                topic_verdicts.push(verdict);
                if verdict != ErrorCode::None {
                    continue;
                }
                let commit_timestamp = if version == 1 && p.commit_timestamp >= 0 {
                    p.commit_timestamp
                } else {
                    now_wall
                };
                let committed = Committed {
                    offset: p.committed_offset,
                    leader_epoch: p.committed_leader_epoch,
                    metadata: p.committed_metadata.clone().unwrap_or_default(),
                    commit_timestamp,
                };
                records.push(GroupRecord::OffsetCommit(
                    OffsetCommitKey {
                        group: request.group_id.clone(),
                        topic: topic.name.clone(),
                        partition: p.partition_index,
                        ..Default::default()
                    },
                    Some(OffsetCommitValue {
                        offset: committed.offset,
                        leader_epoch: committed.leader_epoch,
                        metadata: committed.metadata.clone(),
                        commit_timestamp,
                        ..Default::default()
                    }),
                ));
                accepted.push(((topic.name.clone(), p.partition_index), committed));
            }
            verdicts.push(topic_verdicts);
        }
        let written = Self::append(shard, topic_id, partition, &records).await;
        if written.is_ok() {
            let _ = coordinator.with_groups(partition, |groups, _| {
                let group = groups
                    .entry(request.group_id.clone())
                    .or_insert_with(|| Group::new(now_wall));
                for (key, committed) in accepted {
                    group.offsets.insert(key, committed);
                }
            });
        }
        respond(&request, &|i, j| match verdicts[i][j] {
            ErrorCode::None => written.err().unwrap_or(ErrorCode::None),
            code => code,
        })
    }

    pub(super) async fn offset_delete(
        shard: &Rc<Shard>,
        partition: i32,
        request: OffsetDeleteRequest,
    ) -> OffsetDeleteResponse {
        let plan = shard
            .coordinator
            .with_groups(partition, |groups, topic_id| {
                let Some(group) = groups.get(&request.group_id) else {
                    return Err(ErrorCode::GroupIdNotFound);
                };
                let subscribed = group.classic.offsets_in_use()?;
                Ok((topic_id, subscribed))
            });
        let (topic_id, subscribed) = match plan {
            Err(code) | Ok(Err(code)) => {
                return OffsetDeleteResponse {
                    error_code: code.code(),
                    ..Default::default()
                }
            }
            Ok(Ok(plan)) => plan,
        };
        let mut topics = Vec::new();
        let mut records = Vec::new();
        let mut deleted = Vec::new();
        for topic in &request.topics {
            let refused = subscribed.contains(&topic.name);
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    if !refused {
                        records.push(GroupRecord::OffsetCommit(
                            OffsetCommitKey {
                                group: request.group_id.clone(),
                                topic: topic.name.clone(),
                                partition: p.partition_index,
                                ..Default::default()
                            },
                            None,
                        ));
                        deleted.push((topic.name.clone(), p.partition_index));
                    }
                    OffsetDeleteResponsePartition {
                        partition_index: p.partition_index,
                        error_code: if refused {
                            ErrorCode::GroupSubscribedToTopic.code()
                        } else {
                            0
                        },
                        ..Default::default()
                    }
                })
                .collect();
            topics.push(OffsetDeleteResponseTopic {
                name: topic.name.clone(),
                partitions,
                ..Default::default()
            });
        }
        if let Err(code) = Self::append(shard, topic_id, partition, &records).await {
            return OffsetDeleteResponse {
                error_code: code.code(),
                ..Default::default()
            };
        }
        let _ = shard.coordinator.with_groups(partition, |groups, _| {
            if let Some(group) = groups.get_mut(&request.group_id) {
                for key in deleted {
                    group.offsets.remove(&key);
                }
            }
        });
        OffsetDeleteResponse {
            topics,
            ..Default::default()
        }
    }

    pub(super) async fn delete_group(
        shard: &Rc<Shard>,
        partition: i32,
        group_id: &str,
    ) -> Result<(), ErrorCode> {
        let plan = shard
            .coordinator
            .with_groups(partition, |groups, topic_id| {
                let Some(group) = groups.get(group_id) else {
                    return Err(ErrorCode::GroupIdNotFound);
                };
                let consumer_records = match group.consumer() {
                    Some(consumer) => consumer.delete_records()?,
                    None => Vec::new(),
                };
                if group.consumer().is_none() {
                    group.classic.validate_delete()?;
                }
                let mut records: Vec<GroupRecord> = group
                    .offsets
                    .keys()
                    .map(|(topic, p)| {
                        GroupRecord::OffsetCommit(
                            OffsetCommitKey {
                                group: group_id.to_string(),
                                topic: topic.clone(),
                                partition: *p,
                                ..Default::default()
                            },
                            None,
                        )
                    })
                    .collect();
                records.extend(consumer_records);
                records.push(GroupRecord::GroupMetadata(
                    GroupMetadataKey {
                        group: group_id.to_string(),
                        ..Default::default()
                    },
                    None,
                ));
                Ok((topic_id, records))
            });
        let (topic_id, records) = plan??;
        Self::append(shard, topic_id, partition, &records).await?;
        let _ = shard.coordinator.with_groups(partition, |groups, _| {
            if let Some(mut group) = groups.remove(group_id) {
                group.classic.mark_dead();
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod commit_order_tests {
    use super::*;

    #[test]
    fn an_unknown_partition_is_answered_before_the_groups_refusal() {
        let code = ErrorCode::UnknownMemberId;
        assert_eq!(member_error_or_unknown(code, true), code);
        assert_eq!(
            member_error_or_unknown(code, false),
            ErrorCode::UnknownTopicOrPartition
        );
        assert_eq!(unknown_group_commit_error(9), ErrorCode::GroupIdNotFound);
        assert_eq!(unknown_group_commit_error(8), ErrorCode::IllegalGeneration);
    }
}
