//! Differential tests of the generated codecs against the `kafka-protocol` crate (0.18.0).
//!
//! For every API (requests, responses and both headers) and every version both sides
//! support: build a random valid message of our types, encode it with ours, decode it with
//! kafka-protocol, re-encode with kafka-protocol and require identical bytes (and that
//! kafka-protocol consumed them all and sizes agree); then decode with ours and require the
//! original back.
//!
//! Not compared (kafka-protocol 0.18 has no such messages; Kafka 4.0 removed these
//! ZooKeeper-era inter-broker APIs from its schemas, ours still carry them):
//! ControlledShutdown (7), LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) and
//! ListClientMetricsResources (74, renamed ListConfigResources in kafka-protocol 0.18).
//!
//! Skipped because kafka-protocol 0.18's bundled schemas are a later revision of these
//! (KIP-932 share groups were "latestVersionUnstable" and changed in place):
//! * ShareAcknowledge, ShareFetch, ShareGroupDescribe, ShareGroupHeartbeat (requests and
//!   responses): ours are v0 only, kafka-protocol has v1 only, so no common version.
//! * ReadShareGroupStateSummaryResponse: its v0 in kafka-protocol has an extra
//!   `LeaderEpoch` int32 in each partition result that our v0 lacks (the request matches
//!   and is tested).
//!
//! Where version ranges differ, the intersection is tested and the difference printed
//! (run with `--nocapture` to see it).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

mod random;

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{
    Decodable as KDecodable, Encodable as KEncodable, Message as KMessage,
};
use rand::rngs::StdRng;
use rand::SeedableRng;
use random::Random;
use wire::primitives::{Decodable, Encodable, Message};

/// Random messages per (API, version).
const ROUNDS: usize = 100;

fn check<O, K>(name: &str, rng: &mut StdRng, notes: &mut Vec<String>) -> Result<usize, String>
where
    O: Decodable + Encodable + Message + Random + PartialEq + std::fmt::Debug,
    K: KDecodable + KEncodable + KMessage + std::fmt::Debug,
{
    let lo = O::MIN_VERSION.max(K::VERSIONS.min);
    let hi = O::MAX_VERSION.min(K::VERSIONS.max);
    if (O::MIN_VERSION, O::MAX_VERSION) != (K::VERSIONS.min, K::VERSIONS.max) {
        notes.push(format!(
            "{name}: ours {}-{}, kafka-protocol {}-{}: testing {lo}-{hi}",
            O::MIN_VERSION,
            O::MAX_VERSION,
            K::VERSIONS.min,
            K::VERSIONS.max
        ));
    }
    if lo > hi {
        return Err(format!("{name}: no common version"));
    }
    let mut checked = 0;
    for version in lo..=hi {
        for _ in 0..ROUNDS {
            let msg = O::random(rng, version);
            let ctx = || format!("{name} v{version}: {msg:?}");
            let mut buf = BytesMut::new();
            msg.encode(&mut buf, version)
                .map_err(|e| format!("{}: our encode failed: {e}", ctx()))?;
            if buf.len() != msg.encoded_len(version) {
                return Err(format!(
                    "{}: encoded_len {} != {}",
                    ctx(),
                    msg.encoded_len(version),
                    buf.len()
                ));
            }
            let bytes = buf.freeze();

            let mut theirs_in = bytes.clone();
            let theirs = K::decode(&mut theirs_in, version).map_err(|e| {
                format!("{}: kafka-protocol decode failed: {e:#}\n{bytes:?}", ctx())
            })?;
            if !theirs_in.is_empty() {
                return Err(format!(
                    "{}: kafka-protocol left {} bytes\n{bytes:?}",
                    ctx(),
                    theirs_in.len()
                ));
            }
            let mut again = BytesMut::new();
            theirs
                .encode(&mut again, version)
                .map_err(|e| format!("{}: kafka-protocol encode failed: {e:#}", ctx()))?;
            if again.freeze() != bytes {
                return Err(format!("{}: kafka-protocol re-encoded differently\nours:   {bytes:?}\ntheirs: {theirs:?}", ctx()));
            }
            match theirs.compute_size(version) {
                Ok(n) if n == bytes.len() => {}
                other => {
                    return Err(format!(
                        "{}: kafka-protocol size {other:?} != {}",
                        ctx(),
                        bytes.len()
                    ))
                }
            }

            let mut ours_in: Bytes = bytes.clone();
            let back = O::decode(&mut ours_in, version)
                .map_err(|e| format!("{}: our decode failed: {e}", ctx()))?;
            if !ours_in.is_empty() {
                return Err(format!(
                    "{}: our decode left {} bytes",
                    ctx(),
                    ours_in.len()
                ));
            }
            if back != msg {
                return Err(format!("{}: decoded back as {back:?}", ctx()));
            }
            checked += 1;
        }
    }
    Ok(checked)
}

