//! Unit tests of the native producer: hand-encoded Produce requests against the generated
//! codec, and the config's property names.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use wire::generated::ProduceRequest;
use wire::primitives::Decodable;
use wire::record_batch::Compression;

use super::encode::{encode_produce, Piece};
use super::{Job, ProducerConfig};

fn job(topic: &str, partition: i32, body: &[u8]) -> Job {
    Job {
        topic: Arc::from(topic),
        partition,
        buf: body.to_vec(),
        finished: true,
        count: 1,
        base_timestamp: 0,
        max_timestamp: 0,
        callbacks: Vec::new(),
        bytes: 0,
        created: Instant::now(),
        retry_at: Instant::now(),
    }
}

#[test]
fn hand_encoded_produce_requests_decode_with_the_generated_codec() {
    let jobs = vec![
        job("alpha", 0, b"batch-a0"),
        job("alpha", 2, b"a2"),
        job("beta", 1, &[7u8; 300]),
    ];
    for version in 3..=11i16 {
        let (mut head, mut pieces) = (Vec::new(), Vec::new());
        encode_produce(&mut head, &mut pieces, version, 42, "cid", -1, 1234, &jobs);
        let mut frame = Vec::new();
        for p in &pieces {
            match *p {
                Piece::Head(a, b) => frame.extend_from_slice(&head[a..b]),
                Piece::Batch(i) => frame.extend_from_slice(&jobs[i].buf),
            }
        }
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(size, frame.len() - 4, "v{version}");
        let mut body = Bytes::from(frame[4..].to_vec());
        let hv = wire::generated::api::request_header_version(0, version);
        let header = wire::generated::RequestHeader::decode(&mut body, hv).unwrap();
        assert_eq!(
            (
                header.request_api_key,
                header.request_api_version,
                header.correlation_id
            ),
            (0, version, 42)
        );
        assert_eq!(header.client_id.as_deref(), Some("cid"));
        let req = ProduceRequest::decode(&mut body, version).unwrap();
        assert!(body.is_empty(), "v{version}: {} bytes left", body.len());
        assert_eq!(req.acks, -1);
        assert_eq!(req.timeout_ms, 1234);
        assert_eq!(req.transactional_id, None);
        assert_eq!(req.topic_data.len(), 2);
        assert_eq!(req.topic_data[0].name, "alpha");
        assert_eq!(req.topic_data[0].partition_data.len(), 2);
        assert_eq!(req.topic_data[0].partition_data[1].index, 2);
        assert_eq!(
            req.topic_data[0].partition_data[1].records.as_deref(),
            Some(&b"a2"[..])
        );
        assert_eq!(
            req.topic_data[1].partition_data[0].records.as_deref(),
            Some(&[7u8; 300][..])
        );
        let _ = BytesMut::new();
    }
}

#[test]
fn config_reads_kafka_and_librdkafka_names() {
    let props = vec![
        ("acks".to_string(), "1".to_string()),
        ("queue.buffering.max.ms".to_string(), "0".to_string()),
        ("compression.codec".to_string(), "lz4".to_string()),
        ("batch.size".to_string(), "65536".to_string()),
    ];
    let c = ProducerConfig::from_props(&props).unwrap();
    assert_eq!(c.acks, 1);
    assert_eq!(c.linger, Duration::ZERO);
    assert_eq!(c.compression, Compression::Lz4);
    assert_eq!(c.batch_size, 65536);
    let d = ProducerConfig::from_props(&[]).unwrap();
    assert_eq!((d.acks, d.batch_size, d.max_in_flight), (-1, 16384, 5));
    assert_eq!(d.linger, Duration::from_millis(5));
}
