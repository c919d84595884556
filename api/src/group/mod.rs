//! The group coordinator: consumer groups and their committed offsets.
//!
//! A group lives on the shard that owns its partition of `__consumer_offsets` (Kafka's rule:
//! `abs(groupId.hashCode) % offsets.topic.num.partitions`), so everything about one group is
//! touched by one thread and needs no lock; requests for it that arrive on another shard are
//! forwarded over the mesh like partition requests (`forward::Request::Group`).
//!
//! Every change that must survive a restart (a commit, a group's generation and assignment, a
//! deletion) is first appended to that partition as a record of Kafka's group-coordinator
//! schemas (`records.rs`), through the same produce path, validation and flush policy as any
//! partition (`flush.policy=ack`: fdatasynced before the answer); the in-memory state changes
//! after the append succeeds. When a shard opens one of its `__consumer_offsets` partitions
//! (start-up, or the topic's creation) it replays the partition from its start before serving
//! its groups; until then their requests get COORDINATOR_LOAD_IN_PROGRESS.

pub use groups::{assignor, classic, consumer, records};

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use wire::generated::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use wire::generated::leave_group_response::MemberResponse;
use wire::generated::list_groups_response::ListedGroup;
use wire::generated::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use wire::generated::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use wire::generated::{
    JoinGroupResponse, LeaveGroupRequest, OffsetCommitRequest, OffsetCommitResponse,
    OffsetDeleteRequest, OffsetDeleteResponse, SyncGroupResponse,
};
use wire::group_records::{GroupMetadataKey, OffsetCommitKey, OffsetCommitValue};
use wire::record_batch::{self, BatchBuilder, Compression};
use wire::ErrorCode;

use crate::metadata::records::TopicId;
use crate::shard::Shard;
use classic::{ClassicGroup, JoinArgs, State, Step};
use consumer::ConsumerGroup;
use records::GroupRecord;
use wire::generated::consumer_group_describe_response::DescribedGroup as ConsumerDescribedGroup;
use wire::generated::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

/// Kafka's internal topic of group state.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// How often a shard's coordinator looks for expired sessions and ended join phases while it
/// has live groups (an idle coordinator waits on an event and uses no CPU).
const TICK: Duration = Duration::from_millis(100);

/// How long a group request waits for its shard to learn of `__consumer_offsets` or of its
/// partition there (another shard adopted the image that created it first) before it is
/// answered as for a topic or partition this shard does not have.
const IMAGE_LAG_WAIT: Duration = Duration::from_millis(1000);

/// Set once a shard of this process learned it owns a `__consumer_offsets` partition
/// (`Coordinator::opening`): from then on a shard whose image has no such topic is only
/// behind, and a group request there waits for it rather than answering at once. One
/// broker per process; in tests that run several, one may wait `IMAGE_LAG_WAIT` for nothing.
static OFFSETS_TOPIC_KNOWN: AtomicBool = AtomicBool::new(false);

/// Bytes read per step when replaying a partition at load.
const LOAD_READ_BYTES: usize = 4 << 20;

/// Kafka's `Utils.abs(groupId.hashCode()) % partitions`, with Java's String.hashCode over
/// UTF-16 code units, so a group maps to the same partition as in Kafka.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    positive % partitions.max(1)
}

/// A committed offset.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
}

/// One group: its classic membership or its KIP-848 consumer group, and its committed
/// offsets. A group id is one kind or the other (Kafka's `Group.type()`).
pub struct Group {
    pub classic: ClassicGroup,
    /// The KIP-848 state; `Some` and existing makes this a consumer group.
    pub consumer: Option<ConsumerGroup>,
    pub offsets: BTreeMap<(String, i32), Committed>,
    /// Wall-clock ms since which the group has no members (offsets retention).
    pub empty_since: i64,
}

impl Group {
    fn new(now_wall: i64) -> Group {
        Group {
            classic: ClassicGroup::new(),
            consumer: None,
            offsets: BTreeMap::new(),
            empty_since: now_wall,
        }
    }

    fn state_name(&self) -> &'static str {
        self.classic.state().name()
    }

    /// The group's KIP-848 state when it is a consumer group.
    pub fn consumer(&self) -> Option<&ConsumerGroup> {
        self.consumer.as_ref().filter(|c| c.exists())
    }

    fn has_consumer_members(&self) -> bool {
        self.consumer().is_some_and(|c| !c.members().is_empty())
    }
}

