//! The native client against the real broker binary: produce with keys to a
//! 3-partition topic (acks=all / 1 / 0, every compression codec), check that the delivery
//! reports are unique, dense per partition and keyed like the Java client, then consume
//! everything back with the native consumer and check counts, offsets and values.
//!
//! The broker binary is found as in `common/mod.rs` (`BROKER_BIN`, else the newer of
//! `target/{release,debug}/broker`, else built with `cargo build -p broker`).
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::collections::HashMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::broker_bin;

use bench::engine::{ConsumedRecord, DeliveryInfo, Props, SendError};
use bench::native::batch::partition_for_key;
use bench::native::MetaClient;

const PARTITIONS: i32 = 3;

struct Broker {
    child: Child,
    bootstrap: String,
    _dir: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_broker() -> Broker {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new(broker_bin())
        .arg("start")
        .args([
            "--override",
            &format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
        ])
        .args(["--override", &format!("log.dirs={}", dir.path().display())])
        .args(["--override", "num.shards=2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the broker");
    let broker = Broker {
        child,
        bootstrap: format!("127.0.0.1:{port}"),
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut meta = MetaClient::new(&broker.bootstrap, "native-test", Duration::from_secs(5));
        if meta.metadata(&[], false).is_ok() {
            return broker;
        }
        assert!(
            Instant::now() < deadline,
            "broker did not come up on {}",
            broker.bootstrap
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn create_topic(broker: &Broker, topic: &str) {
    MetaClient::new(&broker.bootstrap, "native-test", Duration::from_secs(30))
        .create_topic(topic, PARTITIONS, 1, &[])
        .unwrap_or_else(|e| panic!("creating {topic}: {e}"));
}

fn props(kv: &[(&str, &str)]) -> Props {
    kv.iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn key_of(i: usize) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

fn value_of(i: usize) -> Vec<u8> {
    let mut v = format!("value-{i:010}-").into_bytes();
    v.resize(100, b'x');
    v
}

type Reports = Arc<Mutex<Vec<(usize, Result<DeliveryInfo, String>)>>>;

/// Produces `n` keyed records; returns the delivery reports by record index.
fn produce(bootstrap: &str, topic: &str, n: usize, p: &Props) -> Vec<Result<DeliveryInfo, String>> {
    let mut producer = bench::engine::native::producer(bootstrap, p).expect("producer");
    let reports: Reports = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let started = Instant::now();
    for i in 0..n {
        let key = key_of(i);
        let value = value_of(i);
        loop {
            let sink = reports.clone();
            let cb =
                Box::new(move |r: Result<DeliveryInfo, String>| sink.lock().unwrap().push((i, r)));
            match producer.send(
                topic,
                None,
                Some(&key),
                &value,
                1_700_000_000_000 + i as i64,
                cb,
            ) {
                Ok(()) => break,
                Err(SendError::QueueFull) => producer.poll(Duration::from_millis(10)),
                Err(SendError::Other(e)) => panic!("send {i}: {e}"),
            }
        }
        if i % 1000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    let elapsed = started.elapsed();
    eprintln!(
        "{topic}: produced {n} records in {:?} ({:.0} rec/s)",
        elapsed,
        n as f64 / elapsed.as_secs_f64()
    );
    let mut got = std::mem::take(&mut *reports.lock().unwrap());
    assert_eq!(got.len(), n, "every callback ran exactly once");
    got.sort_by_key(|(i, _)| *i);
    got.into_iter()
        .enumerate()
        .map(|(k, (i, r))| {
            assert_eq!(k, i, "one callback per record");
            r
        })
        .collect()
}

/// Checks the reports: no error, keyed partitioning, offsets unique and dense from 0.
fn check_reports(reports: &[Result<DeliveryInfo, String>]) -> HashMap<(i32, i64), usize> {
    let mut by_offset = HashMap::new();
    let mut per_partition: HashMap<i32, Vec<i64>> = HashMap::new();
    for (i, r) in reports.iter().enumerate() {
        let info = r
            .as_ref()
            .unwrap_or_else(|e| panic!("record {i} failed: {e}"));
        assert_eq!(
            info.partition,
            partition_for_key(&key_of(i), PARTITIONS as usize),
            "record {i}"
        );
        assert!(
            by_offset.insert((info.partition, info.offset), i).is_none(),
            "duplicate {info:?}"
        );
        per_partition
            .entry(info.partition)
            .or_default()
            .push(info.offset);
    }
    for (p, mut offsets) in per_partition {
        offsets.sort_unstable();
        let dense: Vec<i64> = (0..offsets.len() as i64).collect();
        assert_eq!(offsets, dense, "partition {p} offsets are dense from 0");
    }
    by_offset
}

/// Consumes until `n` records came back; checks offsets are unique and dense and each
/// value prefix is the one produced there (when `expected` is given).
fn consume_and_check(
    bootstrap: &str,
    topic: &str,
    n: usize,
    expected: Option<&HashMap<(i32, i64), usize>>,
) {
    let mut consumer = bench::engine::native::consumer(bootstrap, &props(&[])).expect("consumer");
    let mut partitions = consumer.assign_all(topic).expect("assign_all");
    partitions.sort_unstable();
    assert_eq!(partitions, vec![0, 1, 2]);
    let mut out: Vec<ConsumedRecord> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} records consumed",
            out.len()
        );
        consumer
            .poll_into(&mut out, Duration::from_millis(200))
            .expect("poll_into");
    }
    // Nothing more than what was produced arrives.
    consumer
        .poll_into(&mut out, Duration::from_millis(300))
        .expect("poll_into");
    assert_eq!(out.len(), n);
    let mut next: HashMap<i32, i64> = HashMap::new();
    let mut seen_values = vec![false; n];
    for rec in &out {
        let want = next.entry(rec.partition).or_insert(0);
        assert_eq!(
            rec.offset, *want,
            "partition {} in order and dense",
            rec.partition
        );
        *want += 1;
        assert_eq!(rec.value_len, 100);
        let prefix = std::str::from_utf8(&rec.value_prefix).unwrap();
        let i: usize = prefix["value-".len()..].parse().unwrap();
        assert!(!seen_values[i], "record {i} consumed twice");
        seen_values[i] = true;
        assert_eq!(rec.key_len, key_of(i).len());
        assert_eq!(rec.value_prefix[..], value_of(i)[..16]);
        assert_eq!(rec.timestamp_ms, 1_700_000_000_000 + i as i64);
        assert_eq!(
            rec.partition,
            partition_for_key(&key_of(i), PARTITIONS as usize)
        );
        if let Some(expected) = expected {
            assert_eq!(
                expected.get(&(rec.partition, rec.offset)),
                Some(&i),
                "{}@{}",
                rec.partition,
                rec.offset
            );
        }
    }
    assert_eq!(next.values().sum::<i64>(), n as i64);
}

#[test]
fn acks_all_round_trip_50k_keyed_records() {
    let _turn = crate::common::turn(module_path!());
    let broker = start_broker();
    create_topic(&broker, "native-all");
    let reports = produce(
        &broker.bootstrap,
        "native-all",
        50_000,
        &props(&[("acks", "all")]),
    );
    let by_offset = check_reports(&reports);
    consume_and_check(&broker.bootstrap, "native-all", 50_000, Some(&by_offset));
}

#[test]
fn compressed_round_trips() {
    let _turn = crate::common::turn(module_path!());
    let broker = start_broker();
    for codec in ["gzip", "lz4", "zstd", "snappy"] {
        let topic = format!("native-{codec}");
        create_topic(&broker, &topic);
        let p = props(&[
            ("acks", "all"),
            ("compression.type", codec),
            ("linger.ms", "10"),
        ]);
        let reports = produce(&broker.bootstrap, &topic, 50_000, &p);
        let by_offset = check_reports(&reports);
        consume_and_check(&broker.bootstrap, &topic, 50_000, Some(&by_offset));
    }
}

#[test]
fn acks_one_and_zero() {
    let _turn = crate::common::turn(module_path!());
    let broker = start_broker();
    create_topic(&broker, "native-acks1");
    let reports = produce(
        &broker.bootstrap,
        "native-acks1",
        20_000,
        &props(&[("acks", "1"), ("batch.size", "65536")]),
    );
    let by_offset = check_reports(&reports);
    consume_and_check(&broker.bootstrap, "native-acks1", 20_000, Some(&by_offset));

    create_topic(&broker, "native-acks0");
    let reports = produce(
        &broker.bootstrap,
        "native-acks0",
        20_000,
        &props(&[("acks", "0")]),
    );
    for (i, r) in reports.iter().enumerate() {
        let info = r
            .as_ref()
            .unwrap_or_else(|e| panic!("record {i} failed: {e}"));
        assert_eq!(info.offset, -1, "acks=0 reports no offset");
        assert_eq!(
            info.partition,
            partition_for_key(&key_of(i), PARTITIONS as usize)
        );
    }
    consume_and_check(&broker.bootstrap, "native-acks0", 20_000, None);
}

#[test]
fn unkeyed_records_spread_per_batch_and_explicit_partitions_are_honoured() {
    let _turn = crate::common::turn(module_path!());
    let broker = start_broker();
    create_topic(&broker, "native-unkeyed");
    let mut producer = bench::engine::native::producer(
        &broker.bootstrap,
        &props(&[("batch.size", "2048"), ("linger.ms", "0")]),
    )
    .unwrap();
    let reports: Reports = Arc::new(Mutex::new(Vec::new()));
    for i in 0..3000usize {
        let sink = reports.clone();
        let partition = (i >= 2000).then_some(1);
        producer
            .send(
                "native-unkeyed",
                partition,
                None,
                &[b'u'; 50],
                -1,
                Box::new(move |r| sink.lock().unwrap().push((i, r))),
            )
            .map_err(|e| e.to_string())
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let got = reports.lock().unwrap();
    assert_eq!(got.len(), 3000);
    let mut counts = [0usize; 3];
    for (i, r) in got.iter() {
        let info = r.as_ref().unwrap();
        if *i >= 2000 {
            assert_eq!(info.partition, 1);
        } else {
            counts[info.partition as usize] += 1;
        }
    }
    assert!(
        counts.iter().all(|&c| c > 0),
        "round robin per batch reached every partition: {counts:?}"
    );
}

#[test]
fn unknown_partition_and_unreachable_broker_are_errors() {
    let _turn = crate::common::turn(module_path!());
    let broker = start_broker();
    create_topic(&broker, "native-errors");
    let mut producer = bench::engine::native::producer(&broker.bootstrap, &props(&[])).unwrap();
    let err = producer.send("native-errors", Some(7), None, b"x", -1, Box::new(|_| {}));
    assert!(matches!(err, Err(SendError::Other(_))));
    drop(broker);
    let port = free_port();
    assert!(bench::engine::native::producer(&format!("127.0.0.1:{port}"), &props(&[])).is_err());
    assert!(bench::engine::native::consumer(&format!("127.0.0.1:{port}"), &props(&[])).is_err());
}

/// linger.ms=0 at a fixed rate: records keep piling into the open batch while the
/// connection is busy, so the producer keeps up instead of queueing one-record batches.
#[test]
fn linger_zero_fixed_rate_keeps_up() {
    let _turn = crate::common::turn(module_path!());
    let broker = start_broker();
    let topic = "linger-zero-rate";
    create_topic(&broker, topic);
    let p = props(&[("acks", "1"), ("linger.ms", "0")]);
    let mut producer = bench::engine::native::producer(&broker.bootstrap, &p).expect("producer");
    let n = 20_000usize;
    let rate = 20_000.0;
    let reports: Reports = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let started = Instant::now();
    for i in 0..n {
        let due = started + Duration::from_secs_f64(i as f64 / rate);
        while Instant::now() < due {
            producer.poll(Duration::ZERO);
            std::thread::sleep(Duration::from_micros(50));
        }
        loop {
            let sink = reports.clone();
            let cb =
                Box::new(move |r: Result<DeliveryInfo, String>| sink.lock().unwrap().push((i, r)));
            match producer.send(topic, None, Some(&key_of(i)), &value_of(i), -1, cb) {
                Ok(()) => break,
                Err(SendError::QueueFull) => producer.poll(Duration::from_millis(10)),
                Err(SendError::Other(e)) => panic!("send {i}: {e}"),
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "fell behind: only {i} of {n} records sent in 10 s"
        );
    }
    producer.flush(Duration::from_secs(10)).expect("flush");
    let elapsed = started.elapsed();
    eprintln!("{topic}: {n} records in {elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(4),
        "{n} records at {rate}/s took {elapsed:?}"
    );
    let got = std::mem::take(&mut *reports.lock().unwrap());
    assert_eq!(got.len(), n, "every record delivered once");
    for (i, r) in &got {
        assert!(r.is_ok(), "record {i}: {r:?}");
    }
}

/// poll_into returns within (about) its timeout even while fetchers keep it fed.
#[test]
fn poll_into_returns_while_topic_is_fed() {
    let _turn = crate::common::turn(module_path!());
    let broker = start_broker();
    let topic = "poll-fed";
    create_topic(&broker, topic);
    // A backlog, plus a producer that keeps adding to it while we poll.
    produce(
        &broker.bootstrap,
        topic,
        100_000,
        &props(&[("acks", "1"), ("linger.ms", "5")]),
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let feeder = {
        let stop = stop.clone();
        let bootstrap = broker.bootstrap.clone();
        std::thread::spawn(move || {
            let p = props(&[("acks", "1"), ("linger.ms", "5")]);
            let mut producer = bench::engine::native::producer(&bootstrap, &p).expect("producer");
            let mut i = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match producer.send(topic, None, None, &value_of(i), -1, Box::new(|_| {})) {
                    Ok(()) => i += 1,
                    Err(SendError::QueueFull) => producer.poll(Duration::from_millis(1)),
                    Err(SendError::Other(e)) => panic!("send: {e}"),
                }
                if i.is_multiple_of(1000) {
                    producer.poll(Duration::ZERO);
                }
            }
            let _ = producer.flush(Duration::from_secs(10));
        })
    };
    let mut consumer =
        bench::engine::native::consumer(&broker.bootstrap, &props(&[])).expect("consumer");
    consumer.assign_all(topic).expect("assign_all");
    let mut total = 0usize;
    let test_start = Instant::now();
    let mut result = Ok(());
    while test_start.elapsed() < Duration::from_secs(3) {
        let mut out: Vec<ConsumedRecord> = Vec::new();
        let t = Instant::now();
        consumer
            .poll_into(&mut out, Duration::from_millis(100))
            .expect("poll_into");
        let took = t.elapsed();
        total += out.len();
        if took > Duration::from_millis(1500) {
            result = Err(format!(
                "poll_into(100 ms) took {took:?} ({} records)",
                out.len()
            ));
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    feeder.join().expect("feeder");
    result.unwrap();
    assert!(total > 0, "nothing consumed");
}
