//! Unit tests of `record_batch`: CRC vectors, round trips through every codec, corrupt and
//! random bytes, patching and the log cleaner's re-encoding.

use bytes::Bytes;
use proptest::prelude::*;

use super::*;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn sample(codec: Compression) -> Bytes {
    BatchBuilder::new(codec)
        .base_offset(42)
        .partition_leader_epoch(3)
        .push(
            Some(b"k0"),
            Some(b"v0"),
            &[("h", Some(b"x")), ("n", None)],
            1_000,
        )
        .push(None, Some(b"v1"), &[], 999)
        .push(Some(b""), None, &[], 1_010)
        .build()
}

#[test]
fn crc32c_test_vectors() {
    // The standard check value of CRC-32C (Castagnoli), and RFC 3720's vectors.
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8A91_36AA);
    assert_eq!(crc32c::crc32c(&[0xffu8; 32]), 0x62A8_AB43);
    let ascending: Vec<u8> = (0..32).collect();
    assert_eq!(crc32c::crc32c(&ascending), 0x46DD_794E);
}

#[test]
fn builder_round_trips_every_codec() {
    for codec in CODECS {
        let batch = sample(codec);
        let header = validate_batch(&batch).unwrap();
        assert_eq!(header.compression(), codec);
        assert_eq!(header.total_bytes(), batch.len());
        assert_eq!(
            (
                header.base_offset,
                header.last_offset(),
                header.records_count
            ),
            (42, 44, 3)
        );
        assert_eq!(
            (header.base_timestamp, header.max_timestamp),
            (1_000, 1_010)
        );
        assert_eq!(header.partition_leader_epoch, 3);
        assert_eq!(compute_crc(&batch), Some(header.crc));

        let records = records(&batch).unwrap();
        let got: Vec<Record<'_>> = records.iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[0].key, got[0].value, got[0].offset, got[0].timestamp),
            (Some(&b"k0"[..]), Some(&b"v0"[..]), 42, 1_000)
        );
        let headers: Vec<_> = got[0].headers.iter().collect();
        assert_eq!(
            headers,
            vec![
                Header {
                    key: b"h",
                    value: Some(b"x")
                },
                Header {
                    key: b"n",
                    value: None
                }
            ]
        );
        assert_eq!(
            (got[1].key, got[1].timestamp_delta, got[1].offset_delta),
            (None, -1, 1)
        );
        assert_eq!(
            (got[2].key, got[2].value, got[2].offset),
            (Some(&b""[..]), None, 44)
        );
        assert!(got[2].headers.is_empty());
        let owned = got[0].to_owned_record();
        assert_eq!(
            owned.headers,
            vec![
                ("h".to_owned(), Some(Bytes::from_static(b"x"))),
                ("n".to_owned(), None)
            ]
        );
    }
}

#[test]
fn uncompressed_records_borrow_from_the_batch() {
    let batch = sample(Compression::None);
    let records = records(&batch).unwrap();
    let key = records.iter().next().unwrap().unwrap().key.unwrap();
    let range = batch.as_ptr_range();
    assert!(
        range.contains(&key.as_ptr()),
        "key was copied instead of borrowed"
    );
}

#[test]
fn attributes_and_flags() {
    let batch = BatchBuilder::new(Compression::Lz4)
        .timestamp_type(TimestampType::LogAppendTime)
        .max_timestamp(5_000)
        .transactional(true)
        .control(true)
        .producer(7, 1, 100)
        .push(None, Some(b"x"), &[], 1)
        .build();
    let header = validate_batch(&batch).unwrap();
    assert_eq!(header.timestamp_type(), TimestampType::LogAppendTime);
    assert!(header.is_transactional() && header.is_control() && header.has_producer_id());
    assert_eq!(
        (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence
        ),
        (7, 1, 100)
    );
    // With LogAppendTime every record carries the batch's max timestamp.
    assert_eq!(
        records(&batch)
            .unwrap()
            .iter()
            .next()
            .unwrap()
            .unwrap()
            .timestamp,
        5_000
    );
}