/// Topic lookups for consumer-group subscriptions, from the shard's metadata image.
fn topic_lookup(
    image: &crate::metadata::image::Image,
) -> impl Fn(&str) -> Option<(TopicId, i32)> + '_ {
    move |name: &str| {
        image
            .topic(name)
            .map(|t| (t.topic_id, t.partitions.len() as i32))
    }
}

enum PartitionState {
    Loading,
    Loaded {
        topic_id: TopicId,
        groups: HashMap<String, Group>,
    },
}

/// One shard's coordinator: the groups of the `__consumer_offsets` partitions it owns.
pub struct Coordinator {
    partitions: RefCell<HashMap<i32, PartitionState>>,
    /// Woken when a group gains members, so the timer runs only while groups are live.
    live: event_listener::Event,
    /// Woken when this shard learns it owns a partition (`opening`).
    learned: event_listener::Event,
    epoch: Instant,
}

impl Coordinator {
    /// Calls `each(group, topic, partition, offset)` for every committed offset of the groups
    /// this shard coordinates (metrics snapshots).
    pub fn each_committed_offset(&self, mut each: impl FnMut(&str, &str, i32, i64)) {
        for state in self.partitions.borrow().values() {
            if let PartitionState::Loaded { groups, .. } = state {
                for (group_id, group) in groups {
                    for ((topic, partition), committed) in &group.offsets {
                        each(group_id, topic, *partition, committed.offset);
                    }
                }
            }
        }
    }
}

impl Default for Coordinator {
    fn default() -> Self {
        Coordinator {
            partitions: RefCell::new(HashMap::new()),
            live: event_listener::Event::new(),
            learned: event_listener::Event::new(),
            epoch: Instant::now(),
        }
    }
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Work for the coordinator of one group (sent to the shard owning its partition).
pub enum GroupOp {
    Join {
        group_id: String,
        args: JoinArgs,
    },
    Sync {
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
        protocol_type: Option<String>,
        protocol_name: Option<String>,
        assignments: Vec<(String, Bytes)>,
    },
    Heartbeat {
        group_id: String,
        member_id: String,
        group_instance_id: Option<String>,
        generation_id: i32,
    },
    Leave(LeaveGroupRequest),
    OffsetCommit {
        request: OffsetCommitRequest,
        version: i16,
    },
    OffsetFetch {
        group_id: String,
        /// `None`: every committed offset of the group.
        topics: Option<Vec<(String, Vec<i32>)>>,
        /// OffsetFetch v9+: the fetching member (id, epoch), checked for consumer groups.
        member_id: Option<String>,
        member_epoch: i32,
    },
    OffsetDelete(OffsetDeleteRequest),
    Describe {
        group_id: String,
    },
    /// KIP-848 ConsumerGroupHeartbeat.
    ConsumerHeartbeat {
        request: Box<ConsumerGroupHeartbeatRequest>,
        version: i16,
        client_id: String,
        client_host: String,
    },
    /// KIP-848 ConsumerGroupDescribe of one group.
    ConsumerDescribe {
        group_id: String,
    },
    Delete {
        group_id: String,
    },
    /// Every group of this shard's partitions (ListGroups goes to every shard).
    List,
}

/// Offsets of one group to expire: (partition, its topic id, group, (topic, partition)s).
type ExpiryPlan = (i32, TopicId, String, Vec<(String, i32)>);

/// Offsets of one topic as OffsetFetch answers them: (partition, offset, leader epoch,
/// metadata, error).
pub type FetchedTopic = (String, Vec<(i32, i64, i32, Option<String>, i16)>);

pub enum GroupAnswer {
    Join(JoinGroupResponse),
    Sync(SyncGroupResponse),
    Code(i16),
    Leave(LeaveGroupResponseParts),
    OffsetCommit(OffsetCommitResponse),
    OffsetFetch {
        error_code: i16,
        topics: Vec<FetchedTopic>,
    },
    OffsetDelete(OffsetDeleteResponse),
    Describe(DescribedGroup),
    List(Vec<ListedGroup>),
    ConsumerHeartbeat(ConsumerGroupHeartbeatResponse),
    ConsumerDescribe(ConsumerDescribedGroup),
}

pub struct LeaveGroupResponseParts {
    pub error_code: i16,
    pub members: Vec<MemberResponse>,
}

/// `locate`, but first, when this shard's image has no `__consumer_offsets` while another
/// shard already knows the topic (`OFFSETS_TOPIC_KNOWN`), waits (at most `IMAGE_LAG_WAIT`)
/// for this one to adopt it: another shard may have answered FindCoordinator before this
/// one learned of the topic, and librdkafka fails `committed()` on the
/// COORDINATOR_NOT_AVAILABLE it would get meanwhile. Without the topic anywhere the answer
/// comes at once, as before.
pub async fn locate_when_known(shard: &Shard, group_id: &str) -> Result<(usize, i32), ErrorCode> {
    if OFFSETS_TOPIC_KNOWN.load(Ordering::Relaxed) && shard.image().topic(OFFSETS_TOPIC).is_none() {
        let known = |image: &crate::metadata::image::Image| image.topic(OFFSETS_TOPIC).is_some();
        shard.wait_for_image(known, IMAGE_LAG_WAIT).await;
    }
    locate(shard, group_id)
}

/// Where a group's coordinator is: (owning shard, partition of `__consumer_offsets`).
pub fn locate(shard: &Shard, group_id: &str) -> Result<(usize, i32), ErrorCode> {
    let image = shard.image();
    let Some(topic) = image.topic(OFFSETS_TOPIC) else {
        return Err(ErrorCode::CoordinatorNotAvailable);
    };
    let count = topic.partitions.len() as i32;
    let partition = partition_for(group_id, count);
    let Some(owner) = topic.partition(partition) else {
        return Err(ErrorCode::CoordinatorNotAvailable);
    };
    Ok((shard.owner(owner), partition))
}

impl Coordinator {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Marks `partition` as this shard's from the moment it learns it owns it, before its log
    /// is opened: like Kafka's loading partitions (entered on election), its groups' requests
    /// get COORDINATOR_LOAD_IN_PROGRESS (retriable, same coordinator) until the load ends,
    /// not NOT_COORDINATOR (which sends clients to find another coordinator and fails
    /// librdkafka's `committed()`). Kept as it is if already there.
    pub fn opening(&self, partition: i32) {
        self.partitions
            .borrow_mut()
            .entry(partition)
            .or_insert(PartitionState::Loading);
        OFFSETS_TOPIC_KNOWN.store(true, Ordering::Relaxed);
        self.learned.notify(usize::MAX);
    }

