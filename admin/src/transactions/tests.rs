//! Unit tests of the transactions commands: tables, selection and argument rules.

use super::*;

use clap::Parser;
use wire::generated::metadata_response::{MetadataResponsePartition, MetadataResponseTopic};

fn producer(id: i64, start: i64, last_timestamp: i64) -> ProducerState {
    ProducerState {
        producer_id: id,
        producer_epoch: 3,
        last_sequence: 2,
        last_timestamp,
        coordinator_epoch: -1,
        current_txn_start_offset: start,
        ..Default::default()
    }
}

#[test]
fn tables_pad_each_column_to_its_widest_cell_then_a_tab() {
    let table = list_table(&[
        Listed {
            transactional_id: "a-rather-long-transactional-id".to_owned(),
            coordinator: 1,
            producer_id: 7,
            state: "Ongoing".to_owned(),
        },
        Listed {
            transactional_id: "t".to_owned(),
            coordinator: 12,
            producer_id: 1000,
            state: "CompleteCommit".to_owned(),
        },
    ]);
    assert_eq!(
        table.render(),
        "TransactionalId               \tCoordinator\tProducerId\tTransactionState\t\n\
         a-rather-long-transactional-id\t1          \t7         \tOngoing         \t\n\
         t                             \t12         \t1000      \tCompleteCommit  \t\n"
    );
    assert_eq!(
        table.json_lines()[1],
        json!({"TransactionalId": "t", "Coordinator": 12, "ProducerId": 1000,
               "TransactionState": "CompleteCommit"})
    );
    // No rows: the header alone, as Kafka prints it.
    assert_eq!(
        list_table(&[]).render(),
        "TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"
    );
}

#[test]
fn producers_without_an_open_transaction_print_none() {
    let table = producers_table(&[producer(5, -1, 100), producer(6, 0, 200)]);
    let text = table.render();
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split('\t').map(str::trim).collect())
        .collect();
    assert_eq!(lines[0][..6], PRODUCER_COLUMNS);
    assert_eq!(lines[1][..6], ["5", "3", "-1", "2", "100", "None"]);
    assert_eq!(lines[2][..6], ["6", "3", "-1", "2", "200", "0"]);
    assert_eq!(
        table.json_lines()[0]["CurrentTransactionStartOffset"],
        Value::Null
    );
}

#[test]
fn describe_shows_start_time_duration_and_partitions() {
    let mut d = Described {
        coordinator_id: 1,
        transactional_id: "tx".to_owned(),
        producer_id: 9,
        producer_epoch: 0,
        state: "Ongoing".to_owned(),
        transaction_timeout_ms: 60_000,
        transaction_start_time_ms: 1_000,
        topic_partitions: [("b".to_owned(), 0), ("a".to_owned(), 2)]
            .into_iter()
            .collect(),
    };
    let row = &describe_table(&d, 4_500).json_lines()[0];
    assert_eq!(row["CurrentTransactionStartTimeMs"], json!(1_000));
    assert_eq!(row["TransactionDurationMs"], json!(3_500));
    assert_eq!(row["TopicPartitions"], json!("a-2,b-0"));
    d.transaction_start_time_ms = -1;
    d.topic_partitions.clear();
    let text = describe_table(&d, 4_500).render();
    let cells: Vec<&str> = text
        .lines()
        .nth(1)
        .unwrap()
        .split('\t')
        .map(str::trim)
        .collect();
    assert_eq!(
        cells,
        ["1", "tx", "9", "0", "Ongoing", "60000", "None", "None", "", ""]
    );
}

#[test]
fn candidates_are_open_transactions_older_than_the_timeout() {
    let now = 100 * MS_PER_MINUTE;
    let timeout = 15 * MS_PER_MINUTE;
    let mut producers = BTreeMap::new();
    producers.insert(
        ("t".to_owned(), 0),
        vec![
            producer(1, 10, now - timeout - 1), // open and old: candidate
            producer(2, 10, now - timeout),     // exactly the timeout: not yet
            producer(3, -1, 0),                 // nothing open
            producer(4, 0, now - 60 * MS_PER_MINUTE), // open and old: candidate
        ],
    );
    let found: Vec<i64> = candidates(&producers, timeout, now)
        .iter()
        .map(|o| o.producer.producer_id)
        .collect();
    assert_eq!(found, [1, 4]);
}