#[test]
fn parse_errors() {
    let batch = sample(Compression::None).to_vec();
    assert_eq!(
        BatchHeader::parse(&batch[..11]),
        Err(BatchError::Truncated { need: 61, have: 11 })
    );
    assert_eq!(
        BatchHeader::parse(&batch[..batch.len() - 1]),
        Err(BatchError::Truncated {
            need: batch.len(),
            have: batch.len() - 1
        })
    );
    // The length alone (12..17 bytes) is checked before the magic is there.
    let mut short = batch.clone();
    short[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert_eq!(
        BatchHeader::parse(&short[..14]),
        Err(BatchError::BadLength(10))
    );
    assert_eq!(BatchHeader::parse(&short), Err(BatchError::BadLength(10)));
    let mut negative = batch.clone();
    negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert_eq!(
        BatchHeader::parse(&negative),
        Err(BatchError::BadLength(-5))
    );
    let mut v1 = batch.clone();
    v1[16] = 1;
    assert_eq!(BatchHeader::parse(&v1[..17]), Err(BatchError::BadMagic(1)));
    let mut codec = batch.clone();
    codec[22] |= 7;
    assert_eq!(
        BatchHeader::parse(&codec),
        Err(BatchError::UnknownCompression(7))
    );
    // Extra bytes after the batch are allowed.
    let mut longer = batch.clone();
    longer.extend_from_slice(&[1, 2, 3]);
    assert_eq!(validate_batch(&longer).unwrap().total_bytes(), batch.len());
}

#[test]
fn every_flipped_byte_after_the_prefix_fails_validation() {
    for codec in CODECS {
        let batch = sample(codec).to_vec();
        for at in CRC_AT..batch.len() {
            let mut corrupt = batch.clone();
            corrupt[at] ^= 0x40;
            let result = validate_batch(&corrupt);
            assert!(result.is_err(), "{codec:?}: flip at {at} accepted");
            if at >= CRC_START {
                assert!(
                    matches!(
                        result,
                        Err(BatchError::BadCrc { .. }) | Err(BatchError::UnknownCompression(_))
                    ),
                    "{result:?}"
                );
            }
        }
    }
}

#[test]
fn record_count_must_match_the_offset_range() {
    let fix_crc = |b: &mut Vec<u8>| {
        let crc = crc32c::crc32c(&b[CRC_START..]);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    };
    let batch = sample(Compression::None).to_vec();
    let mut wrong = batch.clone();
    wrong[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&2i32.to_be_bytes());
    fix_crc(&mut wrong);
    assert_eq!(
        validate_batch(&wrong),
        Err(BatchError::BadRecordCount {
            count: 2,
            last_offset_delta: 2
        })
    );
    // Consistent but empty: refused, as Kafka's LogValidator does.
    let empty = BatchBuilder::new(Compression::None).build();
    assert_eq!(
        validate_batch(&empty),
        Err(BatchError::BadRecordCount {
            count: 0,
            last_offset_delta: -1
        })
    );
    // Consistent but more records than the bytes could hold.
    let mut lying = batch.clone();
    lying[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&999i32.to_be_bytes());
    lying[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&1000i32.to_be_bytes());
    fix_crc(&mut lying);
    assert!(matches!(
        validate_batch(&lying),
        Err(BatchError::BadRecordCount { .. })
    ));
    // The record iterator catches a count that disagrees with the records.
    assert_eq!(
        records(&wrong).unwrap().iter().last(),
        Some(Err(BatchError::CorruptRecord(
            "bytes left after the last record"
        )))
    );
}

#[test]
fn batch_iter_reports_valid_prefix() {
    let a = sample(Compression::None);
    let b = sample(Compression::Zstd);
    let mut buf = a.to_vec();
    buf.extend_from_slice(&b);
    let whole = buf.len();
    // A torn write: half of a third batch.
    buf.extend_from_slice(&a[..30]);
    let mut iter = batches(&buf);
    assert_eq!(iter.next().unwrap().unwrap().1, &a[..]);
    assert_eq!(iter.next().unwrap().unwrap().1, &b[..]);
    assert_eq!(iter.valid_bytes(), whole);
    assert_eq!(
        iter.next(),
        Some(Err(BatchError::Truncated {
            need: a.len(),
            have: 30
        }))
    );
    assert_eq!(iter.next(), None);
    assert_eq!(iter.valid_bytes(), whole);
    assert_eq!(iter.remaining().len(), 30);

    let mut empty = batches(&[]);
    assert_eq!(empty.next(), None);
    assert_eq!(empty.valid_bytes(), 0);
}

#[test]
fn patching_keeps_the_crc_valid() {
    for codec in CODECS {
        let batch = sample(codec);
        let mut patched = batch.to_vec();
        patch_base_offset(&mut patched, 1 << 40);
        patch_partition_leader_epoch(&mut patched, 9);
        let header = validate_batch(&patched).unwrap();
        assert_eq!(
            (header.base_offset, header.partition_leader_epoch),
            (1 << 40, 9)
        );
        assert_eq!(
            records(&patched)
                .unwrap()
                .iter()
                .next()
                .unwrap()
                .unwrap()
                .offset,
            1 << 40
        );

        let prefix = patched_prefix(&batch, 1 << 40, 9);
        assert_eq!(&prefix[..], &patched[..16]);
        let mut joined = prefix.to_vec();
        joined.extend_from_slice(&batch[16..]);
        assert_eq!(joined, patched);
    }
    // Short slices are left alone rather than panicking (release builds only; the
    // debug assertion flags the caller bug).
    assert_eq!(patched_prefix(&[1, 2], 0, 0)[..2], [0, 0]);
}

#[test]
fn decompression_is_bounded() {
    let big = vec![b'a'; 1 << 20];
    let batch = BatchBuilder::new(Compression::Zstd)
        .push(None, Some(&big), &[], 0)
        .build();
    assert!(batch.len() < 1 << 12);
    assert!(matches!(
        records_with_limit(&batch, 1 << 16),
        Err(BatchError::Compression(_))
    ));
    assert!(records_with_limit(&batch, 2 << 20).is_ok());
}

#[test]
fn corrupt_records_are_errors() {
    // Hand-made record bodies inside an otherwise valid batch; each must yield an
    // error, not a panic or a bogus record.
    let bodies: [&[u8]; 7] = [
        // No record at all, for a count of 1.
        &[],
        // A negative record length.
        &[0x01],
        // A record length past the end of the batch.
        &[0x7f],
        // A record that ends before its header count.
        &[0x0a, 0, 0, 0, 0x01, 0x01],
        // A key length of -2.
        &[0x0c, 0, 0, 0, 0x03, 0x01, 0x00],
        // A header count of -2.
        &[0x0c, 0, 0, 0, 0x01, 0x01, 0x03],
        // A header whose key length is -1.
        &[0x14, 0, 0, 0, 0x01, 0x01, 0x02, 0x01, 0x00, 0x99, 0x99],
    ];
    for body in bodies {
        let mut batch = BatchBuilder::new(Compression::None)
            .push(None, None, &[], 0)
            .build()
            .to_vec();
        batch.truncate(BATCH_HEADER_BYTES);
        batch.extend_from_slice(body);
        let length = (batch.len() - LOG_OVERHEAD) as i32;
        batch[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        let records = records(&batch).unwrap();
        let mut iter = records.iter();
        assert!(
            matches!(iter.next(), Some(Err(BatchError::CorruptRecord(_)))),
            "{body:?}"
        );
        assert_eq!(iter.next(), None);
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = BatchHeader::parse(&buf);
        let _ = validate_batch(&buf);
        let mut iter = batches(&buf);
        for _ in iter.by_ref() {}
        prop_assert!(iter.valid_bytes() <= buf.len());
        if let Ok(records) = records_with_limit(&buf, 1 << 16) {
            for record in records.iter().flatten() {
                for _ in record.headers.iter() {}
            }
        }
    }

    #[test]
    fn random_record_bodies_never_panic(
        codec in 0u8..5,
        body in proptest::collection::vec(any::<u8>(), 0..300),
        count in -2i32..20,
    ) {
        // Random bytes behind a valid header reach the record decoder (and, for the
        // compressed codecs, the decompressors) instead of failing the header check.
        let codec = Compression::from_id(codec).unwrap();
        let mut batch = BatchBuilder::new(codec).push(None, None, &[], 0).build().to_vec();
        batch.truncate(BATCH_HEADER_BYTES);
        batch.extend_from_slice(&body);
        let length = (batch.len() - LOG_OVERHEAD) as i32;
        batch[BATCH_LENGTH_AT..BATCH_LENGTH_AT + 4].copy_from_slice(&length.to_be_bytes());
        batch[RECORDS_COUNT_AT..RECORDS_COUNT_AT + 4].copy_from_slice(&count.to_be_bytes());
        if let Ok(records) = records_with_limit(&batch, 1 << 16) {
            let mut yielded = 0;
            for record in records.iter() {
                yielded += 1;
                if let Ok(record) = record {
                    prop_assert!(record.headers.iter().count() == record.headers.len());
                }
            }
            prop_assert!(yielded <= count.max(0) as usize + 1);
        }
    }

    #[test]
    fn built_batches_round_trip(
        codec in 0u8..5,
        records_in in proptest::collection::vec(
            (
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..50)),
                proptest::collection::vec(("[a-z]{0,5}", proptest::option::of(proptest::collection::vec(any::<u8>(), 0..5))), 0..3),
                any::<i64>(),
            ),
            1..8,
        ),
    ) {
        let codec = Compression::from_id(codec).unwrap();
        let mut builder = BatchBuilder::new(codec);
        for (key, value, headers, ts) in &records_in {
            let headers: Vec<(&str, Option<&[u8]>)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect();
            builder = builder.push(key.as_deref(), value.as_deref(), &headers, *ts);
        }
        let batch = builder.build();
        let header = validate_batch(&batch).unwrap();
        prop_assert_eq!(header.records_count as usize, records_in.len());
        let records = records(&batch).unwrap();
        let got: Vec<_> = records.iter().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got.len(), records_in.len());
        for (record, (key, value, headers, ts)) in got.iter().zip(&records_in) {
            prop_assert_eq!(record.key, key.as_deref());
            prop_assert_eq!(record.value, value.as_deref());
            prop_assert_eq!(record.timestamp, *ts);
            let got_headers: Vec<_> = record.headers.iter().map(|h| (h.key_str().unwrap().to_owned(), h.value.map(<[u8]>::to_vec))).collect();
            prop_assert_eq!(&got_headers, headers);
        }
    }
}