    /// Routed here by a shard that already knows `partition` is this one's (it adopted the
    /// image that created it first): waits until this shard knows too, i.e. has marked it
    /// `opening` or adopted an image with it, at most `IMAGE_LAG_WAIT`.
    async fn wait_known(shard: &Shard, partition: i32) {
        if shard
            .coordinator
            .partitions
            .borrow()
            .contains_key(&partition)
        {
            return;
        }
        let deadline = Instant::now() + IMAGE_LAG_WAIT;
        loop {
            let learned = shard.coordinator.learned.listen();
            let in_image = shard
                .image()
                .topic(OFFSETS_TOPIC)
                .is_some_and(|topic| topic.partition(partition).is_some());
            if in_image
                || shard
                    .coordinator
                    .partitions
                    .borrow()
                    .contains_key(&partition)
            {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let timer = glommio::timer::sleep(left);
            futures::pin_mut!(timer);
            futures::future::select(learned, timer).await;
        }
    }

    /// The partition's log could not be opened: it is offline, not served here.
    pub fn open_failed(&self, partition: i32) {
        let mut partitions = self.partitions.borrow_mut();
        if matches!(partitions.get(&partition), Some(PartitionState::Loading)) {
            partitions.remove(&partition);
        }
    }

    /// Loads (replays) one of this shard's `__consumer_offsets` partitions. Called when the
    /// shard opens the partition's log.
    pub async fn load(shard: Rc<Shard>, topic_id: TopicId, partition: i32) {
        let coordinator = &shard.coordinator;
        coordinator
            .partitions
            .borrow_mut()
            .insert(partition, PartitionState::Loading);
        let started = Instant::now();
        let mut groups: HashMap<String, Group> = HashMap::new();
        let mut records = 0u64;
        if let Some(target) = shard.partition(&topic_id, partition) {
            let (mut offset, end) = {
                let log = target.log.borrow();
                (log.log_start_offset(), log.log_end_offset())
            };
            while offset < end {
                let read = target
                    .log
                    .borrow()
                    .read_bounded(offset, LOAD_READ_BYTES, end, true);
                let bytes = match read.await {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        tracing::error!(partition, %error, "reading __consumer_offsets at load failed");
                        break;
                    }
                };
                if bytes.is_empty() {
                    break;
                }
                for batch in record_batch::stored_batches(&bytes) {
                    let Ok((header, raw)) = batch else { break };
                    offset = header.next_offset();
                    let Ok(parsed) = record_batch::records(raw) else {
                        continue;
                    };
                    for record in parsed.iter() {
                        let Ok(record) = record else { break };
                        let Some(key) = record.key else { continue };
                        match GroupRecord::decode(key, record.value) {
                            Ok(Some(decoded)) => {
                                records += 1;
                                coordinator.replay(&mut groups, decoded);
                            }
                            Ok(None) => {}
                            Err(error) => {
                                tracing::warn!(partition, %error, "skipping an unreadable group record")
                            }
                        }
                    }
                }
            }
        }
        let group_count = groups.len();
        let now = coordinator.now() as i64;
        for group in groups.values_mut() {
            if let Some(consumer) = group.consumer.as_mut() {
                consumer.schedule_after_load(now, &shard.config.groups.consumer);
            }
        }
        let live = groups
            .values()
            .any(|g| g.classic.is_live() || g.has_consumer_members());
        coordinator
            .partitions
            .borrow_mut()
            .insert(partition, PartitionState::Loaded { topic_id, groups });
        if live {
            coordinator.live.notify(usize::MAX);
        }
        tracing::info!(
            shard = shard.id,
            partition,
            groups = group_count,
            records,
            ms = started.elapsed().as_millis() as u64,
            "loaded __consumer_offsets partition"
        );
    }

