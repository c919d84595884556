//! AlterPartition (API 56) over real sockets: three voters on loopback, each on its own
//! thread and executor; three brokers registered and a partition created through the active
//! controller; a raw AlterPartition v3 to the active controller's CONTROLLER listener shrinks
//! the ISR (the listener advertises it in ApiVersions), every voter's image shows it, a stale partition epoch is refused, and a voter
//! that is not active answers NOT_CONTROLLER.

#![allow(clippy::unwrap_used)]

use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use controller::{ClusterRole, Command, RuntimeConfig, Status, Voter};
use futures::channel::oneshot;
use glommio::channels::local_channel;
use glommio::net::TcpListener;
use kclient::conn::{connect_tcp, decode_response, encode_request, read_frame};
use metadata::cluster::ClusterLink;
use metadata::records::{BrokerRegistration, MetadataRecord};
use storage::Disk;
use wire::generated::alter_partition_request::{BrokerState, PartitionData, TopicData};
use wire::generated::api::ApiKey;
use wire::generated::{
    AlterPartitionRequest, AlterPartitionResponse, ApiVersionsRequest, ApiVersionsResponse,
};
use wire::primitives::Uuid;

const TICK: Duration = Duration::from_millis(50);
const ELECTION_TICKS: usize = 10;
const TOPIC: [u8; 16] = [7; 16];

#[derive(Default)]
struct Shared {
    status: Mutex<Option<Status>>,
    /// Batches of records to commit, taken by the voter when it leads.
    to_propose: Mutex<Vec<Vec<MetadataRecord>>>,
    stop: AtomicBool,
}

struct Running {
    shared: Arc<Shared>,
    thread: JoinHandle<()>,
}

fn free_addr() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn start(id: u64, voters: &[Voter], dir: std::path::PathBuf) -> Running {
    let shared = Arc::new(Shared::default());
    let config = RuntimeConfig {
        id,
        voters: voters.to_vec(),
        dir,
        tick: TICK,
        election_ticks: ELECTION_TICKS,
    };
    let addr = voters.iter().find(|v| v.id == id).unwrap().addr;
    let voter_map: BTreeMap<i32, SocketAddr> =
        voters.iter().map(|v| (v.id as i32, v.addr)).collect();
    let s = shared.clone();
    let thread = std::thread::spawn(move || {
        glommio::LocalExecutorBuilder::default()
            .make()
            .unwrap()
            .run(async move {
                let listener = loop {
                    match TcpListener::bind(addr) {
                        Ok(l) => break l,
                        Err(_) => glommio::timer::sleep(Duration::from_millis(20)).await,
                    }
                };
                let (link, proposals) = ClusterLink::new(id as i32, voter_map);
                let role = ClusterRole {
                    link,
                    proposals,
                    cluster_id: "c".into(),
                    // Long enough that no broker is fenced for silence during the test.
                    session_timeout_ms: 600_000,
                    elections: controller::ElectionConfig {
                        auto_rebalance: false,
                        ..Default::default()
                    },
                };
                let (commands, receiver) = local_channel::new_bounded(64);
                let stop = Rc::new(Cell::new(false));
                let driver = glommio::spawn_local(drive(commands, s.clone(), stop.clone()));
                controller::run(config, Disk::Real, listener, receiver, Some(role), stop)
                    .await
                    .unwrap();
                drop(driver);
            });
    });
    Running { shared, thread }
}

async fn drive(
    commands: local_channel::LocalSender<Command>,
    shared: Arc<Shared>,
    stop: Rc<Cell<bool>>,
) {
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            stop.set(true);
            return;
        }
        let (reply, answer) = oneshot::channel();
        if commands.send(Command::Status { reply }).await.is_err() {
            return;
        }
        let Ok(status) = answer.await else { return };
        let leads = status.leader == Some(status.id);
        *shared.status.lock().unwrap() = Some(status);
        if leads {
            let batches = std::mem::take(&mut *shared.to_propose.lock().unwrap());
            for records in batches {
                let (reply, answer) = oneshot::channel();
                let retry = records.clone();
                let sent = commands.send(Command::Propose { records, reply }).await;
                if sent.is_err() {
                    return;
                }
                if !matches!(answer.await, Ok(Ok(_))) {
                    shared.to_propose.lock().unwrap().push(retry);
                }
            }
        }
        glommio::timer::sleep(TICK).await;
    }
}

fn status(r: &Running) -> Option<Status> {
    r.shared.status.lock().unwrap().clone()
}

fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "{what} not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn agreed_leader(nodes: &[Running]) -> Option<u64> {
    let leaders: Vec<Option<u64>> = nodes
        .iter()
        .map(|r| status(r).and_then(|s| s.leader))
        .collect();
    let first = leaders[0]?;
    leaders.iter().all(|l| *l == Some(first)).then_some(first)
}

fn broker(id: i32) -> MetadataRecord {
    MetadataRecord::RegisterBroker(BrokerRegistration {
        broker_id: id,
        incarnation_id: [id as u8; 16],
        broker_epoch: 100 + i64::from(id),
        endpoints: vec![],
        rack: None,
        fenced: false,
        in_controlled_shutdown: false,
    })
}