#[test]
fn retained_records_keep_offsets_stamps_and_codec() {
    for codec in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let original = BatchBuilder::new(codec)
            .base_offset(100)
            .producer(9, 1, 40)
            .push(Some(b"a"), Some(b"1"), &[("h", Some(b"x"))], 1_000)
            .push(Some(b"b"), None, &[], 1_005)
            .push(Some(b"a"), Some(b"2"), &[], 1_009)
            .build();
        let h = validate_batch(&original).unwrap();
        let recs = records(&original).unwrap();
        let all: Vec<Record<'_>> = recs.iter().map(Result::unwrap).collect();
        let kept = [all[0], all[1]];
        let out = encode_retained(&h, &kept, Some(50_000)).unwrap();
        assert!(validate_batch(&out).is_err(), "2 records for 3 offsets");
        let oh = validate_stored_batch(&out).unwrap();
        assert_eq!(
            (
                oh.base_offset,
                oh.last_offset(),
                oh.records_count,
                oh.compression()
            ),
            (100, 102, 2, codec)
        );
        assert_eq!((oh.producer_id, oh.base_sequence), (9, 40));
        assert_eq!(
            (oh.delete_horizon_ms(), oh.max_timestamp),
            (Some(50_000), 1_009)
        );
        let back = records(&out).unwrap();
        let got: Vec<Record<'_>> = back.iter().map(Result::unwrap).collect();
        assert_eq!(got.len(), 2);
        for (g, w) in got.iter().zip(&kept) {
            assert_eq!(
                (g.offset, g.timestamp, g.key, g.value),
                (w.offset, w.timestamp, w.key, w.value)
            );
            assert_eq!(
                g.headers.iter().collect::<Vec<_>>(),
                w.headers.iter().collect::<Vec<_>>()
            );
        }
        let empty = encode_retained(&h, &[], None).unwrap();
        let eh = validate_stored_batch(&empty).unwrap();
        assert_eq!(
            (eh.records_count, eh.last_offset(), eh.delete_horizon_ms()),
            (0, 102, None)
        );
    }
}