    fn replay(&self, groups: &mut HashMap<String, Group>, record: GroupRecord) {
        let now = self.now();
        match record {
            GroupRecord::OffsetCommit(key, value) => match value {
                Some(value) => {
                    let group = groups
                        .entry(key.group.clone())
                        .or_insert_with(|| Group::new(value.commit_timestamp));
                    group.offsets.insert(
                        (key.topic, key.partition),
                        Committed {
                            offset: value.offset,
                            leader_epoch: value.leader_epoch,
                            metadata: value.metadata,
                            commit_timestamp: value.commit_timestamp,
                        },
                    );
                }
                None => {
                    if let Some(group) = groups.get_mut(&key.group) {
                        group.offsets.remove(&(key.topic, key.partition));
                    }
                }
            },
            GroupRecord::GroupMetadata(key, value) => match value {
                Some(value) => {
                    let group = groups
                        .entry(key.group.clone())
                        .or_insert_with(|| Group::new(value.current_state_timestamp));
                    group.classic.replay(Some(&value), now);
                    if group.classic.member_count() == 0 {
                        group.empty_since = value.current_state_timestamp;
                    }
                }
                None => {
                    groups.remove(&key.group);
                }
            },
            record => {
                let Some(group_id) = consumer_record_group(&record) else {
                    return;
                };
                let group = groups
                    .entry(group_id.to_string())
                    .or_insert_with(|| Group::new(wall_ms()));
                let consumer = group
                    .consumer
                    .get_or_insert_with(|| ConsumerGroup::new(group_id));
                consumer.replay(&record);
                if consumer.is_deleted() {
                    group.consumer = None;
                    let unused = group.offsets.is_empty()
                        && group.classic.member_count() == 0
                        && group.classic.protocol_type.is_none();
                    if unused {
                        groups.remove(group_id);
                    }
                }
            }
        }
    }

    /// Runs `f` on the loaded group map of `partition`, or answers the partition's state.
    fn with_groups<R>(
        &self,
        partition: i32,
        f: impl FnOnce(&mut HashMap<String, Group>, TopicId) -> R,
    ) -> Result<R, ErrorCode> {
        let mut partitions = self.partitions.borrow_mut();
        match partitions.get_mut(&partition) {
            None => Err(ErrorCode::NotCoordinator),
            Some(PartitionState::Loading) => Err(ErrorCode::CoordinatorLoadInProgress),
            Some(PartitionState::Loaded { topic_id, groups }) => Ok(f(groups, *topic_id)),
        }
    }