macro_rules! differential {
    ($rng:expr, $notes:expr, $failures:expr, $total:expr; $($module:ident :: $ty:ident),* $(,)?) => {$(
        match check::<wire::generated::$module::$ty, kafka_protocol::messages::$module::$ty>(
            stringify!($ty), $rng, $notes,
        ) {
            Ok(n) => $total += n,
            Err(e) => $failures.push(e),
        }
    )*};
}

#[test]
fn differential_against_kafka_protocol() {
    let mut rng = StdRng::seed_from_u64(0x006b_6166_6b61);
    let mut notes = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut total = 0usize;
    differential!(&mut rng, &mut notes, failures, total;
        add_offsets_to_txn_request::AddOffsetsToTxnRequest,
        add_offsets_to_txn_response::AddOffsetsToTxnResponse,
        add_partitions_to_txn_request::AddPartitionsToTxnRequest,
        add_partitions_to_txn_response::AddPartitionsToTxnResponse,
        add_raft_voter_request::AddRaftVoterRequest,
        add_raft_voter_response::AddRaftVoterResponse,
        allocate_producer_ids_request::AllocateProducerIdsRequest,
        allocate_producer_ids_response::AllocateProducerIdsResponse,
        alter_client_quotas_request::AlterClientQuotasRequest,
        alter_client_quotas_response::AlterClientQuotasResponse,
        alter_configs_request::AlterConfigsRequest,
        alter_configs_response::AlterConfigsResponse,
        alter_partition_reassignments_request::AlterPartitionReassignmentsRequest,
        alter_partition_reassignments_response::AlterPartitionReassignmentsResponse,
        alter_partition_request::AlterPartitionRequest,
        alter_partition_response::AlterPartitionResponse,
        alter_replica_log_dirs_request::AlterReplicaLogDirsRequest,
        alter_replica_log_dirs_response::AlterReplicaLogDirsResponse,
        alter_user_scram_credentials_request::AlterUserScramCredentialsRequest,
        alter_user_scram_credentials_response::AlterUserScramCredentialsResponse,
        api_versions_request::ApiVersionsRequest,
        api_versions_response::ApiVersionsResponse,
        assign_replicas_to_dirs_request::AssignReplicasToDirsRequest,
        assign_replicas_to_dirs_response::AssignReplicasToDirsResponse,
        begin_quorum_epoch_request::BeginQuorumEpochRequest,
        begin_quorum_epoch_response::BeginQuorumEpochResponse,
        broker_heartbeat_request::BrokerHeartbeatRequest,
        broker_heartbeat_response::BrokerHeartbeatResponse,
        broker_registration_request::BrokerRegistrationRequest,
        broker_registration_response::BrokerRegistrationResponse,
        consumer_group_describe_request::ConsumerGroupDescribeRequest,
        consumer_group_describe_response::ConsumerGroupDescribeResponse,
        consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest,
        consumer_group_heartbeat_response::ConsumerGroupHeartbeatResponse,
        controller_registration_request::ControllerRegistrationRequest,
        controller_registration_response::ControllerRegistrationResponse,
        create_acls_request::CreateAclsRequest,
        create_acls_response::CreateAclsResponse,
        create_delegation_token_request::CreateDelegationTokenRequest,
        create_delegation_token_response::CreateDelegationTokenResponse,
        create_partitions_request::CreatePartitionsRequest,
        create_partitions_response::CreatePartitionsResponse,
        create_topics_request::CreateTopicsRequest,
        create_topics_response::CreateTopicsResponse,
        delete_acls_request::DeleteAclsRequest,
        delete_acls_response::DeleteAclsResponse,
        delete_groups_request::DeleteGroupsRequest,
        delete_groups_response::DeleteGroupsResponse,
        delete_records_request::DeleteRecordsRequest,
        delete_records_response::DeleteRecordsResponse,
        delete_share_group_state_request::DeleteShareGroupStateRequest,
        delete_share_group_state_response::DeleteShareGroupStateResponse,
        delete_topics_request::DeleteTopicsRequest,
        delete_topics_response::DeleteTopicsResponse,
        describe_acls_request::DescribeAclsRequest,
        describe_acls_response::DescribeAclsResponse,
        describe_client_quotas_request::DescribeClientQuotasRequest,
        describe_client_quotas_response::DescribeClientQuotasResponse,
        describe_cluster_request::DescribeClusterRequest,
        describe_cluster_response::DescribeClusterResponse,
        describe_configs_request::DescribeConfigsRequest,
        describe_configs_response::DescribeConfigsResponse,
        describe_delegation_token_request::DescribeDelegationTokenRequest,
        describe_delegation_token_response::DescribeDelegationTokenResponse,
        describe_groups_request::DescribeGroupsRequest,
        describe_groups_response::DescribeGroupsResponse,
        describe_log_dirs_request::DescribeLogDirsRequest,
        describe_log_dirs_response::DescribeLogDirsResponse,
        describe_producers_request::DescribeProducersRequest,
        describe_producers_response::DescribeProducersResponse,
        describe_quorum_request::DescribeQuorumRequest,
        describe_quorum_response::DescribeQuorumResponse,
        describe_topic_partitions_request::DescribeTopicPartitionsRequest,
        describe_topic_partitions_response::DescribeTopicPartitionsResponse,
        describe_transactions_request::DescribeTransactionsRequest,
        describe_transactions_response::DescribeTransactionsResponse,
        describe_user_scram_credentials_request::DescribeUserScramCredentialsRequest,
        describe_user_scram_credentials_response::DescribeUserScramCredentialsResponse,
        elect_leaders_request::ElectLeadersRequest,
        elect_leaders_response::ElectLeadersResponse,
        end_quorum_epoch_request::EndQuorumEpochRequest,
        end_quorum_epoch_response::EndQuorumEpochResponse,
        end_txn_request::EndTxnRequest,
        end_txn_response::EndTxnResponse,
        envelope_request::EnvelopeRequest,
        envelope_response::EnvelopeResponse,
        expire_delegation_token_request::ExpireDelegationTokenRequest,
        expire_delegation_token_response::ExpireDelegationTokenResponse,
        fetch_request::FetchRequest,
        fetch_response::FetchResponse,
        fetch_snapshot_request::FetchSnapshotRequest,
        fetch_snapshot_response::FetchSnapshotResponse,
        find_coordinator_request::FindCoordinatorRequest,
        find_coordinator_response::FindCoordinatorResponse,
        get_telemetry_subscriptions_request::GetTelemetrySubscriptionsRequest,
        get_telemetry_subscriptions_response::GetTelemetrySubscriptionsResponse,
        heartbeat_request::HeartbeatRequest,
        heartbeat_response::HeartbeatResponse,
        incremental_alter_configs_request::IncrementalAlterConfigsRequest,
        incremental_alter_configs_response::IncrementalAlterConfigsResponse,
        init_producer_id_request::InitProducerIdRequest,
        init_producer_id_response::InitProducerIdResponse,
        initialize_share_group_state_request::InitializeShareGroupStateRequest,
        initialize_share_group_state_response::InitializeShareGroupStateResponse,
        join_group_request::JoinGroupRequest,
        join_group_response::JoinGroupResponse,
        leave_group_request::LeaveGroupRequest,
        leave_group_response::LeaveGroupResponse,
        list_groups_request::ListGroupsRequest,
        list_groups_response::ListGroupsResponse,
        list_offsets_request::ListOffsetsRequest,
        list_offsets_response::ListOffsetsResponse,
        list_partition_reassignments_request::ListPartitionReassignmentsRequest,
        list_partition_reassignments_response::ListPartitionReassignmentsResponse,
        list_transactions_request::ListTransactionsRequest,
        list_transactions_response::ListTransactionsResponse,
        metadata_request::MetadataRequest,
        metadata_response::MetadataResponse,
        offset_commit_request::OffsetCommitRequest,
        offset_commit_response::OffsetCommitResponse,
        offset_delete_request::OffsetDeleteRequest,
        offset_delete_response::OffsetDeleteResponse,
        offset_fetch_request::OffsetFetchRequest,
        offset_fetch_response::OffsetFetchResponse,
        offset_for_leader_epoch_request::OffsetForLeaderEpochRequest,
        offset_for_leader_epoch_response::OffsetForLeaderEpochResponse,
        produce_request::ProduceRequest,
        produce_response::ProduceResponse,
        push_telemetry_request::PushTelemetryRequest,
        push_telemetry_response::PushTelemetryResponse,
        read_share_group_state_request::ReadShareGroupStateRequest,
        read_share_group_state_response::ReadShareGroupStateResponse,
        read_share_group_state_summary_request::ReadShareGroupStateSummaryRequest,
                remove_raft_voter_request::RemoveRaftVoterRequest,
        remove_raft_voter_response::RemoveRaftVoterResponse,
        renew_delegation_token_request::RenewDelegationTokenRequest,
        renew_delegation_token_response::RenewDelegationTokenResponse,
        request_header::RequestHeader,
        response_header::ResponseHeader,
        sasl_authenticate_request::SaslAuthenticateRequest,
        sasl_authenticate_response::SaslAuthenticateResponse,
        sasl_handshake_request::SaslHandshakeRequest,
        sasl_handshake_response::SaslHandshakeResponse,
                                                                        sync_group_request::SyncGroupRequest,
        sync_group_response::SyncGroupResponse,
        txn_offset_commit_request::TxnOffsetCommitRequest,
        txn_offset_commit_response::TxnOffsetCommitResponse,
        unregister_broker_request::UnregisterBrokerRequest,
        unregister_broker_response::UnregisterBrokerResponse,
        update_features_request::UpdateFeaturesRequest,
        update_features_response::UpdateFeaturesResponse,
        update_raft_voter_request::UpdateRaftVoterRequest,
        update_raft_voter_response::UpdateRaftVoterResponse,
        vote_request::VoteRequest,
        vote_response::VoteResponse,
        write_share_group_state_request::WriteShareGroupStateRequest,
        write_share_group_state_response::WriteShareGroupStateResponse,
        write_txn_markers_request::WriteTxnMarkersRequest,
        write_txn_markers_response::WriteTxnMarkersResponse
    );
    for note in &notes {
        println!("version range differs: {note}");
    }
    println!("{total} messages compared");
    assert!(
        failures.is_empty(),
        "{} failing:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// Header versions per API and version agree with kafka-protocol's (for the APIs and
/// versions it has; ControlledShutdown v0's request header v0 is checked in wire's unit tests).
#[test]
fn header_versions_match_kafka_protocol() {
    use kafka_protocol::messages::ApiKey as K;
    use wire::generated::api::{request_header_version, response_header_version, ApiKey};
    let mut compared = 0;
    for key in ApiKey::ALL {
        let Ok(theirs) = K::try_from(*key as i16) else {
            continue;
        };
        // Outside kafka-protocol's own range its answer means nothing: compare the intersection.
        let (lo, hi) = key.supported_range();
        let (lo, hi) = (
            lo.max(theirs.valid_versions().min),
            hi.min(theirs.valid_versions().max),
        );
        for v in lo..=hi {
            assert_eq!(
                request_header_version(*key as i16, v),
                theirs.request_header_version(v),
                "{key:?} v{v}"
            );
            assert_eq!(
                response_header_version(*key as i16, v),
                theirs.response_header_version(v),
                "{key:?} v{v}"
            );
            compared += 1;
        }
    }
    assert!(compared > 250, "{compared}");
}

/// Mutated valid messages (every message type, every version of ours): flipped bytes,
/// truncations and overwritten lengths must never panic, and whatever decodes must
/// re-encode to bytes that decode and encode the same again.
#[test]
fn mutated_messages_never_panic() {
    use rand::Rng;
    fn fuzz<O: Decodable + Encodable + Message + Random>(rng: &mut StdRng) -> usize {
        let mut decoded = 0;
        for version in O::MIN_VERSION..=O::MAX_VERSION {
            for _ in 0..20 {
                let msg = O::random(rng, version);
                let mut buf = BytesMut::new();
                msg.encode(&mut buf, version).unwrap();
                let mut bytes = buf.to_vec();
                if bytes.is_empty() {
                    continue;
                }
                match rng.gen_range(0..4) {
                    0 => bytes.truncate(rng.gen_range(0..bytes.len())),
                    1 => {
                        for _ in 0..rng.gen_range(1..4) {
                            let i = rng.gen_range(0..bytes.len());
                            bytes[i] ^= 1 << rng.gen_range(0..8);
                        }
                    }
                    2 => {
                        let i = rng.gen_range(0..bytes.len());
                        bytes[i] = *[0x00u8, 0x7f, 0x80, 0xff].get(rng.gen_range(0..4)).unwrap();
                    }
                    _ => {
                        let i = rng.gen_range(0..bytes.len());
                        let tail: Vec<u8> = bytes.split_off(i);
                        bytes.extend_from_slice(&[0x7f, 0xff, 0xff, 0x00]);
                        bytes.extend_from_slice(&tail);
                    }
                }
                let Ok(back) = O::decode(&mut Bytes::from(bytes), version) else {
                    continue;
                };
                decoded += 1;
                let mut once = BytesMut::new();
                back.encode(&mut once, version)
                    .expect("a decoded message encodes");
                assert_eq!(once.len(), back.encoded_len(version));
                let again =
                    O::decode(&mut once.clone().freeze(), version).expect("re-encoded decodes");
                let mut twice = BytesMut::new();
                again.encode(&mut twice, version).unwrap();
                assert_eq!(once, twice);
            }
        }
        decoded
    }
    let mut rng = StdRng::seed_from_u64(7);
    let mut decoded = 0;
    macro_rules! fuzz_one {
        ($module:ident :: $ty:ident) => {
            decoded += fuzz::<wire::generated::$module::$ty>(&mut rng);
        };
    }
    for_each_message!(fuzz_one);
    println!("{decoded} mutated messages decoded");
}
