//! Unit tests of the key tables, parsing, validation, description and alteration.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::keys::find;
use super::*;

fn ov(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults() {
    let c = load(None, &[]).unwrap();
    assert_eq!(c.node_id, 1);
    assert_eq!(
        c.listeners,
        vec![Listener {
            name: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 9092,
            protocol: SecurityProtocol::Plaintext,
        }]
    );
    assert_eq!(c.advertised_listeners, c.listeners);
    assert_eq!(c.data_dir(), Path::new("./data"));
    assert_eq!(c.num_partitions, 1);
    assert_eq!(c.default_replication_factor, 1);
    assert!(c.auto_create_topics_enable);
    assert_eq!(c.log_segment_bytes, 1 << 30);
    assert_eq!(c.log_roll_ms, 168 * 3_600_000);
    assert_eq!(c.log_retention_ms, 168 * 3_600_000);
    assert_eq!(c.log_retention_bytes, -1);
    assert_eq!(c.log_retention_check_interval_ms, 300_000);
    assert_eq!(c.log_fd_cache_size, 10_000);
    assert_eq!(c.log_flush_interval_messages, u64::MAX >> 1);
    assert_eq!(c.log_flush_interval_ms, None);
    assert_eq!(c.log_flush_policy, FlushPolicy::Ack);
    assert_eq!(c.message_max_bytes, 1048588);
    assert_eq!(c.num_shards, 0);
    assert!(c.cluster_id.is_none());
    let d = BrokerConfig::default();
    assert_eq!(d.node_id, 1);
}

#[test]
fn properties_syntax() {
    let text = "# comment\n! also comment\n  node.id = 7  \nlisteners: PLAINTEXT://:9093\n\
                log.dirs=/a/b,\\\n    /c/d\nlog.flush.policy replication\r\n\
                cluster.id=ab\\u0063\\\\x\nnum.io.threads=8\n# trailing \\\nnum.partitions=3\n";
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("server.properties");
    std::fs::write(&p, text).unwrap();
    let c = load(Some(&p), &["num.partitions=5".into(), "broker.id=9".into()]).unwrap();
    assert_eq!(c.node_id, 7, "node.id wins over broker.id");
    assert_eq!(c.listeners[0].host, "0.0.0.0");
    assert_eq!(c.listeners[0].port, 9093);
    assert_eq!(
        c.log_dirs,
        vec![PathBuf::from("/a/b"), PathBuf::from("/c/d")]
    );
    assert_eq!(c.log_flush_policy, FlushPolicy::Replication);
    assert_eq!(c.cluster_id.as_deref(), Some("abc\\x"));
    assert_eq!(c.num_partitions, 5, "override wins over file");
    assert_eq!(c.ignored, vec!["num.io.threads".to_string()]);
}

#[test]
fn retention_check_interval_is_a_real_key() {
    let c = load(None, &["log.retention.check.interval.ms=500".into()]).unwrap();
    assert_eq!(c.log_retention_check_interval_ms, 500);
    assert!(c.ignored.is_empty());
    assert!(load(None, &["log.retention.check.interval.ms=0".into()]).is_err());
    let c = load(None, &["log.fd.cache.size=64".into()]).unwrap();
    assert_eq!(c.log_fd_cache_size, 64);
    assert!(load(None, &["log.fd.cache.size=0".into()]).is_err());
    assert!(load(None, &["log.fd.cache.size=-5".into()]).is_err());
}

#[test]
fn aliases_and_units() {
    let c = load(
        None,
        &[
            "broker.id=4".into(),
            "log.dir=/x".into(),
            "log.roll.hours=1".into(),
            "log.retention.minutes=2".into(),
            "log.flush.interval.ms=50".into(),
        ],
    )
    .unwrap();
    assert_eq!(c.node_id, 4);
    assert_eq!(c.data_dir(), Path::new("/x"));
    assert_eq!(c.log_roll_ms, 3_600_000);
    assert_eq!(c.log_retention_ms, 120_000);
    assert_eq!(c.log_flush_interval_ms, Some(50));
    let c = load(
        None,
        &["log.retention.ms=-1".into(), "log.retention.hours=1".into()],
    )
    .unwrap();
    assert_eq!(c.log_retention_ms, -1);
}

#[test]
fn errors_name_the_key() {
    let e = load(None, &["no.such.key=1".into()]).unwrap_err();
    assert_eq!(e.key(), Some("no.such.key"));
    let e = load(None, &["log.segment.bytes=10".into()]).unwrap_err();
    assert_eq!(e.key(), Some("log.segment.bytes"));
    assert!(e.to_string().contains(">= 14"), "{e}");
    let e = load(None, &["num.partitions=abc".into()]).unwrap_err();
    assert!(e.to_string().contains("num.partitions"));
    let e = load(None, &["listeners=NOPE://:9093".into()]).unwrap_err();
    assert_eq!(e.key(), Some("listeners"));
    assert!(e.to_string().contains("NOPE"), "{e}");
    let e = load(None, &["advertised.listeners=PLAINTEXT://:9092".into()]).unwrap_err();
    assert_eq!(e.key(), Some("advertised.listeners"));
    assert!(matches!(
        load(None, &["novalue".into()]),
        Err(ConfigError::BadOverride(_))
    ));
    assert!(load(None, &["auto.create.topics.enable=yes".into()]).is_err());
    assert!(load(None, &["log.flush.policy=sometimes".into()]).is_err());
    assert!(load(None, &["num.shards=70000".into()]).is_err());
    assert!(matches!(
        load(Some(Path::new("/nonexistent/x")), &[]),
        Err(ConfigError::Io { .. })
    ));
}

#[test]
fn listeners_parse() {
    const MAP: &str = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT";
    let l = parse_listeners("listeners", "PLAINTEXT://[::1]:9092", MAP).unwrap();
    assert_eq!(l[0].host, "::1");
    assert_eq!(l[0].addr(), "[::1]:9092");
    assert!(parse_listeners("listeners", "PLAINTEXT://h:99999", MAP).is_err());
    assert!(parse_listeners("listeners", "PLAINTEXT://h:1,PLAINTEXT://h:2", MAP).is_err());
    assert!(parse_listeners("listeners", "PLAINTEXT://h:1,SSL://h:1", MAP).is_err());
    assert!(parse_listeners("listeners", "EXTERNAL://h:1", MAP).is_err());
    let sasl = parse_listeners("listeners", "SASL_SSL://h:1,sasl_plaintext://h:2", MAP).unwrap();
    assert_eq!(sasl[0].protocol, SecurityProtocol::SaslSsl);
    assert_eq!(sasl[1].protocol, SecurityProtocol::SaslPlaintext);
    assert!(sasl[0].protocol.is_tls() && sasl[0].protocol.is_sasl());
    assert!(parse_listeners("listeners", "", MAP).is_err());
    let l = parse_listeners("listeners", "PLAINTEXT://:9092,ssl://localhost:9093", MAP).unwrap();
    assert_eq!(l[1].name, "SSL");
    assert_eq!(l[1].protocol, SecurityProtocol::Ssl);
    let custom = parse_listeners("listeners", "EXTERNAL://h:1", "EXTERNAL:SSL").unwrap();
    assert_eq!(custom[0].protocol, SecurityProtocol::Ssl);
}

#[test]
fn listeners_side_by_side_with_advertised_per_name() {
    let c = load(
        None,
        &[
            "listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093".into(),
            "advertised.listeners=SSL://broker.example.com:19093".into(),
        ],
    )
    .unwrap();
    assert_eq!(c.listeners.len(), 2);
    assert_eq!(c.listeners[1].protocol, SecurityProtocol::Ssl);
    let ssl = c.advertised_for("SSL");
    assert_eq!((ssl.host.as_str(), ssl.port), ("broker.example.com", 19093));
    // Left out of advertised.listeners: its own address.
    assert_eq!(c.advertised_for("PLAINTEXT").port, 9092);
    let c = load(None, &["listeners=PLAINTEXT://h:1,SSL://h:2".into()]).unwrap();
    assert_eq!(c.advertised_for("SSL").port, 2);
    assert_eq!(c.advertised_for("PLAINTEXT").port, 1);
    let e = load(
        None,
        &[
            "listeners=PLAINTEXT://h:1".into(),
            "advertised.listeners=SSL://h:2".into(),
        ],
    )
    .unwrap_err();
    assert_eq!(e.key(), Some("advertised.listeners"));
    let c = load(
        None,
        &[
            "listeners=INTERNAL://h:1,EXTERNAL://h:2".into(),
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SSL".into(),
        ],
    )
    .unwrap();
    assert_eq!(c.listeners[1].protocol, SecurityProtocol::Ssl);
    let e = load(None, &["listener.security.protocol.map=A:TLS".into()]).unwrap_err();
    assert_eq!(e.key(), Some("listener.security.protocol.map"));
}

#[test]
fn ssl_keys() {
    let c = load(None, &[]).unwrap();
    assert_eq!(c.ssl.client_auth, ClientAuth::None);
    assert_eq!(
        c.ssl.enabled_protocols,
        vec![TlsVersion::Tls12, TlsVersion::Tls13]
    );
    assert!(c.ssl.ktls_enable);
    assert!(c.ssl.keystore_location.is_none());
    let c = load(
        None,
        &[
            "ssl.keystore.location=/k.pem".into(),
            "ssl.truststore.location=/t.pem".into(),
            "ssl.client.auth=required".into(),
            "ssl.enabled.protocols=TLSv1.3".into(),
            "ssl.cipher.suites=TLS_AES_128_GCM_SHA256".into(),
            "ssl.ktls.enable=false".into(),
        ],
    )
    .unwrap();
    assert_eq!(
        c.ssl.keystore_location.as_deref(),
        Some(Path::new("/k.pem"))
    );
    assert_eq!(
        c.ssl.truststore_location.as_deref(),
        Some(Path::new("/t.pem"))
    );
    assert_eq!(c.ssl.client_auth, ClientAuth::Required);
    assert_eq!(c.ssl.enabled_protocols, vec![TlsVersion::Tls13]);
    assert_eq!(
        c.ssl.cipher_suites,
        vec!["TLS_AES_128_GCM_SHA256".to_string()]
    );
    assert!(!c.ssl.ktls_enable);
    for bad in [
        "ssl.client.auth=sometimes",
        "ssl.enabled.protocols=TLSv1.1",
        "ssl.keystore.type=JKS",
        "ssl.truststore.type=PKCS12",
        "ssl.ktls.enable=maybe",
    ] {
        let e = load(None, &[bad.into()]).unwrap_err();
        assert_eq!(Some(bad.split('=').next().unwrap()), e.key(), "{bad}");
    }
    // Kafka keys that mean nothing with PEM files load (ignored).
    let c = load(None, &["ssl.protocol=TLSv1.3".into()]).unwrap();
    assert_eq!(c.ignored, vec!["ssl.protocol".to_string()]);
}

#[test]
fn topic_resolve_precedence() {
    let b = load(
        None,
        &["log.segment.bytes=1000".into(), "log.roll.hours=2".into()],
    )
    .unwrap();
    let t = resolve(
        &b,
        &ov(&[("retention.ms", "5000"), ("flush.policy", "replication")]),
    )
    .unwrap();
    assert_eq!(t.segment_bytes, 1000);
    assert_eq!(t.segment_ms, 7_200_000);
    assert_eq!(t.retention_ms, 5000);
    assert_eq!(t.flush_policy, FlushPolicy::Replication);
    assert_eq!(t.flush_ms, i64::MAX as u64);
    assert_eq!(t.max_message_bytes, 1048588);
    assert_eq!(
        t.cleanup_policy,
        CleanupPolicy {
            delete: true,
            compact: false
        }
    );
    assert_eq!(t.min_insync_replicas, 1);

    let d = describe_topic(&b, &ov(&[("retention.ms", "5000")]));
    assert_eq!(d.len(), TOPIC_KEYS.len());
    let e = |n: &str| d.iter().find(|e| e.name == n).unwrap().clone();
    assert_eq!(e("retention.ms").source, ConfigSource::DynamicTopic);
    assert_eq!(e("segment.bytes").source, ConfigSource::StaticBroker);
    assert_eq!(e("segment.bytes").value.as_deref(), Some("1000"));
    assert_eq!(e("segment.ms").source, ConfigSource::StaticBroker);
    assert_eq!(e("retention.bytes").source, ConfigSource::Default);
    assert_eq!(e("segment.bytes").config_type, ConfigType::Int);
    assert_eq!(e("retention.ms").value.as_deref(), Some("5000"));
}

#[test]
fn topic_defaults_match_kafka() {
    // With a default broker, every topic value equals the table's Kafka default.
    let b = BrokerConfig::default();
    for e in describe_topic(&b, &BTreeMap::new()) {
        let s = find(TOPIC_KEYS, &e.name).unwrap();
        assert_eq!(e.value.as_deref(), s.default, "{}", e.name);
        assert_eq!(e.source, ConfigSource::Default);
    }
    resolve(&b, &BTreeMap::new()).unwrap();
}

#[test]
fn topic_validation() {
    assert!(validate_topic_overrides(&ov(&[
        ("segment.bytes", "100"),
        ("cleanup.policy", "compact,delete")
    ]))
    .is_ok());
    let e = validate_topic_overrides(&ov(&[("bogus", "1")])).unwrap_err();
    assert!(matches!(e, ConfigError::UnknownKey { .. }));
    assert!(validate_topic_overrides(&ov(&[("segment.bytes", "1")])).is_err());
    assert!(validate_topic_overrides(&ov(&[("compression.type", "brotli")])).is_err());
    assert!(validate_topic_overrides(&ov(&[("cleanup.policy", "")])).is_err());
    assert!(validate_topic_overrides(&ov(&[("max.message.bytes", "99999999999")])).is_err());
    assert!(resolve(
        &BrokerConfig::default(),
        &ov(&[("min.insync.replicas", "0")])
    )
    .is_err());
}

#[test]
fn describe_broker_sources() {
    let b = load(None, &["num.partitions=3".into()]).unwrap();
    let d = describe_broker(&b);
    assert_eq!(d.len(), BROKER_KEYS.len());
    let np = d.iter().find(|e| e.name == "num.partitions").unwrap();
    assert_eq!(
        (np.value.as_deref(), np.source, np.read_only),
        (Some("3"), ConfigSource::StaticBroker, true)
    );
    let l = d.iter().find(|e| e.name == "listeners").unwrap();
    assert_eq!(l.source, ConfigSource::Default);
    assert_eq!(l.value.as_deref(), Some("PLAINTEXT://127.0.0.1:9092"));
}

#[test]
fn every_row_is_well_formed() {
    for table in [BROKER_KEYS, TOPIC_KEYS] {
        for (i, spec) in table.iter().enumerate() {
            assert!(
                !table[..i].iter().any(|s| s.name == spec.name),
                "{} listed twice",
                spec.name
            );
            assert!(!spec.doc.is_empty(), "{} has no documentation", spec.name);
            if let Some(default) = spec.default {
                validate::check_value(spec, default)
                    .unwrap_or_else(|e| panic!("default of {} invalid: {e}", spec.name));
            }
        }
    }
    for spec in TOPIC_KEYS {
        assert!(spec.dynamic, "{}", spec.name);
        if let Some(bk) = spec.broker_key {
            let b = find_broker_key(bk);
            assert!(
                b.is_none_or(|b| b.ty == spec.ty
                    || (b.ty, spec.ty) == (ConfigType::Long, ConfigType::Int)
                    || (b.ty, spec.ty) == (ConfigType::Int, ConfigType::Long)),
                "{} and its synonym {bk} differ in type",
                spec.name
            );
        }
    }
}

#[test]
fn typed_topic_values() {
    let t = resolve(
        &BrokerConfig::default(),
        &ov(&[
            ("cleanup.policy", "compact, DELETE"),
            ("message.timestamp.type", "LogAppendTime"),
            ("compression.type", "zstd"),
        ]),
    )
    .unwrap();
    assert!(t.cleanup_policy.compact && t.cleanup_policy.delete);
    assert_eq!(
        t.cleanup_policy.iter().collect::<Vec<_>>(),
        ["delete", "compact"]
    );
    assert_eq!(t.message_timestamp_type, TimestampType::LogAppendTime);
    assert!(t.message_timestamp_type == "LogAppendTime");
    assert_eq!(t.compression_type, CompressionType::Zstd);
    let compact_only = resolve(
        &BrokerConfig::default(),
        &ov(&[("cleanup.policy", "compact")]),
    )
    .unwrap();
    assert!(!compact_only.cleanup_policy.delete);
}

#[test]
fn ratio_is_checked() {
    assert!(validate_topic_overrides(&ov(&[("min.cleanable.dirty.ratio", "0.1")])).is_ok());
    let e = validate_topic_overrides(&ov(&[("min.cleanable.dirty.ratio", "1.5")])).unwrap_err();
    assert!(e.to_string().contains("[0.0, 1.0]"), "{e}");
}

#[test]
fn topic_synonyms_follow_kafka_order() {
    let broker = load(None, &["log.retention.minutes=10".into()]).unwrap();
    let d = describe_topic(&broker, &ov(&[("retention.ms", "5000")]));
    let e = d.iter().find(|e| e.name == "retention.ms").unwrap();
    let syn: Vec<(&str, Option<&str>, ConfigSource)> = e
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.value.as_deref(), s.source))
        .collect();
    assert_eq!(
        syn,
        vec![
            ("retention.ms", Some("5000"), ConfigSource::DynamicTopic),
            (
                "log.retention.minutes",
                Some("10"),
                ConfigSource::StaticBroker
            ),
            ("log.retention.hours", Some("168"), ConfigSource::Default),
        ]
    );
    // Without the override the broker's minutes supply the value.
    let d = describe_topic(&broker, &BTreeMap::new());
    let e = d.iter().find(|e| e.name == "retention.ms").unwrap();
    assert_eq!(e.value.as_deref(), Some("600000"));
    assert_eq!(e.source, ConfigSource::StaticBroker);
    assert_eq!(e.synonyms[0].name, "log.retention.minutes");
    assert!(!e.read_only);
    // A topic key without a broker synonym has none.
    let e = d.iter().find(|e| e.name == "delete.retention.ms").unwrap();
    assert!(e.synonyms.is_empty());
    // Broker keys: read-only, synonyms from the key itself on.
    let b = describe_broker(&broker);
    let hours = b.iter().find(|e| e.name == "log.retention.hours").unwrap();
    assert!(!hours.read_only, "a dynamic broker key");
    assert!(
        b.iter()
            .find(|e| e.name == "num.partitions")
            .unwrap()
            .read_only
    );
    assert_eq!(hours.synonyms.len(), 1);
    assert_eq!(hours.synonyms[0].source, ConfigSource::Default);
    let minutes = b
        .iter()
        .find(|e| e.name == "log.retention.minutes")
        .unwrap();
    assert_eq!(minutes.synonyms[0].source, ConfigSource::StaticBroker);
    assert_eq!(minutes.synonyms.len(), 2);
}