    /// Appends group records to `partition` and waits for them as acks=all does.
    async fn append(
        shard: &Rc<Shard>,
        topic_id: TopicId,
        partition: i32,
        records: &[GroupRecord],
    ) -> Result<(), ErrorCode> {
        if records.is_empty() {
            return Ok(());
        }
        let now = wall_ms();
        let mut builder = BatchBuilder::new(Compression::None);
        for record in records {
            let (key, value) = record.encode().map_err(|error| {
                tracing::error!(%error, "cannot encode a group record");
                ErrorCode::UnknownServerError
            })?;
            builder = builder.push(Some(&key), value.as_deref(), &[], now);
        }
        let batch = builder.build();
        let result = crate::partition_ops::produce(shard, &topic_id, partition, -1, batch).await;
        match ErrorCode::from_code_or_unknown(result.error_code) {
            ErrorCode::None => Ok(()),
            ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => {
                Err(ErrorCode::InvalidCommitOffsetSize)
            }
            code => {
                tracing::warn!(?code, partition, "writing group records failed");
                Err(ErrorCode::CoordinatorNotAvailable)
            }
        }
    }

    fn group_record(group_id: &str, group: &Group) -> GroupRecord {
        GroupRecord::GroupMetadata(
            GroupMetadataKey {
                group: group_id.to_string(),
                ..Default::default()
            },
            Some(group.classic.to_record(wall_ms())),
        )
    }

