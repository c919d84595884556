//! The native client over TLS (rustls, ring): against the null broker serving TLS with a
//! certificate from a CA this test makes (openssl CLI), it negotiates the suite it was
//! limited to and consumes; a client trusting another CA, or speaking plaintext, is refused.
#![allow(clippy::unwrap_used)] // a test or example: a failed unwrap is the failure report

use std::time::Duration;

use bench::engine::ClientKind;
use bench::fetch_cost::make_certs;
use bench::native::connect;
use bench::native::tls::client_config;
use bench::null_broker::{NullBroker, NullBrokerArgs};
use bench::perf;

fn openssl_present() -> bool {
    std::process::Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn tls_props(ca: &std::path::Path) -> Vec<(String, String)> {
    vec![
        ("security.protocol".into(), "SSL".into()),
        ("ssl.truststore.location".into(), ca.display().to_string()),
        ("ssl.cipher.suites".into(), "TLS_AES_128_GCM_SHA256".into()),
    ]
}

#[test]
fn native_consumer_over_tls() {
    let _turn = crate::common::turn(module_path!());
    if !openssl_present() {
        eprintln!("skipped: no openssl CLI to make certificates");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("ours");
    let other = dir.path().join("other");
    std::fs::create_dir_all(&ours).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let certs = make_certs(&ours).unwrap();
    let foreign = make_certs(&other).unwrap();
    let broker = NullBroker::start(&NullBrokerArgs {
        record_size: 100,
        tls_keystore: Some(certs.keystore.clone()),
        ..Default::default()
    })
    .unwrap();
    let addr = broker.addr().to_string();

    let config = client_config(&tls_props(&certs.ca)).unwrap().unwrap();
    let conn = connect(&addr, "tls-test", Duration::from_secs(10), Some(&config)).unwrap();
    let suite = conn.tls_description().unwrap();
    assert!(suite.contains("TLS13_AES_128_GCM_SHA256"), "{suite}");

    let mut opts = perf::ConsumerOpts::new(&addr, "tls-topic", 5000);
    opts.client = ClientKind::Native;
    opts.props = tls_props(&certs.ca);
    opts.quiet = true;
    let report = perf::run_consumer(&opts).unwrap();
    assert!(report.messages >= 5000, "{} records", report.messages);
    assert!(
        broker
            .counters()
            .fetch_requests
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );

    let wrong = client_config(&tls_props(&foreign.ca)).unwrap().unwrap();
    let refused = connect(&addr, "tls-test", Duration::from_secs(10), Some(&wrong));
    assert!(refused.is_err(), "a certificate of another CA was accepted");
    let plain = connect(&addr, "tls-test", Duration::from_secs(2), None);
    assert!(
        plain.is_err(),
        "plaintext ApiVersions answered over a TLS port"
    );
}