#[test]
fn alter_replaces_the_whole_set() {
    let new = alter_topic_overrides(&[
        ("retention.ms".into(), Some("1000".into())),
        ("cleanup.policy".into(), Some("compact".into())),
    ])
    .unwrap();
    assert_eq!(
        new,
        ov(&[("retention.ms", "1000"), ("cleanup.policy", "compact")])
    );
    assert_eq!(alter_topic_overrides(&[]).unwrap(), BTreeMap::new());
    let dup = alter_topic_overrides(&[
        ("retention.ms".into(), Some("1".into())),
        ("retention.ms".into(), Some("2".into())),
    ])
    .unwrap_err();
    assert_eq!(dup.error_code(), 42);
    let null = alter_topic_overrides(&[("retention.ms".into(), None)]).unwrap_err();
    assert_eq!(null.error_code(), 42);
    let unknown = alter_topic_overrides(&[("no.such".into(), Some("1".into()))]).unwrap_err();
    assert_eq!(unknown.error_code(), 40);
    assert!(unknown.to_string().contains("no.such"));
}

#[test]
fn incremental_ops() {
    let current = ov(&[("retention.ms", "1000"), ("segment.bytes", "2000")]);
    let op = |name: &str, op: AlterOp, value: Option<&str>| {
        (name.to_string(), op, value.map(str::to_string))
    };
    let new = incremental_alter_topic_overrides(
        &current,
        &[
            op("retention.ms", AlterOp::Delete, None),
            op("max.message.bytes", AlterOp::Set, Some("500")),
            op("cleanup.policy", AlterOp::Append, Some("compact")),
        ],
    )
    .unwrap();
    assert_eq!(
        new,
        ov(&[
            ("segment.bytes", "2000"),
            ("max.message.bytes", "500"),
            // APPEND starts from the Kafka default when the topic does not set the key.
            ("cleanup.policy", "delete,compact"),
        ])
    );
    let again = incremental_alter_topic_overrides(
        &new,
        &[op(
            "cleanup.policy",
            AlterOp::Append,
            Some("compact,delete"),
        )],
    )
    .unwrap();
    assert_eq!(again["cleanup.policy"], "delete,compact", "no duplicates");
    let less = incremental_alter_topic_overrides(
        &new,
        &[op("cleanup.policy", AlterOp::Subtract, Some("delete"))],
    )
    .unwrap();
    assert_eq!(less["cleanup.policy"], "compact");
    let e = incremental_alter_topic_overrides(
        &current,
        &[op("retention.ms", AlterOp::Append, Some("5"))],
    )
    .unwrap_err();
    assert_eq!(e.error_code(), 40);
    assert!(e.to_string().contains("not LIST"), "{e}");
    let e = incremental_alter_topic_overrides(
        &current,
        &[
            op("retention.ms", AlterOp::Set, Some("5")),
            op("retention.ms", AlterOp::Delete, None),
        ],
    )
    .unwrap_err();
    assert_eq!(e.error_code(), 42);
    let e = incremental_alter_topic_overrides(&current, &[op("retention.ms", AlterOp::Set, None)])
        .unwrap_err();
    assert_eq!(e.error_code(), 42);
    // Deleting a key that is not set is a no-op.
    assert_eq!(
        incremental_alter_topic_overrides(&current, &[op("flush.ms", AlterOp::Delete, None)])
            .unwrap(),
        current
    );
    // Values are validated by `resolve` afterwards: subtracting every policy leaves an
    // empty list, which it refuses.
    let empty = incremental_alter_topic_overrides(
        &ov(&[("cleanup.policy", "delete")]),
        &[op("cleanup.policy", AlterOp::Subtract, Some("delete"))],
    )
    .unwrap();
    assert!(resolve(&BrokerConfig::default(), &empty).is_err());
    assert_eq!(AlterOp::from_i8(3), Some(AlterOp::Subtract));
    assert_eq!(AlterOp::from_i8(4), None);
}