    /// Persists a group whose membership changed in a way a restart must see.
    async fn persist_group(shard: &Rc<Shard>, partition: i32, group_id: &str) {
        let record = shard
            .coordinator
            .with_groups(partition, |groups, topic_id| {
                let group = groups.get_mut(group_id)?;
                group
                    .classic
                    .take_dirty()
                    .then(|| (topic_id, Self::group_record(group_id, group)))
            });
        if let Ok(Some((topic_id, record))) = record {
            if let Err(code) = Self::append(shard, topic_id, partition, &[record]).await {
                tracing::warn!(group = group_id, ?code, "persisting group state failed");
            }
        }
    }

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
    async fn consumer_heartbeat(
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
    async fn retire_empty_consumer_group(
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

    async fn persist_if_empty(shard: &Rc<Shard>, partition: i32, group_id: &str) {
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

    async fn offset_commit(
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
                    .validate_offset_commit(&request.member_id, generation, version, false),
                None if generation < 0 => Ok(()),
                None => Err(ErrorCode::IllegalGeneration),
                Some(group) => {
                    let classic = &group.classic;
                    match classic.state() {
                        State::Dead => Err(ErrorCode::CoordinatorNotAvailable),
                        State::Empty if generation < 0 => Ok(()),
                        State::CompletingRebalance => Err(ErrorCode::RebalanceInProgress),
                        _ if generation < 0 && request.member_id.is_empty() => {
                            // An admin commit to a group with members.
                            Err(ErrorCode::UnknownMemberId)
                        }
                        _ => {
                            if !classic.has_member(&request.member_id) {
                                Err(ErrorCode::UnknownMemberId)
                            } else if generation != classic.generation {
                                Err(ErrorCode::IllegalGeneration)
                            } else {
                                Ok(())
                            }
                        }
                    }
                }
            };
            (verdict, topic_id)
        });
        let topic_id = match checked {
            Err(code) | Ok((Err(code), _)) => return respond(&request, &|_, _| code),
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

    async fn offset_delete(
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
                let subscribed: Vec<String> = if group.classic.state() == State::Empty {
                    Vec::new()
                } else if group.classic.protocol_type.as_deref() == Some("consumer") {
                    group
                        .classic
                        .members()
                        .flat_map(|m| {
                            m.protocols
                                .first()
                                .map(|(_, metadata)| classic::subscribed_topics(metadata))
                                .unwrap_or_default()
                        })
                        .collect()
                } else {
                    return Err(ErrorCode::NonEmptyGroup);
                };
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

    async fn delete_group(shard: &Rc<Shard>, partition: i32, group_id: &str) -> ErrorCode {
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
                match group.classic.state() {
                    _ if group.consumer().is_some() => {}
                    State::Empty => {}
                    State::Dead => return Err(ErrorCode::GroupIdNotFound),
                    _ => return Err(ErrorCode::NonEmptyGroup),
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
        let (topic_id, records) = match plan {
            Err(code) | Ok(Err(code)) => return code,
            Ok(Ok(plan)) => plan,
        };
        if let Err(code) = Self::append(shard, topic_id, partition, &records).await {
            return code;
        }
        let _ = shard.coordinator.with_groups(partition, |groups, _| {
            if let Some(mut group) = groups.remove(group_id) {
                group.classic.mark_dead();
            }
        });
        ErrorCode::None
    }

    /// The coordinator's timer task: session expiry, join and sync deadlines, and offsets
    /// retention. Sleeps on an event while no group of this shard has members.
    pub async fn run_timer(shard: std::rc::Weak<Shard>) {
        let mut last_retention = Instant::now();
        loop {
            let (idle_wait, retention_every) = {
                let Some(shard) = shard.upgrade() else { return };
                let coordinator = &shard.coordinator;
                let every =
                    Duration::from_millis(shard.config.groups.offsets_retention_check_interval_ms);
                let wait = (!coordinator.has_live_groups()).then(|| coordinator.live.listen());
                (wait, every)
            };
            match idle_wait {
                None => glommio::timer::sleep(TICK).await,
                Some(listener) => {
                    futures::future::select(
                        listener,
                        Box::pin(glommio::timer::sleep(retention_every)),
                    )
                    .await;
                }
            }
            let Some(shard) = shard.upgrade() else { return };
            let coordinator = &shard.coordinator;
            let now = coordinator.now();
            let mut to_persist: Vec<(i32, String)> = Vec::new();
            let mut fenced: Vec<(i32, TopicId, Vec<GroupRecord>)> = Vec::new();
            let image = shard.image();
            let lookup = topic_lookup(&image);
            for (partition, state) in coordinator.partitions.borrow_mut().iter_mut() {
                if let PartitionState::Loaded { groups, topic_id } = state {
                    for group in groups.values_mut() {
                        let Some(consumer) = group.consumer.as_mut() else {
                            continue;
                        };
                        if consumer.next_deadline().is_some_and(|d| d <= now as i64) {
                            let records = consumer.expire(now as i64, &lookup);
                            if consumer.members().is_empty() {
                                group.empty_since = wall_ms();
                            }
                            if !records.is_empty() {
                                fenced.push((*partition, *topic_id, records));
                            }
                        }
                    }
                    for (id, group) in groups.iter_mut() {
                        if !group.classic.is_live() {
                            continue;
                        }
                        group.classic.tick(now);
                        if group.classic.state() == State::Empty {
                            group.empty_since = wall_ms();
                            to_persist.push((*partition, id.clone()));
                        }
                    }
                }
            }
            for (partition, id) in to_persist {
                Self::persist_if_empty(&shard, partition, &id).await;
            }
            for (partition, topic_id, records) in fenced {
                // The state already moved on (as Kafka's does before its write commits); a
                // failed write leaves the log behind it until the group's next change.
                if let Err(code) = Self::append(&shard, topic_id, partition, &records).await {
                    tracing::warn!(?code, partition, "writing consumer group expiry failed");
                }
            }
            if last_retention.elapsed() >= retention_every {
                last_retention = Instant::now();
                Self::expire_offsets(&shard).await;
            }
        }
    }

    fn has_live_groups(&self) -> bool {
        self.partitions.borrow().values().any(|state| match state {
            PartitionState::Loaded { groups, .. } => groups
                .values()
                .any(|g| g.classic.is_live() || g.has_consumer_members()),
            PartitionState::Loading => false,
        })
    }

    /// `offsets.retention.minutes`: the offsets of a group that has been empty that long
    /// (and were committed before then) are deleted, tombstones first.
    async fn expire_offsets(shard: &Rc<Shard>) {
        let retention = shard.config.groups.offsets_retention_ms;
        let now = wall_ms();
        let mut plans: Vec<ExpiryPlan> = Vec::new();
        for (partition, state) in shard.coordinator.partitions.borrow().iter() {
            if let PartitionState::Loaded { groups, topic_id } = state {
                for (id, group) in groups {
                    let busy =
                        group.classic.state() != State::Empty || group.has_consumer_members();
                    if busy || now - group.empty_since < retention {
                        continue;
                    }
                    let expired: Vec<(String, i32)> = group
                        .offsets
                        .iter()
                        .filter(|(_, c)| now - c.commit_timestamp >= retention)
                        .map(|(k, _)| k.clone())
                        .collect();
                    if !expired.is_empty() {
                        plans.push((*partition, *topic_id, id.clone(), expired));
                    }
                }
            }
        }
        for (partition, topic_id, group_id, expired) in plans {
            let records: Vec<GroupRecord> = expired
                .iter()
                .map(|(topic, p)| {
                    GroupRecord::OffsetCommit(
                        OffsetCommitKey {
                            group: group_id.clone(),
                            topic: topic.clone(),
                            partition: *p,
                            ..Default::default()
                        },
                        None,
                    )
                })
                .collect();
            if Self::append(shard, topic_id, partition, &records)
                .await
                .is_ok()
            {
                let _ = shard.coordinator.with_groups(partition, |groups, _| {
                    if let Some(group) = groups.get_mut(&group_id) {
                        for key in &expired {
                            group.offsets.remove(key);
                        }
                    }
                });
                tracing::info!(group = %group_id, offsets = expired.len(), "expired committed offsets");
            }
        }
    }
}

fn describe(group_id: &str, group: &Group) -> DescribedGroup {
    let classic = &group.classic;
    let stable = classic.state() == State::Stable;
    let protocol = classic.protocol_name.clone().unwrap_or_default();
    DescribedGroup {
        error_code: 0,
        group_id: group_id.to_string(),
        group_state: group.state_name().into(),
        protocol_type: classic.protocol_type.clone().unwrap_or_default(),
        protocol_data: if stable {
            protocol.clone()
        } else {
            String::new()
        },
        members: classic
            .members()
            .map(|m| DescribedGroupMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                member_metadata: if stable {
                    m.protocols
                        .iter()
                        .find(|(n, _)| *n == protocol)
                        .map(|(_, md)| md.clone())
                        .unwrap_or_default()
                } else {
                    Bytes::new()
                },
                member_assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
                ..Default::default()
            })
            .collect(),
        authorized_operations: i32::MIN,
        ..Default::default()
    }
}

/// An OffsetCommit answer naming every partition of the request with `code(i, j)`, the code
/// of partition `j` of topic `i` (indexes in the request).
pub fn offset_commit_response(
    request: &OffsetCommitRequest,
    code: &dyn Fn(usize, usize) -> ErrorCode,
) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: request
            .topics
            .iter()
            .enumerate()
            .map(|(i, t)| OffsetCommitResponseTopic {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(j, p)| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: code(i, j).code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn join_error(member_id: &str, code: ErrorCode) -> JoinGroupResponse {
    JoinGroupResponse {
        error_code: code.code(),
        generation_id: -1,
        member_id: member_id.to_string(),
        ..Default::default()
    }
}

fn sync_error(code: ErrorCode) -> SyncGroupResponse {
    SyncGroupResponse {
        error_code: code.code(),
        ..Default::default()
    }
}

/// The group a KIP-848 record belongs to.
fn consumer_record_group(record: &GroupRecord) -> Option<&str> {
    Some(match record {
        GroupRecord::ConsumerGroupMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupPartitionMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupMemberMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupTargetAssignmentMetadata(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupTargetAssignmentMember(k, _) => &k.group_id,
        GroupRecord::ConsumerGroupCurrentMemberAssignment(k, _) => &k.group_id,
        GroupRecord::OffsetCommit(..) | GroupRecord::GroupMetadata(..) => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_match_kafka() {
        // Java: Math.abs("my-group".hashCode()) % 50 etc., computed with Kafka's formula.
        assert_eq!(partition_for("", 50), 0);
        let h = "my-group"
            .chars()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
        assert_eq!(partition_for("my-group", 50), h.abs() % 50);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Kafka's Utils.abs gives 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        for g in ["a", "group-1", "ü-group", "𝄞"] {
            let p = partition_for(g, 7);
            assert!((0..7).contains(&p));
        }
    }
}
