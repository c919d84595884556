//! Unit tests of `bench latency-sweep`: the table, the JSON and the flags.

use super::*;
use crate::engine::{self, ClientKind};

fn report(points: Vec<Point>) -> SweepReport {
    SweepReport {
        title: "t".into(),
        date: "d".into(),
        machine: "m".into(),
        client: ClientKind::Native,
        record_size: 100,
        partitions: 1,
        connections: 1,
        duration_s: 1.0,
        single_record_requests: true,
        producer_props: vec![],
        targets: vec![TargetInfo {
            name: "ours".into(),
            kind: TargetKind::Ours,
            bootstrap: "127.0.0.1:1".into(),
            pid: Some(7),
            config: vec!["num.shards=2".into()],
        }],
        idle: vec![Idle {
            target: "ours".into(),
            seconds: 2.0,
            percent_of_core: 0.25,
        }],
        points,
        table: String::new(),
    }
}

fn measured() -> Point {
    Point {
        target: "ours".into(),
        mode: Some(SweepMode::Acks1),
        rate: 10_000.0,
        records: 30_000,
        elapsed_s: 3.0,
        achieved_rate: Some(9_999.6),
        p50_ms: Some(0.05),
        p99_ms: Some(0.1234),
        p99_9_ms: Some(1.5),
        max_ms: Some(3.0),
        broker_cpu_s: Some(0.3),
        broker_cpu_us_per_request: Some(10.04),
        broker_cpu_us_per_record: Some(10.04),
        broker_cores: Some(0.1),
        requests: Some(30_000),
        requests_per_s: Some(10_000.0),
        records_per_request: Some(1.0),
        ..Default::default()
    }
}

#[test]
fn table_rows_and_cells() {
    let skipped = Point {
        target: "null".into(),
        mode: Some(SweepMode::E2e),
        rate: 1000.0,
        skipped: true,
        note: "the null broker stores nothing | to consume".into(),
        ..Default::default()
    };
    let no_cpu = Point {
        broker_cpu_us_per_request: None,
        mode: Some(SweepMode::AcksAll),
        note: "2 records failed".into(),
        ..measured()
    };
    let text = markdown(&report(vec![measured(), skipped, no_cpu]));
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| ours") || l.starts_with("| null"))
        .collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert_eq!(
        rows[0],
        "| ours | acks=1 | 10000 | 10000 | 0.050 | 0.123 | 1.500 | 10.0 | 10.0 | 10000 | 1.00 |"
    );
    // Skipped: the reason in place of figures, no stray column separator.
    assert_eq!(rows[1].matches('|').count(), 12, "{}", rows[1]);
    assert!(rows[1].contains("stores nothing / to consume"));
    assert!(rows[2].contains("| acks=all |") && rows[2].contains("| n/a |"));
    assert_eq!(rows[3], "| ours | 0.25 | 2.0 |");
    assert!(text.contains("- ours acks=all at 10000/s: 2 records failed"));
    assert!(text.contains("keys: `num.shards=2`"));
    assert!(text.contains(HEADER));
    assert_eq!(cell(Some(f64::NAN), 1), "n/a");
}

#[test]
fn json_round_trips_with_nulls() {
    let r = report(vec![measured(), Point::default()]);
    let text = serde_json::to_string(&r).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["points"][0]["mode"], "acks1");
    assert_eq!(v["points"][0]["p99_ms"], 0.1234);
    assert!(v["points"][1]["p99_ms"].is_null());
    assert_eq!(v["targets"][0]["kind"], "ours");
    assert_eq!(v["idle"][0]["percent_of_core"], 0.25);
    let back: SweepReport = serde_json::from_str(&text).unwrap();
    assert_eq!(back.points, r.points);
}

#[test]
fn parses_flags() {
    assert_eq!(
        parse_variant("2shards:num.shards=2, flush.policy=ack").unwrap(),
        (
            "2shards".to_string(),
            vec!["num.shards=2".to_string(), "flush.policy=ack".to_string()]
        )
    );
    assert!(parse_variant("noval").is_err());
    assert!(parse_variant("x:novalue").is_err());
    assert_eq!(
        parse_other("tansu=127.0.0.1:19192").unwrap(),
        ("tansu".to_string(), "127.0.0.1:19192".to_string())
    );
    assert!(parse_other("tansu").is_err());
    let args = LatencySweepArgs {
        producer_props: vec!["acks=0".into()],
        ..Default::default()
    };
    let props = producer_props(&args, SweepMode::AcksAll).unwrap();
    assert_eq!(engine::get_prop(&props, "acks"), Some("0"));
    assert_eq!(engine::get_prop(&props, "batch.size"), Some("1"));
    let batched = LatencySweepArgs {
        batched: true,
        ..Default::default()
    };
    let props = producer_props(&batched, SweepMode::AcksAll).unwrap();
    assert_eq!(engine::get_prop(&props, "acks"), Some("all"));
    assert_eq!(engine::get_prop(&props, "batch.size"), None);
}