#[test]
fn hanging_unless_the_coordinator_still_tracks_the_partition() {
    let open = |id: i64, partition: i32| OpenTransaction {
        topic: "t".to_owned(),
        partition,
        producer: producer(id, 0, 0),
    };
    let described = |id: i64, partitions: &[i32]| Described {
        producer_id: id,
        state: "Ongoing".to_owned(),
        topic_partitions: partitions.iter().map(|p| ("t".to_owned(), *p)).collect(),
        ..Default::default()
    };
    let candidates = vec![
        open(1, 0), // no transactional id for the producer: hanging
        open(2, 0), // coordinator forgot the id: hanging
        open(3, 0), // tracked on this partition: not hanging
        open(3, 1), // same producer, partition not in the transaction: hanging
        open(4, 0), // the id now belongs to another producer: hanging
    ];
    let ids: BTreeMap<i64, String> = [(2, "b"), (3, "c"), (4, "d")]
        .into_iter()
        .map(|(p, id)| (p, id.to_owned()))
        .collect();
    let descriptions: BTreeMap<String, Option<Described>> = [
        ("b".to_owned(), None),
        ("c".to_owned(), Some(described(3, &[0]))),
        ("d".to_owned(), Some(described(99, &[0]))),
    ]
    .into_iter()
    .collect();
    let hanging: Vec<(i64, i32)> = filter_hanging(candidates, &ids, &descriptions)
        .iter()
        .map(|o| (o.producer.producer_id, o.partition))
        .collect();
    assert_eq!(hanging, [(1, 0), (2, 0), (3, 1), (4, 0)]);
}

#[test]
fn hanging_rows_show_minutes_since_the_last_write() {
    let now = 40 * MS_PER_MINUTE + 59_999;
    let h = OpenTransaction {
        topic: "t".to_owned(),
        partition: 2,
        producer: producer(8, 17, 10 * MS_PER_MINUTE),
    };
    let row = &hanging_table(&[h], now).json_lines()[0];
    assert_eq!(row["Duration(min)"], json!(30));
    assert_eq!(row["StartOffset"], json!(17));
    assert_eq!(row["CoordinatorEpoch"], json!(-1));
}

#[test]
fn search_follows_replicas_of_the_broker_or_leaders() {
    let part = |index: i32, leader: i32, replicas: &[i32]| MetadataResponsePartition {
        partition_index: index,
        leader_id: leader,
        replica_nodes: replicas.to_vec(),
        ..Default::default()
    };
    let md = MetadataResponse {
        topics: vec![
            MetadataResponseTopic {
                name: Some("a".to_owned()),
                partitions: vec![part(0, 1, &[1, 2]), part(1, 2, &[2, 3])],
                ..Default::default()
            },
            MetadataResponseTopic {
                name: Some("b".to_owned()),
                partitions: vec![part(0, 3, &[3, 1])],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let search = |broker_id, topic: Option<&str>, partition| Search {
        broker_id,
        topic: topic.map(str::to_owned),
        partition,
        max_transaction_timeout_ms: 0,
    };
    let keys = |found: Vec<((String, i32), i32)>| -> Vec<(String, i32, i32)> {
        found.into_iter().map(|((t, p), n)| (t, p, n)).collect()
    };
    assert_eq!(
        keys(partitions_to_search(&md, &search(Some(1), None, None))),
        [("a".to_owned(), 0, 1), ("b".to_owned(), 0, 1)]
    );
    assert_eq!(
        keys(partitions_to_search(&md, &search(None, Some("a"), None))),
        [("a".to_owned(), 0, 1), ("a".to_owned(), 1, 2)]
    );
    assert_eq!(
        keys(partitions_to_search(
            &md,
            &search(Some(2), Some("a"), Some(1))
        )),
        [("a".to_owned(), 1, 2)]
    );
}

#[test]
fn abort_finds_the_producer_by_start_offset() {
    let mut p = producer(11, 40, 0);
    p.coordinator_epoch = -1;
    let producers = [producer(10, -1, 0), p, producer(12, 41, 0)];
    assert_eq!(
        marker_for_start_offset(&producers, 40),
        Some(AbortMarker {
            producer_id: 11,
            producer_epoch: 3,
            coordinator_epoch: 0,
        })
    );
    assert_eq!(marker_for_start_offset(&producers, -1), None);
    assert_eq!(marker_for_start_offset(&producers, 7), None);
}

#[derive(clap::Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    command: TransactionsCommand,
}

#[test]
fn abort_takes_a_start_offset_or_the_whole_producer() {
    let parse = |args: &[&str]| {
        let mut argv = vec!["t", "abort", "--bootstrap-server", "h:1", "--topic", "x"];
        argv.extend_from_slice(&["--partition", "0"]);
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).map(|c| c.command)
    };
    assert!(parse(&["--start-offset", "5"]).is_ok());
    let explicit = parse(&[
        "--producer-id",
        "4",
        "--producer-epoch",
        "1",
        "--coordinator-epoch",
        "-1",
    ]);
    let Ok(TransactionsCommand::Abort(args)) = explicit else {
        panic!("explicit form refused: {explicit:?}");
    };
    assert_eq!(args.coordinator_epoch, Some(-1));
    assert!(parse(&[]).is_err());
    assert!(parse(&["--producer-id", "4"]).is_err());
    assert!(parse(&["--start-offset", "5", "--producer-id", "4"]).is_err());
    // find-hanging needs a broker or a topic to bound its search.
    assert!(Cli::try_parse_from(["t", "find-hanging", "--bootstrap-server", "h:1"]).is_err());
}