#[test]
fn docs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md");
    let rendered = render_markdown();
    if std::env::var_os("UPDATE_CONFIG_DOCS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    for spec in BROKER_KEYS.iter().chain(TOPIC_KEYS) {
        assert!(
            on_disk.contains(&format!("| `{}` |", spec.name)),
            "docs/configuration.md does not list {} (UPDATE_CONFIG_DOCS=1 regenerates it)",
            spec.name
        );
    }
    assert_eq!(
        on_disk, rendered,
        "docs/configuration.md is stale: UPDATE_CONFIG_DOCS=1 regenerates it"
    );
}

#[test]
fn dynamic_broker_configs_layer_over_static() {
    let b = load(
        None,
        &[
            "log.retention.hours=1".into(),
            "message.max.bytes=5000".into(),
        ],
    )
    .unwrap();
    let cluster = ov(&[("log.retention.ms", "7000"), ("message.max.bytes", "4000")]);
    let node = ov(&[("message.max.bytes", "3000")]);
    let layered = b.with_dynamic(Some(&cluster), Some(&node)).unwrap();
    assert_eq!(
        layered.log_retention_ms, 7000,
        "dynamic ms over static hours"
    );
    assert_eq!(
        layered.message_max_bytes, 3000,
        "node over cluster over static"
    );
    assert_eq!(
        layered.source_of("log.retention.hours"),
        ConfigSource::DynamicDefaultBroker
    );
    assert_eq!(
        layered.source_of_key("log.retention.hours"),
        ConfigSource::StaticBroker
    );
    let t = resolve(&layered, &BTreeMap::new()).unwrap();
    assert_eq!((t.retention_ms, t.max_message_bytes), (7000, 3000));
    let d = describe_topic(&layered, &BTreeMap::new());
    let e = d.iter().find(|e| e.name == "max.message.bytes").unwrap();
    assert_eq!(e.source, ConfigSource::DynamicBroker);
    let syn: Vec<(&str, Option<&str>, ConfigSource)> = e
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.value.as_deref(), s.source))
        .collect();
    assert_eq!(
        syn,
        vec![
            (
                "message.max.bytes",
                Some("3000"),
                ConfigSource::DynamicBroker
            ),
            (
                "message.max.bytes",
                Some("4000"),
                ConfigSource::DynamicDefaultBroker
            ),
            (
                "message.max.bytes",
                Some("5000"),
                ConfigSource::StaticBroker
            ),
            ("message.max.bytes", Some("1048588"), ConfigSource::Default),
        ]
    );
    let broker = describe_broker(&layered);
    let e = broker
        .iter()
        .find(|e| e.name == "log.retention.ms")
        .unwrap();
    assert_eq!(
        (e.value.as_deref(), e.source, e.read_only),
        (Some("7000"), ConfigSource::DynamicDefaultBroker, false)
    );
    let e = broker.iter().find(|e| e.name == "num.partitions").unwrap();
    assert!(e.read_only);
    // No dynamic configs: the static config as it was.
    let plain = b.with_dynamic(None, None).unwrap();
    assert_eq!(plain.message_max_bytes, 5000);
    assert_eq!(
        plain.source_of("message.max.bytes"),
        ConfigSource::StaticBroker
    );
}