/// Broker 1's AlterPartition v3 for partition 0 at `partition_epoch`.
fn request(partition_epoch: i32, isr: &[i32]) -> AlterPartitionRequest {
    AlterPartitionRequest {
        broker_id: 1,
        broker_epoch: 101,
        topics: vec![TopicData {
            topic_id: Uuid(TOPIC),
            partitions: vec![PartitionData {
                partition_index: 0,
                leader_epoch: 0,
                partition_epoch,
                new_isr_with_epochs: isr
                    .iter()
                    .map(|&b| BrokerState {
                        broker_id: b,
                        broker_epoch: 100 + i64::from(b),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn send(
    addr: SocketAddr,
    correlation_id: i32,
    body: &AlterPartitionRequest,
) -> AlterPartitionResponse {
    use std::io::Write;
    let mut stream = connect_tcp(&addr.to_string(), Duration::from_secs(5)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut out = BytesMut::new();
    encode_request(
        &mut out,
        ApiKey::AlterPartition,
        3,
        correlation_id,
        "t",
        body,
    )
    .unwrap();
    stream.write_all(&out).unwrap();
    let frame = read_frame(&mut stream, 1 << 20).unwrap();
    decode_response(frame, ApiKey::AlterPartition, 3, correlation_id).unwrap()
}

/// Partition 0's (ISR, partition epoch) in `r`'s image.
fn partition(r: &Running) -> Option<(Vec<i32>, i32)> {
    let s = status(r)?;
    let p = s.image.topic_by_id(&TOPIC)?.partition(0)?.clone();
    Some((p.isr, p.partition_epoch))
}

#[test]
fn alter_partition_commits_an_isr_change_on_every_voter() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let voters: Vec<Voter> = (1..=3)
        .map(|id| Voter {
            id,
            addr: free_addr(),
        })
        .collect();
    let nodes: Vec<Running> = (0..3)
        .map(|i| start(i as u64 + 1, &voters, dirs[i].path().to_path_buf()))
        .collect();
    wait_for(Duration::from_secs(30), "a leader", || {
        agreed_leader(&nodes).is_some()
    });
    let leader = agreed_leader(&nodes).unwrap();
    let active = &nodes[(leader - 1) as usize];
    active.shared.to_propose.lock().unwrap().push(vec![
        broker(1),
        broker(2),
        broker(3),
        MetadataRecord::Topic {
            name: "t".into(),
            topic_id: TOPIC,
        },
        MetadataRecord::Partition {
            topic_id: TOPIC,
            partition_id: 0,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2, 3],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            shard: 0,
        },
    ]);
    wait_for(Duration::from_secs(30), "the partition everywhere", || {
        nodes.iter().all(|r| partition(r).is_some())
    });

    // The listener advertises AlterPartition v0-3.
    {
        use std::io::Write;
        let addr = voters[(leader - 1) as usize].addr.to_string();
        let mut stream = connect_tcp(&addr, Duration::from_secs(5)).unwrap();
        let mut out = BytesMut::new();
        let body = ApiVersionsRequest::default();
        encode_request(&mut out, ApiKey::ApiVersions, 3, 9, "t", &body).unwrap();
        stream.write_all(&out).unwrap();
        let frame = read_frame(&mut stream, 1 << 20).unwrap();
        let versions: ApiVersionsResponse =
            decode_response(frame, ApiKey::ApiVersions, 3, 9).unwrap();
        let alter = versions.api_keys.iter().find(|k| k.api_key == 56).unwrap();
        assert_eq!((alter.min_version, alter.max_version), (0, 3));
    }

    let response = send(voters[(leader - 1) as usize].addr, 1, &request(0, &[1, 2]));
    assert_eq!(response.error_code, 0, "{response:?}");
    let p = &response.topics[0].partitions[0];
    assert_eq!(
        (
            p.error_code,
            p.leader_id,
            p.leader_epoch,
            p.partition_epoch,
            p.leader_recovery_state
        ),
        (0, 1, 0, 1, 0)
    );
    assert_eq!(p.isr, [1, 2]);
    assert_eq!(response.topics[0].topic_id, Uuid(TOPIC));
    // Answered once committed: every voter applies it.
    wait_for(Duration::from_secs(10), "the new ISR everywhere", || {
        nodes.iter().all(|r| partition(r) == Some((vec![1, 2], 1)))
    });

    // The old partition epoch again: INVALID_UPDATE_VERSION, nothing changes.
    let response = send(
        voters[(leader - 1) as usize].addr,
        2,
        &request(0, &[1, 2, 3]),
    );
    assert_eq!(response.error_code, 0);
    assert_eq!(response.topics[0].partitions[0].error_code, 95);

    // A voter that is not the active controller: NOT_CONTROLLER for the whole request.
    let follower = voters.iter().find(|v| v.id != leader).unwrap().addr;
    let response = send(follower, 3, &request(1, &[1, 2, 3]));
    assert_eq!(response.error_code, 41);
    assert!(response.topics.is_empty());

    // Expanding back at the current partition epoch works.
    let response = send(
        voters[(leader - 1) as usize].addr,
        4,
        &request(1, &[1, 2, 3]),
    );
    assert_eq!(response.topics[0].partitions[0].error_code, 0);
    wait_for(Duration::from_secs(10), "the ISR back everywhere", || {
        nodes
            .iter()
            .all(|r| partition(r) == Some((vec![1, 2, 3], 2)))
    });

    for r in nodes {
        r.shared.stop.store(true, Ordering::SeqCst);
        r.thread.join().unwrap();
    }
}