#[test]
fn broker_alterations_take_dynamic_keys_only() {
    let ok = alter_broker_overrides(&[("log.retention.ms".into(), Some("1000".into()))]).unwrap();
    assert_eq!(ok, ov(&[("log.retention.ms", "1000")]));
    let e = alter_broker_overrides(&[("num.partitions".into(), Some("3".into()))]).unwrap_err();
    assert_eq!(e.error_code(), 42);
    assert!(
        e.to_string()
            .contains("Cannot update these configs dynamically"),
        "{e}"
    );
    let e = incremental_alter_broker_overrides(
        &BTreeMap::new(),
        &[("no.such".into(), AlterOp::Set, Some("1".into()))],
    )
    .unwrap_err();
    assert_eq!(e.error_code(), 42);
    let appended = incremental_alter_broker_overrides(
        &BTreeMap::new(),
        &[(
            "log.cleanup.policy".into(),
            AlterOp::Append,
            Some("compact".into()),
        )],
    )
    .unwrap();
    assert_eq!(appended["log.cleanup.policy"], "delete,compact");
    assert!(validate_broker_overrides(&ov(&[("log.segment.bytes", "1")])).is_err());
    assert!(validate_broker_overrides(&ov(&[("log.segment.bytes", "100000")])).is_ok());
}

#[test]
fn sasl_keys() {
    let c = load(
        None,
        &[
            "listeners=SASL_PLAINTEXT://:9094".into(),
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256".into(),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";".into(),
            "sasl.server.max.receive.size=1000".into(),
        ],
    )
    .unwrap();
    assert_eq!(c.sasl.enabled_mechanisms, ["PLAIN", "SCRAM-SHA-256"]);
    assert_eq!(c.sasl.server_max_receive_size, 1000);
    assert!(c
        .sasl
        .jaas_for("SASL_PLAINTEXT", "plain")
        .unwrap()
        .contains("user_a"));
    assert_eq!(c.sasl.jaas_for("SASL_PLAINTEXT", "SCRAM-SHA-256"), None);
    // Other per-listener keys are not taken.
    let e = load(None, &["listener.name.x.ssl.keystore.location=/k".into()]).unwrap_err();
    assert_eq!(e.key(), Some("listener.name.x.ssl.keystore.location"));
}
